"""Single-process multi-device JAX checks, shared by tests/test_spmd.py and jax_spmd.py.

Every check takes the devices of one platform (NeuronCores, or the CPU backend's forced host
devices for the reference) and returns an `Outcome`:

- ``values``: the results, as numpy arrays, to compare with the same check on the CPU backend
  (bitwise: both compile the same partitioned program with XLA's CPU compiler);
- ``expected``: the same values computed without JAX's partitioning (numpy, or an unsharded
  run on one CPU device), compared within ``rtol``;
- ``placement``: for each sharded result, the (device position, index) of every addressable
  shard, where the position is the device's index in the list the check was given, so NeuronCore
  ids and CPU ids compare;
- ``meta``: other facts (shardings, device order of the compiled executable, ...).

Inputs are small integer-valued float32 arrays wherever the result does not depend on
summation order, so most comparisons are exact.
"""

from __future__ import annotations

import json
import re
from functools import partial
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

try:
    from jax import shard_map
except ImportError:  # older JAX
    from jax.experimental.shard_map import shard_map


@dataclass
class Outcome:
    values: dict = field(default_factory=dict)
    expected: dict = field(default_factory=dict)
    rtol: float = 0.0
    placement: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)


# ---------------------------------------------------------------- helpers


def ints(shape, offset=0, modulo=7):
    """Small integer-valued float32 data: exact under any summation order."""
    return ((np.arange(int(np.prod(shape))) + offset) % modulo - modulo // 2).astype(np.float32).reshape(shape)


def mesh_1d(devices, name="x"):
    return Mesh(np.array(devices), (name,))


def mesh_2d(devices):
    """("data", "model") mesh: (n/2, 2) for n >= 2."""
    n = len(devices)
    return Mesh(np.array(devices).reshape(n // 2, 2), ("data", "model"))


def placement(array, devices):
    """[(device position, [[start, stop], ...]), ...] of every addressable shard, in position order."""
    position = {d.id: i for i, d in enumerate(devices)}
    rows = []
    for shard in array.addressable_shards:
        assert shard.device.platform == devices[0].platform, (shard.device, devices[0])
        index = [list(s.indices(dim)[:2]) for s, dim in zip(shard.index, array.shape)]
        rows.append([position[shard.device.id], index])
    return sorted(rows)


def spec_of(array):
    s = array.sharding
    return str(s.spec) if isinstance(s, NamedSharding) else repr(s)


def equivalent(array, mesh, spec):
    return bool(array.sharding.is_equivalent_to(NamedSharding(mesh, spec), array.ndim))


def shard_values_match(array):
    """Every addressable shard holds exactly its slice of the whole array."""
    whole = np.asarray(array)
    return all(np.array_equal(np.asarray(s.data), whole[s.index]) for s in array.addressable_shards)


# ---------------------------------------------------------------- jit with NamedSharding


def check_dp_matmul(devices):
    """Data parallel: batch sharded over "x", weights replicated; jit infers the output sharding."""
    n = len(devices)
    mesh = mesh_1d(devices)
    x, w, b = ints((2 * n, 8)), ints((8, 6), 3), ints((6,), 1)
    xs = jax.device_put(x, NamedSharding(mesh, P("x", None)))
    ws = jax.device_put(w, NamedSharding(mesh, P()))
    bs = jax.device_put(b, NamedSharding(mesh, P()))
    out = jax.jit(lambda x, w, b: jnp.maximum(x @ w + b, 0.0))(xs, ws, bs)
    o = Outcome()
    o.values["out"] = np.asarray(out)
    o.expected["out"] = np.maximum(x @ w + b, 0.0)
    o.placement["out"] = placement(out, devices)
    o.meta["out_spec"] = spec_of(out)
    o.meta["out_is_batch_sharded"] = equivalent(out, mesh, P("x", None))
    o.meta["shards_hold_their_slices"] = shard_values_match(out)
    return o


def check_mp_matmul(devices):
    """Model parallel on a ("data", "model") mesh.

    - columns: the weight's output features are split over "model", the batch over "data";
      out_shardings pins the result to P("data", "model");
    - contracting: the contracted dimension is split over all devices, so partial products
      are summed across them (an all-reduce); jit infers a replicated result.
    """
    n = len(devices)
    mesh2 = mesh_2d(devices)
    x, w = ints((n, 8)), ints((8, 4), 2)
    xs = jax.device_put(x, NamedSharding(mesh2, P("data", None)))
    ws = jax.device_put(w, NamedSharding(mesh2, P(None, "model")))
    cols = jax.jit(lambda x, w: x @ w, out_shardings=NamedSharding(mesh2, P("data", "model")))(xs, ws)

    mesh = mesh_1d(devices, "model")
    a, c = ints((4, 3 * n), 1), ints((3 * n, 5), 4)
    as_ = jax.device_put(a, NamedSharding(mesh, P(None, "model")))
    cs = jax.device_put(c, NamedSharding(mesh, P("model", None)))
    contracted = jax.jit(lambda a, c: a @ c)(as_, cs)

    o = Outcome()
    o.values.update(columns=np.asarray(cols), contracting=np.asarray(contracted))
    o.expected.update(columns=x @ w, contracting=a @ c)
    o.placement.update(columns=placement(cols, devices), contracting=placement(contracted, devices))
    o.meta.update(
        columns_spec=spec_of(cols),
        columns_is_2d_sharded=equivalent(cols, mesh2, P("data", "model")),
        contracting_spec=spec_of(contracted),
        contracting_is_replicated=bool(contracted.sharding.is_fully_replicated),
        shards_hold_their_slices=shard_values_match(cols) and shard_values_match(contracted),
    )
    return o


# ---------------------------------------------------------------- shard_map collectives


def check_collectives(devices):
    n = len(devices)
    mesh = mesh_1d(devices)
    x = ints((n * n, 3), 0, 11)
    xs = jax.device_put(x, NamedSharding(mesh, P("x")))
    blocks = x.reshape(n, n, 3)  # blocks[i] lives on device i
    perm = [(i, (i + 1) % n) for i in range(n)]

    def smap(f, out_specs, **kw):
        return jax.jit(shard_map(f, mesh=mesh, in_specs=P("x"), out_specs=out_specs, **kw))

    results = {
        "psum": smap(lambda b: lax.psum(b, "x"), P())(xs),
        "all_gather": smap(lambda b: lax.all_gather(b, "x", tiled=True), P(), check_vma=False)(xs),
        "ppermute": smap(lambda b: lax.ppermute(b, "x", perm), P("x"))(xs),
        "all_to_all": smap(lambda b: lax.all_to_all(b, "x", 0, 0, tiled=True), P("x"))(xs),
        "psum_scatter": smap(lambda b: lax.psum_scatter(b, "x", scatter_dimension=0, tiled=True), P("x"))(xs),
        "axis_index": smap(lambda b: lax.axis_index("x").reshape(1), P("x"))(xs),
    }
    o = Outcome()
    o.expected = {
        "psum": blocks.sum(0),
        "all_gather": x,
        "ppermute": np.roll(blocks, 1, axis=0).reshape(n * n, 3),  # device i gets block i-1
        "all_to_all": blocks.transpose(1, 0, 2).reshape(n * n, 3),  # chunk j of device i -> device j
        "psum_scatter": blocks.sum(0),  # row j of the sum ends on device j
        "axis_index": np.arange(n, dtype=np.int32),
    }
    for name, array in results.items():
        o.values[name] = np.asarray(array)
        o.placement[name] = placement(array, devices)
    o.meta["shards_hold_their_slices"] = all(shard_values_match(a) for a in results.values())
    return o


def check_group_collectives(devices):
    """Collectives over one axis of a ("data", "model") mesh: replica groups that are a subset of
    the devices (rows or columns of the mesh), as model-parallel programs emit them."""
    mesh = mesh_2d(devices)
    d, m = mesh.shape["data"], mesh.shape["model"]
    x = ints((d * m * m, 3), 0, 11)
    both = P(("data", "model"))
    xs = jax.device_put(x, NamedSharding(mesh, both))
    blocks = x.reshape(d, m, m, 3)  # blocks[i, j] lives on mesh device (i, j)
    model_perm = [(j, (j + 1) % m) for j in range(m)]
    data_perm = [(i, (i + 1) % d) for i in range(d)]

    def smap(f, out_specs, **kw):
        return jax.jit(shard_map(f, mesh=mesh, in_specs=both, out_specs=out_specs, **kw))

    results = {
        "psum_model": smap(lambda b: lax.psum(b, "model"), P("data"))(xs),
        "psum_data": smap(lambda b: lax.psum(b, "data"), P("model"))(xs),
        "all_gather_model": smap(lambda b: lax.all_gather(b, "model", tiled=True), P("data"), check_vma=False)(xs),
        "ppermute_model": smap(lambda b: lax.ppermute(b, "model", model_perm), both)(xs),
        "ppermute_data": smap(lambda b: lax.ppermute(b, "data", data_perm), both)(xs),
        "all_to_all_model": smap(lambda b: lax.all_to_all(b, "model", 0, 0, tiled=True), both)(xs),
        "psum_scatter_model": smap(
            lambda b: lax.psum_scatter(b, "model", scatter_dimension=0, tiled=True), both)(xs),
    }
    o = Outcome()
    o.expected = {
        "psum_model": blocks.sum(1).reshape(d * m, 3),
        "psum_data": blocks.sum(0).reshape(m * m, 3),
        "all_gather_model": x,
        "ppermute_model": np.roll(blocks, 1, axis=1).reshape(x.shape),  # (i, j) gets block (i, j-1)
        "ppermute_data": np.roll(blocks, 1, axis=0).reshape(x.shape),  # (i, j) gets block (i-1, j)
        "all_to_all_model": blocks.transpose(0, 2, 1, 3).reshape(x.shape),  # chunk k of (i, j) -> (i, k)
        "psum_scatter_model": blocks.sum(1).reshape(d * m, 3),  # row k of row i's sum ends on (i, k)
    }
    for name, array in results.items():
        o.values[name] = np.asarray(array)
        o.placement[name] = placement(array, devices)
    o.meta["shards_hold_their_slices"] = all(shard_values_match(a) for a in results.values())
    return o


def check_pmap(devices):
    n = len(devices)
    x = ints((n, 2, 3), 0, 13)
    out = jax.pmap(lambda b: (lax.psum(b, "i"), b * lax.axis_index("i")), axis_name="i", devices=devices)(x)
    o = Outcome()
    o.values.update(psum=np.asarray(out[0]), scaled=np.asarray(out[1]))
    o.expected.update(psum=np.broadcast_to(x.sum(0), x.shape), scaled=x * np.arange(n).reshape(n, 1, 1))
    o.placement.update(psum=placement(out[0], devices))
    return o


# ---------------------------------------------------------------- sharded training step


def mlp_params(rng_seed=0, d_in=8, hidden=16, d_out=4):
    r = np.random.RandomState(rng_seed)
    return {
        "w1": (r.randn(d_in, hidden) * 0.3).astype(np.float32), "b1": np.zeros(hidden, np.float32),
        "w2": (r.randn(hidden, d_out) * 0.3).astype(np.float32), "b2": np.zeros(d_out, np.float32),
    }


def mlp_loss(params, x, y):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    logits = h @ params["w2"] + params["b2"]
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))


@partial(jax.jit, donate_argnums=0)  # the parameters are updated in place, as in real training
def sgd_step(params, x, y):
    loss, grads = jax.value_and_grad(mlp_loss)(params, x, y)
    return loss, grads, jax.tree.map(lambda p, g: p - 0.5 * g, params, grads)


TRAIN_STEPS = 3


def train(params, batches, put_params, put_batch):
    """Returns (losses, last grads, final params, whether the first step consumed its donated params)."""
    params = first = put_params(params)
    losses, grads = [], None
    for x, y in batches:
        loss, grads, params = sgd_step(params, put_batch(x), put_batch(y))
        losses.append(loss)
    return losses, grads, params, all(a.is_deleted() for a in jax.tree.leaves(first))


def train_batches(n):
    r = np.random.RandomState(1)
    batch = 4 * n
    out = []
    for _ in range(TRAIN_STEPS):
        x = r.randn(batch, 8).astype(np.float32)
        y = np.eye(4, dtype=np.float32)[r.randint(0, 4, batch)]
        out.append((x, y))
    return out


def check_train_step(devices):
    """Grad + SGD of an MLP with data sharded over the mesh and parameters replicated (and donated
    to each step), against the same steps unsharded on one CPU device."""
    n = len(devices)
    mesh = mesh_1d(devices, "data")
    batches = train_batches(n)
    params = mlp_params()
    replicated, by_batch = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    losses, grads, final, donated = train(params, batches, lambda p: jax.device_put(p, replicated),
                                 lambda a: jax.device_put(a, by_batch))
    cpu = jax.devices("cpu")[0]
    ref_losses, ref_grads, ref_final, _ = train(params, batches, lambda p: jax.device_put(p, cpu),
                                             lambda a: jax.device_put(a, cpu))
    o = Outcome(rtol=2e-5)
    o.values["losses"] = np.asarray(jnp.stack(losses))
    o.expected["losses"] = np.asarray(jnp.stack(ref_losses))
    for k in sorted(params):
        o.values[f"grad_{k}"] = np.asarray(grads[k])
        o.expected[f"grad_{k}"] = np.asarray(ref_grads[k])
        o.values[f"param_{k}"] = np.asarray(final[k])
        o.expected[f"param_{k}"] = np.asarray(ref_final[k])
        o.placement[f"param_{k}"] = placement(final[k], devices)
    o.meta["params_replicated"] = all(bool(final[k].sharding.is_fully_replicated) for k in final)
    o.meta["params_on_mesh"] = all(
        {s.device.id for s in final[k].addressable_shards} == {d.id for d in devices} for k in final)
    o.meta["donated_params_consumed"] = donated
    o.meta["loss_fell"] = bool(o.values["losses"][-1] < o.values["losses"][0])
    return o


# ---------------------------------------------------------------- device_put with a sharding


def check_device_put(devices):
    n = len(devices)
    mesh = mesh_2d(devices)
    x = ints((n, n), 0, 17)
    a = jax.device_put(x, NamedSharding(mesh, P("data", "model")))
    b = jax.device_put(a, NamedSharding(mesh, P("model", "data")))  # resharded on the devices
    c = jax.device_put(a, NamedSharding(mesh, P()))  # replicated everywhere
    o = Outcome()
    for name, array in (("put", a), ("resharded", b), ("replicated", c)):
        o.values[name] = np.asarray(array)
        o.expected[name] = x
        o.placement[name] = placement(array, devices)
    o.meta["shards_hold_their_slices"] = all(shard_values_match(v) for v in (a, b, c))
    o.meta["put_devices"] = sorted(p for p, _ in o.placement["put"])
    o.meta["sharding_devices_in_mesh_order"] = [
        devices.index(d) for d in a.sharding.mesh.devices.flat]
    return o


# ---------------------------------------------------------------- the compiled executable


def check_compiled_executable(devices):
    """Device order of a compiled multi-device executable, for the natural and the reversed
    mesh order, and a serialize/deserialize round trip onto the same devices."""
    from jax.experimental.serialize_executable import deserialize_and_load, serialize

    n = len(devices)
    x = ints((2 * n, 3), 0, 9)
    o = Outcome()
    for tag, order in (("natural", list(devices)), ("reversed", list(devices)[::-1])):
        mesh = mesh_1d(order)
        xs = jax.device_put(x, NamedSharding(mesh, P("x")))
        f = jax.jit(lambda a: (a * 2.0, a.sum(0)),
                    out_shardings=(NamedSharding(mesh, P("x")), NamedSharding(mesh, P())))
        compiled = f.lower(xs).compile()
        loaded = compiled.runtime_executable()
        o.meta[f"{tag}_local_devices"] = [devices.index(d) for d in loaded.local_devices()]
        o.meta[f"{tag}_mesh_order"] = [devices.index(d) for d in order]
        o.meta[f"{tag}_output_shardings_match"] = [
            bool(s.is_equivalent_to(NamedSharding(mesh, spec), nd))
            for s, spec, nd in zip(compiled.output_shardings, (P("x"), P()), (2, 1))]
        found = re.search(r"num_partitions=(\d+)", loaded.hlo_modules()[0].to_string())
        o.meta[f"{tag}_num_partitions"] = int(found.group(1)) if found else None
        doubled, total = compiled(xs)
        o.values[f"{tag}_doubled"], o.values[f"{tag}_sum"] = np.asarray(doubled), np.asarray(total)
        o.expected[f"{tag}_doubled"], o.expected[f"{tag}_sum"] = x * 2.0, x.sum(0)
        o.placement[f"{tag}_doubled"] = placement(doubled, devices)

        payload, in_tree, out_tree = serialize(compiled)
        again = deserialize_and_load(payload, in_tree, out_tree, backend=devices[0].client,
                                     execution_devices=order)
        o.meta[f"{tag}_deserialized_local_devices"] = [
            devices.index(d) for d in again.runtime_executable().local_devices()]
        doubled2, total2 = again(xs)
        o.values[f"{tag}_deserialized_doubled"] = np.asarray(doubled2)
        o.values[f"{tag}_deserialized_sum"] = np.asarray(total2)
        o.expected[f"{tag}_deserialized_doubled"], o.expected[f"{tag}_deserialized_sum"] = x * 2.0, x.sum(0)
        o.placement[f"{tag}_deserialized_doubled"] = placement(doubled2, devices)
    return o


def check_unreduced(devices):
    """Unreduced axes (JAX's explicit sharding: partial sums carried across ops) on a
    ("data", "model") mesh: a matmul contracted over "model" left unreduced, then resolved by a
    reshard directly, after a sum, slice, concatenation or add, resharded to and from unreduced,
    returned unreduced (each core's partial sum), and differentiated through."""
    from jax.sharding import AxisType, reshard

    if not jax.config.jax_use_shardy_partitioner:
        # JAX itself lowers unreduced shardings only for Shardy (on every backend).
        return Outcome(meta={"skipped": "unreduced axes need the Shardy partitioner"})
    n = len(devices)
    mesh = Mesh(np.array(devices).reshape(n // 2, 2), ("data", "model"), axis_types=(AxisType.Explicit,) * 2)
    a, b = ints((n, 8)), ints((8, 6), 3)
    a_s = jax.device_put(a, NamedSharding(mesh, P("data", "model")))
    b_s = jax.device_put(b, NamedSharding(mesh, P("model", None)))
    mm = lambda a, b: jnp.matmul(a, b, out_sharding=P("data", None, unreduced={"model"}))
    cases = {
        "resolved": (lambda a, b: reshard(mm(a, b), P()), a @ b),
        "kept_data": (lambda a, b: reshard(mm(a, b), P("data")), a @ b),
        "sum": (lambda a, b: reshard(jnp.sum(mm(a, b), axis=1), P()), (a @ b).sum(axis=1)),
        "slice": (lambda a, b: reshard(mm(a, b)[:, 1:4], P()), (a @ b)[:, 1:4]),
        "concat": (lambda a, b: reshard(jnp.concatenate([mm(a, b), mm(a, b)], axis=1), P()),
                   np.concatenate([a @ b, a @ b], axis=1)),
        "add": (lambda a, b: reshard(mm(a, b) + mm(a, b), P()), 2 * (a @ b)),
        "to_and_from_unreduced": (lambda a, b: reshard(reshard(mm(a, b), P(None, None, unreduced={"model"})), P()),
                                  a @ b),
        "grad": (jax.grad(lambda a, b: jnp.sum(reshard(mm(a, b), P()) ** 2)), 2 * (a @ b) @ b.T),
    }
    o = Outcome()
    with jax.sharding.use_mesh(mesh) if hasattr(jax.sharding, "use_mesh") else jax.set_mesh(mesh):
        for name, (f, want) in cases.items():
            got = jax.jit(f)(a_s, b_s)
            o.values[name] = np.asarray(got)
            o.expected[name] = want.astype(np.float32)
            o.meta[f"{name}_spec"] = spec_of(got)
        partial_sums = jax.jit(mm)(a_s, b_s)
        o.meta["unreduced_spec"] = spec_of(partial_sums)
        shards = sorted(partial_sums.addressable_shards, key=lambda s: s.device.id)
        o.values["partial_sums"] = np.stack([np.asarray(s.data) for s in shards])
        o.expected["partial_sums"] = o.values["partial_sums"]  # compared with the CPU backend only
        o.meta["partial_sums_add_up"] = bool(np.array_equal(
            o.values["partial_sums"].reshape(n // 2, 2, -1, 6).sum(axis=1).reshape(n, 6), a @ b))
    return o


CHECKS = {
    "dp_matmul": check_dp_matmul,
    "mp_matmul": check_mp_matmul,
    "collectives": check_collectives,
    "group_collectives": check_group_collectives,
    "pmap": check_pmap,
    "train_step": check_train_step,
    "device_put": check_device_put,
    "compiled_executable": check_compiled_executable,
    "unreduced": check_unreduced,
}

PARTITIONERS = {"gspmd": False, "shardy": True}


class partitioner:
    """Context manager: JAX's partitioner for jit ("gspmd" or "shardy"), restored afterwards.
    The flag is part of jit's cache key, so switching it inside one process is safe."""

    def __init__(self, name):
        self.value = PARTITIONERS[name]

    def __enter__(self):
        self.saved = jax.config.jax_use_shardy_partitioner
        jax.config.update("jax_use_shardy_partitioner", self.value)
        return self

    def __exit__(self, *exc):
        jax.config.update("jax_use_shardy_partitioner", self.saved)


def lowered_partitioner(devices):
    """Which partitioner the lowered module is annotated for: "shardy" (sdy dialect) or "gspmd"."""
    mesh = mesh_1d(devices)
    xs = jax.device_put(ints((2 * len(devices), 2)), NamedSharding(mesh, P("x")))
    text = jax.jit(lambda a: a + 1).lower(xs).as_text()
    if "sdy.sharding" in text or "sdy.mesh" in text:
        return "shardy"
    return "gspmd" if "mhlo.sharding" in text else "unknown"


# ---------------------------------------------------------------- JSON transport (subprocesses)


def _encode(array):
    a = np.asarray(array)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.ravel().tolist()}


def decode(blob):
    return np.asarray(blob["data"], dtype=blob["dtype"]).reshape(blob["shape"])


def outcome_to_json(o: Outcome) -> dict:
    return {
        "values": {k: _encode(v) for k, v in o.values.items()},
        "expected": {k: _encode(v) for k, v in o.expected.items()},
        "rtol": o.rtol, "placement": o.placement, "meta": o.meta,
    }


def outcome_from_json(d: dict) -> Outcome:
    return Outcome(values={k: decode(v) for k, v in d["values"].items()},
                   expected={k: decode(v) for k, v in d["expected"].items()},
                   rtol=d["rtol"], placement=d["placement"], meta=d["meta"])


def run_everything(devices) -> dict:
    """Every check under both partitioners; a failing check records its error, the rest still run."""
    import traceback

    report = {"platform": devices[0].platform, "device_ids": [d.id for d in devices], "partitioners": {}}
    for name in PARTITIONERS:
        with partitioner(name):
            part = {"lowered_partitioner": lowered_partitioner(devices), "checks": {}}
            for check_name, check in CHECKS.items():
                try:
                    part["checks"][check_name] = {"ok": outcome_to_json(check(devices))}
                except Exception as e:  # noqa: BLE001 - reported to the test
                    part["checks"][check_name] = {"error": f"{type(e).__name__}: {e}",
                                                  "traceback": traceback.format_exc()[-4000:]}
            report["partitioners"][name] = part
    return report


def dumps(report) -> str:
    return json.dumps(report)
