"""The neuron backend's work in flight: the thread that launches a rank's collectives in order,
the Work (and its torch Future) a collective returns, and the wait that meets the peers."""

from __future__ import annotations

import concurrent.futures
import queue
import re
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from pjrt_neuron import pjrt_capi
from pjrt_neuron.torch_native._runtime import runtime
from pjrt_neuron.torch_native._storage import assign, value

# How long a collective may wait for its peers before the ranks compare what they launched
# (through the job's store), so ranks that disagree fail in seconds, not at the collective timeout.
_PROBE_SECONDS = 2.0
_POLL_SECONDS = 0.25


def _unwrap(source: torch.futures.Future):
    return source.value()  # raises the collective's error, failing the chained future


class _Work(dist._Work):
    """One collective in flight: `wait()` returns when it has run on this rank's core (its
    results are in the tensors by then), or raises DistBackendError saying why it did not."""

    def __init__(self, launches: Launches, sequence: int, what: str, done: concurrent.futures.Future,
                 results: list):
        super().__init__()
        self._launches, self._sequence, self._what = launches, sequence, what
        self._done = done
        self._results = results
        # A Python Future's set_exception stores the exception as its value, which C++ readers
        # (DDP's reducer) take for the result and crash on; a callback that raises marks the
        # chained future as failed where C++ sees it.
        self._source = torch.futures.Future(devices=[])
        self._future = self._source.then(_unwrap)
        self._settled = threading.Lock()
        self._error: BaseException | None = None
        done.add_done_callback(self._settle)

    def _settle(self, done: concurrent.futures.Future) -> None:
        error = done.exception()
        with self._settled:
            if self._source.done():
                return
            if error is None:
                self._source.set_result(self._results)
            else:
                self._error = self._launches.explain(error, self._sequence, self._what)
                self._source.set_exception(self._error)

    def _fail(self, error: BaseException) -> None:
        with self._settled:
            if self._error is None:
                self._error = error
            if not self._source.done():
                self._source.set_exception(error)

    def wait(self, timeout: timedelta = timedelta(0)) -> bool:
        limit = timeout.total_seconds() if timeout and timeout.total_seconds() > 0 else None
        self._launches.await_(self, limit)
        return True

    def is_completed(self) -> bool:
        return self._future.done()

    def is_success(self) -> bool:
        return self._future.done() and self._error is None

    def exception(self):
        return self._error

    def get_future(self) -> torch.futures.Future:
        return self._future

    def result(self) -> list:
        self.wait()
        return self._results

    def synchronize(self) -> None:
        self.wait()


# ------------------------------------------------------------------ the process group


class _Launcher:
    """One thread that launches this rank's collectives in the order they were issued. A daemon
    thread: a collective that can never run (its peers left, or launched something else) must not
    keep the process from exiting, and the exit is what releases the peers' launches."""

    def __init__(self):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="neuron-collectives", daemon=True)
        self._thread.start()

    def submit(self, fn) -> concurrent.futures.Future:
        done: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put((fn, done))
        return done

    def _run(self) -> None:
        while True:
            fn, done = self._queue.get()
            if not done.set_running_or_notify_cancel():
                continue
            try:
                done.set_result(fn())
            except BaseException as e:  # noqa: BLE001 (the caller's wait() raises it)
                done.set_exception(e)


class Launches:
    """This rank's collectives: numbered in the order they were issued, launched in that order on
    one thread, and awaited; a wait that lasts compares with the peers, through the job's store,
    what each launched as that collective."""

    def __init__(self, store, rank: int, size: int, timeout: float):
        self._store = store
        self._rank, self._size = rank, size
        self._timeout = timeout
        self._sequence = 0
        self._lock = threading.Lock()
        self._launcher = _Launcher()

    def submit(self, what: str, device_tensor, program, inputs, targets, results) -> _Work:
        """Launches `program` over the inputs' elements on this rank's thread; its outputs go into
        `targets` when it has run. The work's result is `results`."""
        index = device_tensor.device.index
        buffers = [value(t) for t in inputs]  # read now: later writes to the inputs do not count
        with self._lock:
            sequence = self._sequence
            self._sequence += 1
        rt = runtime()

        def launch():
            outputs, completion = rt.execute_collective(program, buffers, index)
            completion.await_()
            for target, buffer in zip(targets, outputs):
                assign(target, buffer)

        done = self._launcher.submit(launch)
        return _Work(self, sequence, what, done, results)

    def await_(self, work: _Work, limit: float | None) -> None:
        """Waits for the work; after a while without it, compares with the peers what each launched
        as this collective (through the job's store), so ranks that disagree fail now, naming both."""
        start = time.monotonic()
        deadline = start + (limit if limit is not None else self._timeout)
        posted = False
        while True:
            try:
                work._done.result(timeout=_POLL_SECONDS if posted else _PROBE_SECONDS)
                break
            except concurrent.futures.TimeoutError:
                pass
            except Exception:  # noqa: BLE001 (the launch failed: see below)
                if posted:
                    self._compare(work)  # a peer that found the mismatch first may have left already
                break
            if not posted:
                self._store.set(self._key(work._sequence, self._rank), work._what)
                posted = True
            self._compare(work)
            if time.monotonic() > deadline:
                missing = [r for r in range(self._size) if r != self._rank
                           and not self._store.check([self._key(work._sequence, r)])]
                error = dist.DistBackendError(
                    f"the neuron backend: {work._what} (collective #{work._sequence} of rank {self._rank}) "
                    f"timed out after {time.monotonic() - start:.0f} s; rank(s) {missing} never reached it")
                work._fail(error)
                raise error
        if work._done.exception() is not None:
            work._settle(work._done)
            raise work._error
        if posted:  # it ran after all: no peer needs this rank's entry any more
            self._store.delete_key(self._key(work._sequence, self._rank))

    def _compare(self, work: _Work) -> None:
        for peer in range(self._size):
            if peer == self._rank:
                continue
            key = self._key(work._sequence, peer)
            if not self._store.check([key]):
                continue
            theirs = self._store.get(key).decode()
            if theirs != work._what:
                error = dist.DistBackendError(
                    f"the neuron backend: the ranks launched different collectives as collective #{work._sequence}: "
                    f"rank {self._rank} ran {work._what}, rank {peer} ran {theirs}; every rank must run the same "
                    "collectives, in the same order, with the same shapes and dtypes")
                work._fail(error)
                raise error

    @staticmethod
    def _key(sequence: int, rank: int) -> str:
        return f"neuron-collective/{sequence}/{rank}"

    def explain(self, error: BaseException, sequence: int, what: str) -> BaseException:
        """A launch's failure as DistBackendError, naming the rank a dead peer was."""
        if isinstance(error, dist.DistBackendError):
            return error
        text = str(error)
        rank = None
        match = re.search(r"process (\d+) \(pid", text)
        if match:
            rank = int(match.group(1))
        else:
            match = re.search(r"needs NeuronCore (\d+)", text)
            if match:
                core = int(match.group(1))
                rank = next((d.process_index for d in runtime().job_devices if d.id == core), None)
        if rank is not None and ("exited" in text or "no live process" in text):
            lead = f"rank {rank} has exited (or never joined the job)"
        elif isinstance(error, pjrt_capi.PjrtError) and error.code_name == "DEADLINE_EXCEEDED":
            lead = "some ranks never ran it"
        else:
            lead = "it failed"
        return dist.DistBackendError(f"the neuron backend: {what} (collective #{sequence} of rank {self._rank}) "
                                     f"did not run: {lead}: {text}")
