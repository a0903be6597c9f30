"""torch.distributed's backend for `neuron` tensors.

Each collective is a small replicated program (StableHLO all_reduce, all_gather, reduce_scatter)
that every rank compiles alike and launches on its own NeuronCore; the plugin's multi-process job
makes the ranks' launches meet (the instance daemon on the simulator; on the Trainium engine, not
yet run there, the Neuron runtime's collectives), so no element is copied out to the rank's host
memory as gloo would. A rank's launches go through one thread of its own, in the order the rank
issued them, so a collective is asynchronous to the caller and every rank's k-th collective meets
every other rank's k-th, as NCCL's stream order has it. One NeuronCore per rank; the whole job.

Registered for the device type `neuron` (gloo keeps CPU tensors): under torchrun,
`dist.init_process_group()` (or `"cpu:gloo,neuron:neuron"`) and tensors on the rank's own core
(`neuron:0`, also named `neuron:LOCAL_RANK`; _runtime).
"""

from __future__ import annotations

import concurrent.futures
import functools
import queue
import re
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import Backend as _C10dBackend
from torch.distributed import ReduceOp

from pjrt_neuron import pjrt_capi
from pjrt_neuron.torch_native._programs import tensor_type
from pjrt_neuron.torch_native._runtime import check_dtype, runtime
from pjrt_neuron.torch_native._storage import NeuronTensor, assign, value

NAME = "neuron"
# How long a collective may wait for its peers before the ranks compare what they launched
# (through the job's store), so ranks that disagree fail in seconds, not at the collective timeout.
_PROBE_SECONDS = 2.0
_POLL_SECONDS = 0.25


def register() -> None:
    """Makes `neuron` the default backend of `neuron` tensors in `init_process_group`."""
    if not dist.is_available():
        return
    if NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(NAME, _create, extended_api=True, devices=[NAME])


def _create(options, backend_options=None):
    backend = ProcessGroupNeuron(options.store, options.group_rank, options.group_size, options.timeout,
                                 list(options.global_ranks_in_group or []))
    _keep_gloo_for_cpu(options)
    return backend


def _keep_gloo_for_cpu(options) -> None:
    """`init_process_group()` with no backend names only the accelerator's; CPU tensors of the
    same job keep gloo, as they do beside nccl (`"cpu:gloo,neuron:neuron"` says it explicitly)."""
    group = options.process_group
    if group is None or not dist.is_gloo_available():
        return
    try:
        group._get_backend(torch.device("cpu"))
        return  # the user's backend string gave CPU tensors one
    except RuntimeError:
        pass
    store = dist.PrefixStore("cpu-gloo/", options.store)
    gloo = dist.ProcessGroupGloo(store, options.group_rank, options.group_size, options.timeout)
    group._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, gloo)


# ------------------------------------------------------------------ programs


_REGION_OPS = {"sum": "add", "product": "multiply", "max": "maximum", "min": "minimum",
               "band": "and", "bor": "or", "bxor": "xor"}
_BOOL_OPS = {"sum": "or", "max": "or", "bor": "or", "product": "and", "min": "and", "band": "and", "bxor": "xor"}
_REDUCE_OPS = {ReduceOp.SUM: "sum", ReduceOp.AVG: "avg", ReduceOp.PRODUCT: "product", ReduceOp.MAX: "max",
               ReduceOp.MIN: "min", ReduceOp.BAND: "band", ReduceOp.BOR: "bor", ReduceOp.BXOR: "bxor"}


def _reduce_name(op) -> str:
    for known, name in _REDUCE_OPS.items():
        if op == known:
            return name
    raise NotImplementedError(f"the neuron backend does not support the reduce op {op} "
                              "(supported: SUM, AVG, PRODUCT, MAX, MIN, BAND, BOR, BXOR)")


def _region(reduce: str, dtype: torch.dtype) -> str:
    """The reduction's body, as an all_reduce or reduce_scatter takes it."""
    if dtype == torch.bool:
        op = _BOOL_OPS[reduce]
    else:
        if reduce in ("band", "bor", "bxor") and (dtype.is_floating_point or dtype == torch.bool):
            raise TypeError(f"the neuron backend: {reduce.upper()} needs an integer tensor, not {dtype}")
        op = _REGION_OPS["sum" if reduce == "avg" else reduce]
    scalar = tensor_type((), dtype)
    return (f"({{\n      ^bb0(%x: {scalar}, %y: {scalar}):\n        %r = stablehlo.{op} %x, %y : {scalar}\n"
            f"        stablehlo.return %r : {scalar}\n    }})")


def _groups(world: int) -> str:
    ranks = ", ".join(str(r) for r in range(world))
    return f"replica_groups = dense<[[{ranks}]]> : tensor<1x{world}xi64>"


def _module(inputs: list[str], outputs: list[str], body: list[str]) -> str:
    params = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(inputs))
    results = outputs[0] if len(outputs) == 1 else "(" + ", ".join(outputs) + ")"
    lines = "\n    ".join(body)
    return f"module {{\n  func.func @main({params}) -> {results} {{\n    {lines}\n  }}\n}}\n"


def _average(body: list[str], value_name: str, shape, dtype, world: int) -> str:
    t = tensor_type(shape, dtype)
    count = f"{float(world)}" if dtype.is_floating_point else str(world)
    body += [f"%world = stablehlo.constant dense<{count}> : {t}",
             f"%avg = stablehlo.divide {value_name}, %world : {t}"]
    return "%avg"


@functools.lru_cache(maxsize=None)
def _all_reduce_program(shape, dtype, reduce: str, world: int):
    if reduce in ("band", "bor", "bxor") and dtype != torch.bool:
        return _gathered_reduce_program(shape, dtype, reduce, world)
    t = tensor_type(shape, dtype)
    body = [f'%sum = "stablehlo.all_reduce"(%arg0) {_region(reduce, dtype)} {{{_groups(world)}}} : ({t}) -> {t}']
    result = _average(body, "%sum", shape, dtype, world) if reduce == "avg" else "%sum"
    body.append(f"return {result} : {t}")
    return runtime().compile(_module([t], [t], body), num_replicas=world)


def _gathered_reduce_program(shape, dtype, reduce: str, world: int):
    """A bitwise all_reduce of integers, which XLA's CPU collectives do not reduce: every rank's
    elements gathered into rows, then reduced on each rank alike."""
    _region(reduce, dtype)  # refuses floats
    numel = _numel(shape)
    t, row, rows = tensor_type(shape, dtype), tensor_type((1, numel), dtype), tensor_type((world, numel), dtype)
    flat, scalar = tensor_type((numel,), dtype), tensor_type((), dtype)
    body = [f"%row = stablehlo.reshape %arg0 : ({t}) -> {row}",
            f'%rows = "stablehlo.all_gather"(%row) {{all_gather_dim = 0 : i64, {_groups(world)}}} : ({row}) -> {rows}',
            f"%init = stablehlo.constant dense<{-1 if reduce == 'band' else 0}> : {scalar}",
            f'%flat = "stablehlo.reduce"(%rows, %init) ({{\n      ^bb0(%x: {scalar}, %y: {scalar}):\n'
            f"        %r = stablehlo.{_REGION_OPS[reduce]} %x, %y : {scalar}\n        stablehlo.return %r : {scalar}\n"
            f"    }}) {{dimensions = array<i64: 0>}} : ({rows}, {scalar}) -> {flat}",
            f"%out = stablehlo.reshape %flat : ({flat}) -> {t}", f"return %out : {t}"]
    return runtime().compile(_module([t], [t], body), num_replicas=world)


_INTS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


_INTS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@functools.lru_cache(maxsize=None)
def _broadcast_program(shape, dtype, src: int, world: int):
    """Every rank's elements but `src`'s become zero bits, then a sum over the ranks: the source's
    bits arrive exactly (floats are summed as integers of their width, so -0.0 and NaNs survive)."""
    t = tensor_type(shape, dtype)
    body = []
    if dtype == torch.bool:
        bits_dtype, source, zero = dtype, "%arg0", "false"
    elif dtype.is_floating_point:
        bits_dtype, source, zero = _INTS[dtype.itemsize], "%bits", "0"
        body.append(f"%bits = stablehlo.bitcast_convert %arg0 : ({t}) -> {tensor_type(shape, bits_dtype)}")
    else:
        bits_dtype, source, zero = dtype, "%arg0", "0"
    bits, pred = tensor_type(shape, bits_dtype), tensor_type(shape, torch.bool)
    body += ["%id = stablehlo.replica_id : tensor<ui32>",
             f"%src = stablehlo.constant dense<{src}> : tensor<ui32>",
             "%is_src = stablehlo.compare EQ, %id, %src : (tensor<ui32>, tensor<ui32>) -> tensor<i1>",
             f"%mask = stablehlo.broadcast_in_dim %is_src, dims = [] : (tensor<i1>) -> {pred}",
             f"%zero = stablehlo.constant dense<{zero}> : {bits}",
             f"%mine = stablehlo.select %mask, {source}, %zero : {pred}, {bits}",
             f'%sum = "stablehlo.all_reduce"(%mine) {_region("sum", bits_dtype)} {{{_groups(world)}}} : ({bits}) -> {bits}']
    if bits_dtype is dtype:
        body.append(f"return %sum : {t}")
    else:
        body += [f"%out = stablehlo.bitcast_convert %sum : ({bits}) -> {t}", f"return %out : {t}"]
    return runtime().compile(_module([t], [t], body), num_replicas=world)


@functools.lru_cache(maxsize=None)
def _all_gather_program(in_shape, out_shapes: tuple, dtype, world: int):
    """Gathers each rank's elements into rows (world, numel), then gives each output: one output
    of all rows (all_gather_into_tensor), or one output per row (all_gather into a list)."""
    numel = _numel(in_shape)
    t_in, row, rows = tensor_type(in_shape, dtype), tensor_type((1, numel), dtype), tensor_type((world, numel), dtype)
    body = [f"%row = stablehlo.reshape %arg0 : ({t_in}) -> {row}",
            f'%rows = "stablehlo.all_gather"(%row) {{all_gather_dim = 0 : i64, {_groups(world)}}} : ({row}) -> {rows}']
    results = []
    if len(out_shapes) == 1:
        out = tensor_type(out_shapes[0], dtype)
        body.append(f"%out0 = stablehlo.reshape %rows : ({rows}) -> {out}")
        results.append(("%out0", out))
    else:
        for r, shape in enumerate(out_shapes):
            out = tensor_type(shape, dtype)
            body += [f"%slice{r} = stablehlo.slice %rows [{r}:{r + 1}, 0:{numel}] : ({rows}) -> {row}",
                     f"%out{r} = stablehlo.reshape %slice{r} : ({row}) -> {out}"]
            results.append((f"%out{r}", out))
    body.append("return " + ", ".join(n for n, _ in results) + " : " + ", ".join(t for _, t in results))
    return runtime().compile(_module([t_in], [t for _, t in results], body), num_replicas=world)


@functools.lru_cache(maxsize=None)
def _reduce_scatter_program(in_shapes: tuple, out_shape, dtype, reduce: str, world: int):
    """The inputs' elements as one row per destination rank (one input of world * n elements, or
    one input per rank), reduced over the ranks; rank r keeps row r."""
    numel = _numel(out_shape)
    rows, row = tensor_type((world, numel), dtype), tensor_type((1, numel), dtype)
    inputs = [tensor_type(s, dtype) for s in in_shapes]
    body = []
    if len(in_shapes) == 1:
        body.append(f"%rows = stablehlo.reshape %arg0 : ({inputs[0]}) -> {rows}")
    else:
        for r, t in enumerate(inputs):
            body.append(f"%row{r} = stablehlo.reshape %arg{r} : ({t}) -> {row}")
        names = ", ".join(f"%row{r}" for r in range(len(inputs)))
        body.append(f"%rows = stablehlo.concatenate {names}, dim = 0 : ({', '.join([row] * len(inputs))}) -> {rows}")
    body.append(f'%mine = "stablehlo.reduce_scatter"(%rows) {_region(reduce, dtype)} '
                f"{{{_groups(world)}, scatter_dimension = 0 : i64}} : ({rows}) -> {row}")
    result = "%mine"
    if reduce == "avg":
        result = _average(body, "%mine", (1, numel), dtype, world)
    out = tensor_type(out_shape, dtype)
    body += [f"%out = stablehlo.reshape {result} : ({row}) -> {out}", f"return %out : {out}"]
    return runtime().compile(_module(inputs, [out], body), num_replicas=world)


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


# ------------------------------------------------------------------ work


class _Work(dist._Work):
    """One collective in flight: `wait()` returns when it has run on this rank's core (its
    results are in the tensors by then), or raises DistBackendError saying why it did not."""

    def __init__(self, group: "ProcessGroupNeuron", sequence: int, what: str, done: concurrent.futures.Future,
                 results: list):
        super().__init__()
        self._group, self._sequence, self._what = group, sequence, what
        self._done = done
        self._results = results
        self._future = torch.futures.Future(devices=[])
        self._settled = threading.Lock()
        self._error: BaseException | None = None
        done.add_done_callback(self._settle)

    def _settle(self, done: concurrent.futures.Future) -> None:
        error = done.exception()
        with self._settled:
            if self._future.done():
                return
            if error is None:
                self._future.set_result(self._results)
            else:
                self._error = self._group._explain(error, self._sequence, self._what)
                self._future.set_exception(self._error)

    def _fail(self, error: BaseException) -> None:
        with self._settled:
            if self._error is None:
                self._error = error
            if not self._future.done():
                self._future.set_exception(error)

    def wait(self, timeout: timedelta = timedelta(0)) -> bool:
        limit = timeout.total_seconds() if timeout and timeout.total_seconds() > 0 else None
        self._group._await(self, limit)
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



class ProcessGroupNeuron(_C10dBackend):
    """The `neuron` backend of one process group: every rank of the job, one NeuronCore each."""

    def __init__(self, store, rank: int, size: int, timeout: timedelta, global_ranks: list[int]):
        super().__init__(rank, size)
        self._store = store
        self._timeout = timeout.total_seconds() if timeout else 1800.0
        self._global_ranks = global_ranks or list(range(size))
        self._sequence = 0
        self._lock = threading.Lock()
        self._launcher = _Launcher()

    @property
    def _runtime(self):
        # At the first collective, not here: a job that only reduces CPU tensors claims no core.
        return runtime()

    def getBackendName(self) -> str:
        return NAME

    def name(self) -> str:
        return NAME

    # -------------------------------------------------------------- collectives

    def allreduce(self, tensors, opts=None):
        reduce = _reduce_name(opts.reduceOp if opts is not None else ReduceOp.SUM)
        tensor = self._one(tensors, "all_reduce")
        what = f"all_reduce({_describe(tensor)}, {reduce})"
        program = _all_reduce_program(tuple(tensor.shape), tensor.dtype, reduce, self.size())
        return self._submit(what, tensor, program, [tensor], [tensor], [tensor])

    def allreduce_coalesced(self, tensors, opts=None):
        works = [self.allreduce([t], opts) for t in tensors]
        return works[-1]

    def broadcast(self, tensors, opts=None):
        tensor = self._one(tensors, "broadcast")
        src = self._global_ranks[opts.rootRank]
        what = f"broadcast({_describe(tensor)}, src={opts.rootRank})"
        program = _broadcast_program(tuple(tensor.shape), tensor.dtype, src, self.size())
        return self._submit(what, tensor, program, [tensor], [tensor], [tensor])

    def allgather(self, output_lists, input_tensors, opts=None):
        tensor = self._one(input_tensors, "all_gather")
        if len(output_lists) != 1 or len(output_lists[0]) != self.size():
            raise ValueError(f"the neuron backend: all_gather needs one list of {self.size()} output tensors")
        outputs = output_lists[0]
        for out in outputs:
            self._check_output(out, tuple(tensor.shape), tensor, "all_gather")
        what = f"all_gather({_describe(tensor)})"
        program = _all_gather_program(tuple(tensor.shape), tuple(tuple(o.shape) for o in outputs), tensor.dtype,
                                      self.size())
        return self._submit(what, tensor, program, [tensor], outputs, output_lists)

    def _allgather_base(self, output, input, opts=None):
        tensor = self._one([input], "all_gather_into_tensor")
        if output.numel() != tensor.numel() * self.size():
            raise ValueError(f"the neuron backend: all_gather_into_tensor's output has {output.numel()} elements, "
                             f"but {self.size()} ranks of {tensor.numel()} make {tensor.numel() * self.size()}")
        self._check_output(output, tuple(output.shape), tensor, "all_gather_into_tensor")
        what = f"all_gather_into_tensor({_describe(tensor)})"
        program = _all_gather_program(tuple(tensor.shape), (tuple(output.shape),), tensor.dtype, self.size())
        return self._submit(what, tensor, program, [tensor], [output], [output])

    all_gather_single = _allgather_base  # the name c10d calls it by since torch 2.12

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        works = [self._allgather_base(o, i, opts) for o, i in zip(outputs, inputs)]
        return works[-1]

    all_gather_single_coalesced = allgather_into_tensor_coalesced

    def _reduce_scatter_base(self, output, input, opts=None):
        reduce = _reduce_name(opts.reduceOp if opts is not None else ReduceOp.SUM)
        tensor = self._one([input], "reduce_scatter_tensor")
        if tensor.numel() != output.numel() * self.size():
            raise ValueError(f"the neuron backend: reduce_scatter_tensor's input has {tensor.numel()} elements, "
                             f"but {self.size()} ranks of {output.numel()} need {output.numel() * self.size()}")
        self._check_output(output, tuple(output.shape), tensor, "reduce_scatter_tensor")
        what = f"reduce_scatter_tensor({_describe(tensor)}, {reduce})"
        program = _reduce_scatter_program((tuple(tensor.shape),), tuple(output.shape), tensor.dtype, reduce,
                                          self.size())
        return self._submit(what, tensor, program, [tensor], [output], [output])

    def reduce_scatter(self, outputs, input_lists, opts=None):
        reduce = _reduce_name(opts.reduceOp if opts is not None else ReduceOp.SUM)
        output = self._one(outputs, "reduce_scatter")
        if len(input_lists) != 1 or len(input_lists[0]) != self.size():
            raise ValueError(f"the neuron backend: reduce_scatter needs one list of {self.size()} input tensors")
        inputs = input_lists[0]
        for t in inputs:
            self._check_output(t, tuple(output.shape), output, "reduce_scatter")
        what = f"reduce_scatter({_describe(output)}, {reduce})"
        program = _reduce_scatter_program(tuple(tuple(t.shape) for t in inputs), tuple(output.shape), output.dtype,
                                          reduce, self.size())
        return self._submit(what, output, program, inputs, [output], [output])

    reduce_scatter_single = _reduce_scatter_base

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        works = [self._reduce_scatter_base(o, i, opts) for o, i in zip(outputs, inputs)]
        return works[-1]

    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced

    def barrier(self, opts=None):
        index = 0  # the process's own core
        token = torch.zeros(1, dtype=torch.int32, device=torch.device(NAME, index))
        program = _all_reduce_program((1,), torch.int32, "sum", self.size())
        work = self._submit("barrier()", token, program, [token], [token], [token])
        work.wait()  # a barrier returns once every rank has reached it
        return work

    # -------------------------------------------------------------- machinery

    def _one(self, tensors, what: str) -> NeuronTensor:
        if len(tensors) != 1:
            raise ValueError(f"the neuron backend: {what} takes one tensor per rank (one NeuronCore per process), "
                             f"got {len(tensors)}")
        tensor = tensors[0]
        if not isinstance(tensor, NeuronTensor):
            raise ValueError(f"the neuron backend: {what} got a tensor on {tensor.device}; it takes neuron tensors "
                             "(init_process_group's default gloo backend takes CPU tensors)")
        check_dtype(tensor.dtype, f"{what} on the neuron backend")
        if self._global_ranks != list(range(self.size())) or self.size() != self._job_size():
            raise NotImplementedError(
                f"the neuron backend: {what} on a group of some of the job's ranks ({self._global_ranks}) is not "
                "supported yet; collectives run over the whole job (the default group)")
        self._runtime.device(tensor.device.index)  # refuses another process's core, naming its owner
        return tensor

    def _job_size(self) -> int:
        return len({d.process_index for d in self._runtime.job_devices})

    @staticmethod
    def _check_output(out, shape, like, what: str) -> None:
        if not isinstance(out, NeuronTensor) or out.device != like.device or out.dtype != like.dtype:
            raise ValueError(f"the neuron backend: {what}'s tensors must all be {like.dtype} on {like.device}, "
                             f"got {out.dtype} on {out.device}")
        if tuple(out.shape) != tuple(shape) and what not in ("all_gather_into_tensor", "reduce_scatter_tensor"):
            raise ValueError(f"the neuron backend: {what} needs tensors of shape {list(shape)}, got {list(out.shape)}")

    def _submit(self, what: str, device_tensor, program, inputs, targets, results) -> _Work:
        """Launches `program` over the inputs' elements on this rank's thread; its outputs go into
        `targets` when it has run. The work's result is `results`."""
        index = device_tensor.device.index
        buffers = [value(t) for t in inputs]  # read now: later writes to the inputs do not count
        with self._lock:
            sequence = self._sequence
            self._sequence += 1
        rt = self._runtime

        def launch():
            outputs, completion = rt.execute_collective(program, buffers, index)
            completion.await_()
            for target, buffer in zip(targets, outputs):
                assign(target, buffer)

        done = self._launcher.submit(launch)
        return _Work(self, sequence, what, done, results)

    def _await(self, work: _Work, limit: float | None) -> None:
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
                self._store.set(self._key(work._sequence, self.rank()), work._what)
                posted = True
            self._compare(work)
            if time.monotonic() > deadline:
                missing = [r for r in range(self.size()) if r != self.rank()
                           and not self._store.check([self._key(work._sequence, r)])]
                error = dist.DistBackendError(
                    f"the neuron backend: {work._what} (collective #{work._sequence} of rank {self.rank()}) "
                    f"timed out after {time.monotonic() - start:.0f} s; rank(s) {missing} never reached it")
                work._fail(error)
                raise error
        if work._done.exception() is not None:
            work._settle(work._done)
            raise work._error
        if posted:  # it ran after all: no peer needs this rank's entry any more
            self._store.delete_key(self._key(work._sequence, self.rank()))

    def _compare(self, work: _Work) -> None:
        for peer in range(self.size()):
            if peer == self.rank():
                continue
            key = self._key(work._sequence, peer)
            if not self._store.check([key]):
                continue
            theirs = self._store.get(key).decode()
            if theirs != work._what:
                error = dist.DistBackendError(
                    f"the neuron backend: the ranks launched different collectives as collective #{work._sequence}: "
                    f"rank {self.rank()} ran {work._what}, rank {peer} ran {theirs}; every rank must run the same "
                    "collectives, in the same order, with the same shapes and dtypes")
                work._fail(error)
                raise error

    @staticmethod
    def _key(sequence: int, rank: int) -> str:
        return f"neuron-collective/{sequence}/{rank}"

    def _explain(self, error: BaseException, sequence: int, what: str) -> BaseException:
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
                rank = next((d.process_index for d in self._runtime.job_devices if d.id == core), None)
        if rank is not None and ("exited" in text or "no live process" in text):
            lead = f"rank {rank} has exited (or never joined the job)"
        elif isinstance(error, pjrt_capi.PjrtError) and error.code_name == "DEADLINE_EXCEEDED":
            lead = "some ranks never ran it"
        else:
            lead = "it failed"
        return dist.DistBackendError(f"the neuron backend: {what} (collective #{sequence} of rank {self.rank()}) "
                                     f"did not run: {lead}: {text}")


def _describe(tensor) -> str:
    dtype = str(tensor.dtype).replace("torch.", "")
    return f"{dtype}{list(tensor.shape)}"
