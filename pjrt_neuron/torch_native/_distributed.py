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

from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import Backend as _C10dBackend
from torch.distributed import ReduceOp

from pjrt_neuron.torch_native._collective_programs import (all_gather_program, all_reduce_program,
                                                           all_to_all_program, broadcast_program, reduce_name,
                                                           reduce_scatter_program, scatter_program)
from pjrt_neuron.torch_native._collective_work import Launches
from pjrt_neuron.torch_native._runtime import check_dtype, runtime
from pjrt_neuron.torch_native._storage import NeuronTensor

NAME = "neuron"


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


# ------------------------------------------------------------------ the process group


class ProcessGroupNeuron(_C10dBackend):
    """The `neuron` backend of one process group: every rank of the job, one NeuronCore each."""

    def __init__(self, store, rank: int, size: int, timeout: timedelta, global_ranks: list[int]):
        super().__init__(rank, size)
        self._timeout = timeout.total_seconds() if timeout else 1800.0
        self._global_ranks = global_ranks or list(range(size))
        self._launches = Launches(store, rank, size, self._timeout)

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
        reduce = reduce_name(opts.reduceOp if opts is not None else ReduceOp.SUM)
        tensor = self._one(tensors, "all_reduce")
        what = f"all_reduce({_describe(tensor)}, {reduce})"
        program = all_reduce_program(tuple(tensor.shape), tensor.dtype, reduce, self.size())
        return self._launches.submit(what, tensor, program, [tensor], [tensor], [tensor])

    def allreduce_coalesced(self, tensors, opts=None):
        works = [self.allreduce([t], opts) for t in tensors]
        return works[-1]

    def broadcast(self, tensors, opts=None):
        tensor = self._one(tensors, "broadcast")
        src = self._global_ranks[opts.rootRank]
        what = f"broadcast({_describe(tensor)}, src={opts.rootRank})"
        program = broadcast_program(tuple(tensor.shape), tensor.dtype, src, self.size())
        return self._launches.submit(what, tensor, program, [tensor], [tensor], [tensor])

    def reduce(self, tensors, opts=None):
        reduce = reduce_name(opts.reduceOp if opts is not None else ReduceOp.SUM)
        tensor = self._one(tensors, "reduce")
        root = opts.rootRank if opts is not None else 0
        what = f"reduce({_describe(tensor)}, {reduce}, dst={root})"
        program = all_reduce_program(tuple(tensor.shape), tensor.dtype, reduce, self.size())
        targets = [tensor] if self.rank() == root else []  # the other ranks' tensors stay as they were
        return self._launches.submit(what, tensor, program, [tensor], targets, [tensor])

    def gather(self, output_lists, input_tensors, opts=None):
        tensor = self._one(input_tensors, "gather")
        root = opts.rootRank if opts is not None else 0
        outputs = output_lists[0] if output_lists else []
        if self.rank() == root:
            if len(output_lists) != 1 or len(outputs) != self.size():
                raise ValueError(f"the neuron backend: gather needs one list of {self.size()} output tensors on "
                                 f"the destination rank {root}")
            for out in outputs:
                self._check_output(out, tuple(tensor.shape), tensor, "gather")
        elif outputs:
            raise ValueError(f"the neuron backend: gather takes output tensors only on the destination rank {root}")
        what = f"gather({_describe(tensor)}, dst={root})"
        shapes = tuple(tuple(tensor.shape) for _ in range(self.size()))
        program = all_gather_program(tuple(tensor.shape), shapes, tensor.dtype, self.size())
        return self._launches.submit(what, tensor, program, [tensor], outputs, output_lists)

    def scatter(self, output_tensors, input_lists, opts=None):
        output = self._one(output_tensors, "scatter")
        root = opts.rootRank if opts is not None else 0
        shape = tuple(output.shape)
        if self.rank() == root:
            if len(input_lists) != 1 or len(input_lists[0]) != self.size():
                raise ValueError(f"the neuron backend: scatter needs one list of {self.size()} input tensors on "
                                 f"the source rank {root}")
            for t in input_lists[0]:
                self._check_output(t, shape, output, "scatter")
            rows = torch.stack(list(input_lists[0]))
        else:
            if input_lists and input_lists[0]:
                raise ValueError(f"the neuron backend: scatter takes input tensors only on the source rank {root}")
            rows = torch.zeros((self.size(), *shape), dtype=output.dtype, device=output.device)
        what = f"scatter({_describe(output)}, src={root})"
        program = scatter_program(shape, output.dtype, self._global_ranks[root], self.size())
        return self._launches.submit(what, output, program, [rows], [output], [output])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        tensor = self._one([input], "all_to_all_single")
        world = self.size()
        for name, splits in (("input_split_sizes", input_split_sizes), ("output_split_sizes", output_split_sizes)):
            if splits and len(set(splits)) != 1:
                raise NotImplementedError(f"the neuron backend: all_to_all_single with uneven {name} {list(splits)} "
                                          "is not supported yet; give equal blocks (no split sizes)")
        if tensor.dim() == 0 or tensor.shape[0] % world:
            raise ValueError(f"the neuron backend: all_to_all_single needs a first dimension divisible by the "
                             f"{world} ranks, got shape {list(tensor.shape)}")
        self._check_output(output, tuple(tensor.shape), tensor, "all_to_all_single")
        what = f"all_to_all_single({_describe(tensor)})"
        program = all_to_all_program(tuple(tensor.shape), tensor.dtype, world)
        return self._launches.submit(what, tensor, program, [tensor], [output], [output])

    all_to_all_single = alltoall_base  # the name c10d calls it by in newer torch

    def alltoall(self, output_tensors, input_tensors, opts=None):
        world = self.size()
        if len(input_tensors) != world or len(output_tensors) != world:
            raise ValueError(f"the neuron backend: all_to_all needs {world} input and {world} output tensors")
        first = self._one(input_tensors[:1], "all_to_all")
        for t in (*input_tensors, *output_tensors):
            self._check_output(t, tuple(first.shape), first, "all_to_all")
        what = f"all_to_all({world} x {_describe(first)})"
        stacked = torch.stack(list(input_tensors))
        program = all_to_all_program(tuple(stacked.shape), first.dtype, world, blocks_apart=True)
        return self._launches.submit(what, first, program, [stacked], list(output_tensors), output_tensors)

    def allgather(self, output_lists, input_tensors, opts=None):
        tensor = self._one(input_tensors, "all_gather")
        if len(output_lists) != 1 or len(output_lists[0]) != self.size():
            raise ValueError(f"the neuron backend: all_gather needs one list of {self.size()} output tensors")
        outputs = output_lists[0]
        for out in outputs:
            self._check_output(out, tuple(tensor.shape), tensor, "all_gather")
        what = f"all_gather({_describe(tensor)})"
        program = all_gather_program(tuple(tensor.shape), tuple(tuple(o.shape) for o in outputs), tensor.dtype,
                                      self.size())
        return self._launches.submit(what, tensor, program, [tensor], outputs, output_lists)

    def _allgather_base(self, output, input, opts=None):
        tensor = self._one([input], "all_gather_into_tensor")
        if output.numel() != tensor.numel() * self.size():
            raise ValueError(f"the neuron backend: all_gather_into_tensor's output has {output.numel()} elements, "
                             f"but {self.size()} ranks of {tensor.numel()} make {tensor.numel() * self.size()}")
        self._check_output(output, tuple(output.shape), tensor, "all_gather_into_tensor")
        what = f"all_gather_into_tensor({_describe(tensor)})"
        program = all_gather_program(tuple(tensor.shape), (tuple(output.shape),), tensor.dtype, self.size())
        return self._launches.submit(what, tensor, program, [tensor], [output], [output])

    all_gather_single = _allgather_base  # the name c10d calls it by since torch 2.12

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        works = [self._allgather_base(o, i, opts) for o, i in zip(outputs, inputs)]
        return works[-1]

    all_gather_single_coalesced = allgather_into_tensor_coalesced

    def _reduce_scatter_base(self, output, input, opts=None):
        reduce = reduce_name(opts.reduceOp if opts is not None else ReduceOp.SUM)
        tensor = self._one([input], "reduce_scatter_tensor")
        if tensor.numel() != output.numel() * self.size():
            raise ValueError(f"the neuron backend: reduce_scatter_tensor's input has {tensor.numel()} elements, "
                             f"but {self.size()} ranks of {output.numel()} need {output.numel() * self.size()}")
        self._check_output(output, tuple(output.shape), tensor, "reduce_scatter_tensor")
        what = f"reduce_scatter_tensor({_describe(tensor)}, {reduce})"
        program = reduce_scatter_program((tuple(tensor.shape),), tuple(output.shape), tensor.dtype, reduce,
                                          self.size())
        return self._launches.submit(what, tensor, program, [tensor], [output], [output])

    def reduce_scatter(self, outputs, input_lists, opts=None):
        reduce = reduce_name(opts.reduceOp if opts is not None else ReduceOp.SUM)
        output = self._one(outputs, "reduce_scatter")
        if len(input_lists) != 1 or len(input_lists[0]) != self.size():
            raise ValueError(f"the neuron backend: reduce_scatter needs one list of {self.size()} input tensors")
        inputs = input_lists[0]
        for t in inputs:
            self._check_output(t, tuple(output.shape), output, "reduce_scatter")
        what = f"reduce_scatter({_describe(output)}, {reduce})"
        program = reduce_scatter_program(tuple(tuple(t.shape) for t in inputs), tuple(output.shape), output.dtype,
                                          reduce, self.size())
        return self._launches.submit(what, output, program, inputs, [output], [output])

    reduce_scatter_single = _reduce_scatter_base

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        works = [self._reduce_scatter_base(o, i, opts) for o, i in zip(outputs, inputs)]
        return works[-1]

    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced

    def barrier(self, opts=None):
        index = 0  # the process's own core
        token = torch.zeros(1, dtype=torch.int32, device=torch.device(NAME, index))
        program = all_reduce_program((1,), torch.int32, "sum", self.size())
        work = self._launches.submit("barrier()", token, program, [token], [token], [token])
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


def _describe(tensor) -> str:
    dtype = str(tensor.dtype).replace("torch.", "")
    return f"{dtype}{list(tensor.shape)}"
