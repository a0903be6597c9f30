"""`torch.compile(model, backend="neuron")`: Dynamo captures the Python, AOT Autograd splits each
captured graph into a forward and a backward ATen graph, and each of those becomes one program
(lowered by torch-mlir in the lowering worker, compiled by the plugin). A training step then costs a
few launches instead of one per op. Graph breaks run eagerly on the device, as everywhere else.

Neuron tensors are a Python tensor subclass, which Dynamo would otherwise step into as user code;
`install_dynamo_support` has it treat them as the tensors they are.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import torch

from pjrt_neuron.torch_native._lowering import NodeRef, OpRef, Slot, Unsupported, _meta_device
from pjrt_neuron.torch_native._lowering_worker import worker
from pjrt_neuron.torch_native._runtime import check_dtype, runtime
from pjrt_neuron.torch_native._storage import NeuronTensor, assign, value, wrap

_dynamo_support_installed = False


def install_dynamo_support() -> None:
    """Dynamo wraps a tensor subclass that defines __torch_dispatch__ as a plain object and traces its
    dispatch code; neuron tensors behave as device tensors (FakeTensor sees their device, sizes and
    strides), so they are wrapped as tensors, like CUDA's."""
    global _dynamo_support_installed
    if _dynamo_support_installed:
        return
    from torch._dynamo import trace_rules
    from torch._dynamo.variables import builder

    # The device's own Python (dispatch, lowering, runtime) runs as it is, never as a graph.
    trace_rules.add("pjrt_neuron")
    wrap_value = builder.VariableBuilder._wrap

    def _wrap(self, value):
        if isinstance(value, NeuronTensor):
            return self.wrap_tensor(value)
        return wrap_value(self, value)

    builder.VariableBuilder._wrap = _wrap
    _dynamo_support_installed = True


def backend(graph: torch.fx.GraphModule, example_inputs, **options):
    """The `neuron` backend of torch.compile (registered through the `torch_dynamo_backends` entry
    point, so no import is needed)."""
    if options:
        raise TypeError(f"torch.compile(backend='neuron') takes no options (got {sorted(options)})")
    install_dynamo_support()
    from torch._dynamo.backends.common import aot_autograd

    compiler = aot_autograd(fw_compiler=_compiler("forward"), bw_compiler=_compiler("backward"),
                            inference_compiler=_compiler("inference"), keep_inference_input_mutations=True)
    return compiler(graph, example_inputs)


def _compiler(kind: str):
    def compile_graph(graph: torch.fx.GraphModule, example_inputs):
        from functorch.compile import make_boxed_func

        return make_boxed_func(CompiledGraph(graph, kind))

    return compile_graph


class CompiledGraph:
    """One AOT graph: a program per set of input shapes (one for static shapes; under dynamic
    shapes, each new size compiles its own, since the Neuron compiler needs static shapes)."""

    def __init__(self, graph: torch.fx.GraphModule, kind: str):
        self.kind = kind
        self.graph, self.constants = _lift_constants(graph)
        self.results = _classify_results(self.graph)
        self.programs: dict = {}
        self._constants_real = False

    def __call__(self, *args):
        if self.constants and not self._constants_real:
            self.constants = [_real_constant(c) for c in self.constants]
            self._constants_real = True
        args = list(args) + list(self.constants)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        index = _device_index(tensors)
        key = tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else ("value", a) for a in args)
        program = self.programs.get(key)
        if program is None:
            program = self.programs[key] = self._compile(key)
        buffers = [value(a) if isinstance(a, NeuronTensor) else runtime().upload(a, index)
                   for a in args if isinstance(a, torch.Tensor)]
        tensor_numbers = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        for number in program.written_inputs:
            # A donated buffer must be no other argument too (one tensor passed twice).
            if sum(b.ptr == buffers[number].ptr for b in buffers) > 1:
                with torch.no_grad():
                    buffers[number] = value(args[tensor_numbers[number]].clone())
        outputs = runtime().execute(program.executable, buffers, index) if program.executable else []
        for number, buffer in zip(program.written_inputs, outputs[len(outputs) - len(program.written_inputs):]):
            written = args[tensor_numbers[number]]
            if isinstance(written, NeuronTensor):
                assign(written, buffer)
            else:  # a host tensor the step updates (an optimizer's step count)
                written.copy_(runtime().download(buffer, written.dtype).reshape(written.shape))
        results = []
        for kind, where in self.results:
            if kind == "input":
                results.append(args[where])
            elif kind == "constant":
                results.append(where)
            else:
                slot = program.result_slots[where]
                if isinstance(slot, tuple):
                    results.append(slot[1])
                    continue
                shape, dtype = program.outputs[slot]
                results.append(wrap(outputs[slot], shape, dtype, index))
        return results

    def _compile(self, key):
        template = []
        inputs = []
        for entry in key:
            if entry[0] == "value":
                template.append(entry[1])
            else:
                check_dtype(entry[1], f"an input of the compiled {self.kind} graph")
                template.append(Slot(len(inputs)))
                inputs.append(entry)
        program_graph = _program_graph(self.graph, self.results)
        if program_graph is None:
            return _Program(None, None)
        try:
            lowered = worker.lower_graph(pickle.dumps(encode_graph(program_graph)), tuple(template), tuple(inputs))
            executable = runtime().compile(_donating(lowered.text, lowered.written_inputs, len(lowered.outputs)))
        except Unsupported as e:
            culprit = _first_unsupported_op(self.graph) or (None, str(e), "")
            op, why, where = culprit
            what = f"the operator '{op}'" if op else f"the {self.kind} graph"
            raise RuntimeError(f"torch.compile(backend='neuron'): {what} could not be lowered for the neuron device "
                               f"({why}){where}. Run that code outside the compiled function "
                               "(torch.compiler.disable), or without torch.compile.") from None
        return _Program(executable, lowered)


class _Program:
    __slots__ = ("executable", "outputs", "result_slots", "written_inputs")

    def __init__(self, executable, lowered):
        self.executable = executable
        self.outputs = lowered.outputs if lowered else []
        self.result_slots = lowered.result_slots if lowered else []
        self.written_inputs = lowered.written_inputs if lowered else []


def _first_unsupported_op(graph: torch.fx.GraphModule):
    """The first op of the graph that does not lower alone, as (op, why, where in the user's code)."""
    for node in graph.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        if node.target is torch.ops.aten.detach.default:
            continue
        inputs: list = []

        def describe(argument):
            if isinstance(argument, torch.fx.Node):
                meta = argument.meta.get("val")
                if not isinstance(meta, torch.Tensor):
                    raise LookupError
                inputs.append((tuple(meta.shape), meta.dtype))
                return Slot(len(inputs) - 1)
            if isinstance(argument, (list, tuple)):
                return type(argument)(describe(a) for a in argument)
            return argument

        try:
            args = describe(tuple(node.args))
            kwargs = {k: describe(v) for k, v in node.kwargs.items()}
        except LookupError:
            continue
        try:
            worker.lower(node.target, args, kwargs, tuple(inputs), frozenset(), (), None)
        except Unsupported as e:
            trace = (node.meta.get("stack_trace") or "").strip().splitlines()
            where = next((f", at {line.strip()}" for line in reversed(trace) if line.strip().startswith("File")), "")
            return str(node.target), str(e), where
    return None


def encode_graph(graph: torch.fx.Graph) -> list:
    """The nodes as plain data for the worker. Pickling the GraphModule would not do: unpickling
    re-traces its code, which folds factory ops (arange) into constants with no data on meta."""

    def encode(value):
        if isinstance(value, torch.fx.Node):
            return NodeRef((value.name,))
        if isinstance(value, torch._ops.OpOverload):
            return OpRef((value.namespace, value._schema.name.split("::")[1], value._overloadname))
        if isinstance(value, (list, tuple)):
            return [encode(v) for v in value] if isinstance(value, list) else tuple(encode(v) for v in value)
        if isinstance(value, dict):
            return {k: encode(v) for k, v in value.items()}
        return value

    return [(n.op, n.name, encode(n.target), encode(tuple(n.args)), encode(dict(n.kwargs)), n.meta.get("stack_trace"))
            for n in graph.nodes]


def _device_index(tensors) -> int:
    indices = {t.device.index for t in tensors if isinstance(t, NeuronTensor)}
    others = {str(t.device) for t in tensors if not isinstance(t, NeuronTensor) and t.dim() != 0}
    if len(indices) > 1 or (indices and others):
        found = sorted(f"neuron:{i}" for i in indices) + sorted(others)
        raise RuntimeError(f"Expected all tensors to be on the same device, but found {', '.join(found)} "
                           "(in a graph compiled with backend='neuron')")
    return indices.pop() if indices else 0


_LIBRARY_DIRS = tuple(str(Path(m.__file__).resolve().parent) for m in (torch,))


def _user_frames(stack_trace):
    """The frames of a node's stack trace outside PyTorch itself, so a Trainium diagnostic points at
    the user's line (or the model library's) rather than at torch/nn/functional.py."""
    if not stack_trace:
        return None
    lines = stack_trace.splitlines()
    kept = []
    for i, line in enumerate(lines):
        match = re.match(r'\s*File "([^"]+)", line \d+', line)
        if match and not str(Path(match.group(1)).resolve()).startswith(_LIBRARY_DIRS):
            kept.append(line)
            if i + 1 < len(lines) and not lines[i + 1].lstrip().startswith("File "):
                kept.append(lines[i + 1])
    return "\n".join(kept) or None


def _donating(text: str, written_inputs, num_outputs: int) -> str:
    """Marks each input the graph writes as aliased to the output that holds its new value, so the
    program updates it in place (PJRT donation: no second copy of the parameters and optimizer state
    in HBM during a step); the tensor then holds the output."""
    first = num_outputs - len(written_inputs)
    aliases = {number: first + j for j, number in enumerate(written_inputs)}
    if not aliases:
        return text
    start = text.index("func.func @main(")
    end = text.index(") -> ", start)

    def mark(match):
        number = int(match.group(2))
        if number not in aliases:
            return match.group(0)
        return f"{match.group(1)} {{tf.aliasing_output = {aliases[number]} : i32}}"

    signature = re.sub(r"(%arg(\d+): tensor<[^>]*>)", mark, text[start:end])
    return text[:start] + signature + text[end:]


def _real_constant(tensor):
    """A tensor the traced code made (torch.tensor(..., device="neuron"), Hugging Face's cache
    layers' empty tensors) is held by the graph as a fake tensor; its values are the real tensor
    kept beside it, or none at all when it is empty."""
    from torch._subclasses.fake_tensor import FakeTensor

    if not isinstance(tensor, FakeTensor):
        return tensor
    if tensor.constant is not None:
        return tensor.constant
    if tensor.numel() == 0:
        return torch.empty(tensor.shape, dtype=tensor.dtype, device=tensor.device)
    raise RuntimeError(f"torch.compile(backend='neuron'): the graph holds a {tuple(tensor.shape)} tensor made while "
                       "it was traced whose values were not kept; create it outside the compiled function")


def _lift_constants(graph: torch.fx.GraphModule):
    """Tensors the graph holds (attributes, and literals in an op's arguments) become trailing
    inputs: the lowering worker has no neuron device, and programs take every tensor as an argument."""
    constants: list = []
    lifted: dict = {}
    placeholders = [n for n in graph.graph.nodes if n.op == "placeholder"]

    def placeholder_for(tensor) -> torch.fx.Node:
        if id(tensor) in lifted:
            return lifted[id(tensor)]
        anchor = placeholders[-1] if placeholders else next(iter(graph.graph.nodes))
        insert = graph.graph.inserting_after(anchor) if placeholders else graph.graph.inserting_before(anchor)
        with insert:
            node = graph.graph.placeholder(f"constant_{len(constants)}")
        node.meta["val"] = tensor
        placeholders.append(node)
        constants.append(tensor)
        lifted[id(tensor)] = node
        return node

    def lift(argument):
        if isinstance(argument, torch.Tensor):
            return placeholder_for(argument)
        if isinstance(argument, (list, tuple)):
            return type(argument)(lift(a) for a in argument)
        return argument

    for node in list(graph.graph.nodes):
        if node.op == "get_attr":
            attribute = getattr(graph, node.target)
            if isinstance(attribute, torch.Tensor):
                node.replace_all_uses_with(placeholder_for(attribute))
                graph.graph.erase_node(node)
        elif node.op in ("call_function", "output"):
            node.args = lift(node.args)
            node.kwargs = {k: lift(v) for k, v in node.kwargs.items()}
    if constants:
        graph.recompile()
    return graph, constants


def _classify_results(graph: torch.fx.GraphModule) -> list:
    """Per graph result: ("input", n) when it is input n itself, ("constant", v) for a None or a
    number, ("program", k) for the k-th result the program computes."""
    placeholders = [n for n in graph.graph.nodes if n.op == "placeholder"]
    output = next(n for n in graph.graph.nodes if n.op == "output")
    results, computed = [], 0
    for node in output.args[0]:
        if isinstance(node, torch.fx.Node) and node in placeholders:
            results.append(("input", placeholders.index(node)))
        elif not isinstance(node, torch.fx.Node):
            results.append(("constant", node))
        else:
            results.append(("program", computed))
            computed += 1
    return results


def _program_graph(graph: torch.fx.GraphModule, results: list):
    """A copy of the graph that returns only what the program computes, without node metadata (fake
    tensors do not cross to the worker); None when it computes nothing and writes no input (an
    optimizer step returns nothing: its work is the inputs it writes)."""
    copy = torch.fx.Graph()
    environment: dict = {}
    output_node = None
    for node in graph.graph.nodes:
        if node.op == "output":
            output_node = node
            continue
        environment[node] = copy.node_copy(node, lambda n: environment[n])
    computed = [environment[n] for n, (kind, _) in zip(output_node.args[0], results) if kind == "program"]
    writes_an_input = any(n.op == "call_function" and n.target is torch.ops.aten.copy_.default
                          and n.args[0].op == "placeholder" for n in graph.graph.nodes)
    if not computed and not writes_an_input:
        return None
    copy.output(tuple(computed))
    for node in list(copy.nodes):
        user_frames = _user_frames(node.meta.get("stack_trace"))
        node.meta = {"stack_trace": user_frames} if user_frames else {}
        # The worker has no neuron device: factories inside the graph make meta tensors there.
        node.args, node.kwargs = _meta_device(node.args), {k: _meta_device(v) for k, v in node.kwargs.items()}
        if node.op == "call_function" and node.target is torch.ops.aten.detach.default:
            # Values only: detach matters to autograd, which has run; torch-mlir cannot lower its copy.
            node.replace_all_uses_with(node.args[0])
            copy.erase_node(node)
    return copy


# Importing this module is how torch.compile finds the backend, before Dynamo traces anything.
install_dynamo_support()
