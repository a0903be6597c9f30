"""The lowering worker: a child process that turns op calls into StableHLO (_lowering.lower).

torch-mlir is a native library that can crash or loop on an op it does not expect; in a process of
its own, that costs the op (NotImplementedError, saying so) and not the user's training run. The
worker starts with the device's runtime and lives as long as the process; a dead one is replaced
at the next op. Messages are pickled, each behind its length, over the worker's stdin and a pipe
of its own (its stdout goes to stderr, so nothing a library prints can break a message).
"""

from __future__ import annotations

import atexit
import os
import pickle
import struct
import subprocess
import sys
import threading

LOWERING_TIMEOUT_SECONDS = 300
_HEADER = struct.Struct("<Q")


def _write(stream, message) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read(stream):
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


def _op(name: tuple):
    import torch

    if name[0] == "graph":  # a whole graph of torch.compile, encoded
        from pjrt_neuron.torch_native._lowering import decode_graph

        return decode_graph(pickle.loads(name[1]))
    namespace, op_name, overload = name
    return getattr(getattr(getattr(torch.ops, namespace), op_name), overload or "default")


def serve(requests, replies) -> None:
    from pjrt_neuron.torch_native import _lowering

    _warm_up(_lowering)
    while True:
        try:
            name, args_template, kwargs_template, inputs, aliased, floats, may_lift = _read(requests)
        except EOFError:
            return
        try:
            _write(replies, ("ok", _lowering.lower(_op(name), args_template, kwargs_template, inputs, aliased,
                                                   floats, may_lift)))
        except _lowering.Unsupported as e:
            _write(replies, ("unsupported", str(e)))
        except Exception as e:  # anything else is this op's problem, not the worker's
            _write(replies, ("unsupported", f"lowering failed: {type(e).__name__}: {str(e)[:300]}"))


def _warm_up(lowering) -> None:
    """The first lowering pays for torch-mlir's imports, its decomposition tables and an MLIR
    context (seconds); the worker starts with the runtime, so it pays them before the first op asks."""
    import torch

    try:
        lowering.lower(torch.ops.aten.add.Tensor, (lowering.Slot(0), lowering.Slot(1)), {},
                       (((1,), torch.float32), ((1,), torch.float32)), frozenset())
    except Exception:  # noqa: BLE001 (the real request will say what is wrong)
        pass


class Worker:
    """The parent's end: one request at a time, a dead or stuck child replaced."""

    def __init__(self):
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._replies = None

    def start(self) -> None:
        with self._lock:
            self._ensure()

    def _ensure(self) -> None:
        if self._process is not None and self._process.poll() is None:
            return
        read_end, write_end = os.pipe()
        env = {**os.environ, "PJRT_NEURON_TORCH_DEVICE": "off", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "pjrt_neuron.torch_native._lowering_worker", str(write_end)],
            stdin=subprocess.PIPE, stdout=sys.stderr.fileno() if _has_fileno(sys.stderr) else None,
            pass_fds=(write_end,), env=env)
        os.close(write_end)
        self._replies = os.fdopen(read_end, "rb")

    def lower(self, func, *request):
        from pjrt_neuron.torch_native._lowering import _meta_device

        name = (func.namespace, func._schema.name.split("::")[1], func._overloadname)
        args_template, kwargs_template, *rest = request
        # The worker has no neuron device; the op is traced on meta tensors anyway.
        request = (_meta_device(args_template), {k: _meta_device(v) for k, v in kwargs_template.items()}, *rest)
        return self._request(name, *request)

    def _request(self, name, *request):
        from pjrt_neuron.torch_native._lowering import Unsupported

        with self._lock:
            self._ensure()
            process = self._process
            try:
                _write(process.stdin, (name, *request))
                reply = self._reply(process)
            except (EOFError, BrokenPipeError, TimeoutError) as e:
                try:
                    status = process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    status = None
                self._stop()
                why = (f"timed out after {LOWERING_TIMEOUT_SECONDS} s" if isinstance(e, TimeoutError)
                       else f"ended with status {status}")
                raise Unsupported(f"torch-mlir's lowering of it {why} (in the lowering worker; this process "
                                  "is unharmed)") from None
        kind, payload = reply
        if kind != "ok":
            raise Unsupported(payload)
        return payload

    def lower_graph(self, graph: bytes, args_template: tuple, inputs: tuple):
        """A pickled FX graph of ATen ops (torch.compile's), called with `args_template`."""
        return self._request(("graph", graph), args_template, {}, inputs, frozenset(), (), None)

    def _reply(self, process):
        result: list = []

        def read():
            try:
                result.append(_read(self._replies))
            except Exception as e:
                result.append(e)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(LOWERING_TIMEOUT_SECONDS)
        if reader.is_alive():
            raise TimeoutError
        if isinstance(result[0], Exception):
            raise EOFError
        return result[0]

    def stop(self) -> None:
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process.stdin.close()
        if self._replies is not None:
            self._replies.close()
        self._process = self._replies = None


def _has_fileno(stream) -> bool:
    try:
        stream.fileno()
        return True
    except (AttributeError, ValueError, OSError):
        return False


worker = Worker()
atexit.register(worker.stop)


def _limit_memory() -> None:
    """An op that makes torch-mlir allocate without bound fails alone instead of starving the machine."""
    import resource

    limit = int(os.environ.get("PJRT_NEURON_LOWERING_MEMORY_BYTES", 12 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


if __name__ == "__main__":
    _limit_memory()
    replies = os.fdopen(int(sys.argv[1]), "wb")
    requests = sys.stdin.buffer
    os.dup2(2, 1)  # stray prints go to stderr, never into a reply
    serve(requests, replies)
