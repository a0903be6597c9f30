"""Multi-process mode through the C API: two clients of one two-process job, in this process.

Each client is one "process" of the job (create options node_id / num_nodes, one NeuronCore
each), so the instance daemon sees two sessions exactly as it would from torchrun's ranks; a
client's destruction is its process leaving. Frameworks on top are in test_multiprocess.py.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import pjrt_capi as P
import pjrt_neuron.config as config
from assertions import pjrt_error
from programs import ALL_REDUCE, PER_REPLICA

TWO_REPLICAS = P.compile_options_proto(num_replicas=2)


def _create_world(plugin_api, size=2, **extra):
    """Creates the job's clients together: each waits in PJRT_Client_Create for the others."""
    def create(index):
        options = {"node_id": index, "num_nodes": size, "visible_cores": str(index), **extra}
        return plugin_api.create_client(options)
    with ThreadPoolExecutor(size) as pool:
        return list(pool.map(create, range(size)))


@pytest.fixture
def world(plugin_api, monkeypatch):
    monkeypatch.setenv("PJRT_NEURON_COLLECTIVE_TIMEOUT", "60")
    clients = _create_world(plugin_api)
    yield clients
    for c in clients:
        c.destroy()


def _run_together(calls):
    """Runs each zero-argument callable on its own thread (a rank each); results in order."""
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
        return [f.result() for f in futures]


def test_each_process_lists_the_whole_job_and_addresses_its_own_core(world):
    for index, client in enumerate(world):
        assert client.process_index == index
        devices = client.devices()
        assert [d.id for d in devices] == [0, 1]
        assert [d.process_index for d in devices] == [0, 1]
        assert [d.is_addressable for d in devices] == [i == index for i in range(2)]
        assert [d.id for d in client.addressable_devices()] == [index]
        assert len(client.addressable_memories()) == 2  # device and pinned_host of its one core


def test_placing_data_on_another_process_core_is_refused_naming_its_owner(world):
    peer_device = world[0].devices()[1]
    with pjrt_error(P.ErrorCode.INVALID_ARGUMENT, "PJRT_Client_BufferFromHostBuffer",
                    "NeuronCore 1 belongs to process 1 of this job"):
        world[0].buffer_from_numpy(np.ones(2, np.float32), device=peer_device)


def test_all_reduce_across_processes_sums_every_rank(world):
    executables = [c.compile(ALL_REDUCE, compile_options=TWO_REPLICAS) for c in world]
    inputs = [np.array([1.0, 2.0], np.float32), np.array([10.0, 20.0], np.float32)]

    def rank(index):
        client = world[index]
        arg = client.buffer_from_numpy(inputs[index])
        (out,), = executables[index].execute([arg])
        return out.to_numpy()

    for step in range(3):  # the k-th execution of each rank meets the other's k-th
        results = _run_together([lambda i=i: rank(i) for i in range(2)])
        for r in results:
            np.testing.assert_array_equal(r, inputs[0] + inputs[1])


def test_program_without_collectives_runs_on_one_process_alone(world):
    # Replica 1's process never runs it; replica 0 must not wait for it.
    executable = world[0].compile(PER_REPLICA, compile_options=TWO_REPLICAS)
    assert [d.id for d in executable.addressable_devices] == [0]
    (out,), = executable.execute([world[0].buffer_from_numpy(np.zeros(2, np.float32))])
    np.testing.assert_array_equal(out.to_numpy(), [0.0, 0.0])
    executable = world[1].compile(PER_REPLICA, compile_options=TWO_REPLICAS)
    (out,), = executable.execute([world[1].buffer_from_numpy(np.zeros(2, np.float32))])
    np.testing.assert_array_equal(out.to_numpy(), [1.0, 1.0])  # its replica id, as on core 1


def test_releases_that_wait_for_the_next_call_keep_every_result_exact(world):
    # Small buffers' releases travel with the process's next call (at most 64 wait); large
    # ones go at once. Mixed, and more than 64 in a row, the daemon must read every frame.
    def rank(index):
        c = world[index]
        executable = c.compile(PER_REPLICA, compile_options=TWO_REPLICAS)
        for round_ in range(3):
            small = [c.buffer_from_numpy(np.full(2, i, np.float32)) for i in range(150)]
            large = c.buffer_from_numpy(np.ones(1 << 16, np.float32))  # 256 KiB: released at once
            for b in small[:100]:
                b.destroy()
            large.destroy()
            for b in small[100:]:
                b.destroy()
            x = np.full(2, 10.0 * round_, np.float32)
            (out,), = executable.execute([c.buffer_from_numpy(x)])
            np.testing.assert_array_equal(out.to_numpy(), x + index)
        return True

    assert _run_together([lambda i=i: rank(i) for i in range(2)]) == [True, True]


@pytest.fixture
def impatient_world(plugin_api, monkeypatch):
    # The timeout is read once, when the clients are created; a later change does not count.
    monkeypatch.setenv("PJRT_NEURON_COLLECTIVE_TIMEOUT", "2")
    clients = _create_world(plugin_api)
    monkeypatch.setenv("PJRT_NEURON_COLLECTIVE_TIMEOUT", "60")
    yield clients
    for c in clients:
        c.destroy()


def test_collective_that_a_rank_never_runs_fails_after_the_timeout(impatient_world):
    world = impatient_world
    executable = world[0].compile(ALL_REDUCE, compile_options=TWO_REPLICAS)
    arg = world[0].buffer_from_numpy(np.ones(2, np.float32))
    start = time.monotonic()
    with pjrt_error(P.ErrorCode.DEADLINE_EXCEEDED, "PJRT_LoadedExecutable_Execute",
                    "waited 2 s for NeuronCore(s) 1 to join", "PJRT_NEURON_COLLECTIVE_TIMEOUT"):
        executable.execute([arg])
    assert time.monotonic() - start < 30
    # The failure lost nothing: the argument is intact and the client still works.
    np.testing.assert_array_equal(arg.to_numpy(), [1.0, 1.0])
    double = world[0].compile(PER_REPLICA)
    (out,), = double.execute([arg])
    np.testing.assert_array_equal(out.to_numpy(), [1.0, 1.0])


def test_a_new_job_never_joins_the_world_of_one_that_is_ending(plugin_api, monkeypatch):
    # The old job's rank 0 has left, rank 1 not yet: the new job's rank 0 must form a world
    # with the new rank 1, not take the old rank 0's place.
    monkeypatch.setenv("PJRT_NEURON_COLLECTIVE_TIMEOUT", "10")
    old = _create_world(plugin_api)
    old[0].destroy()
    time.sleep(0.5)  # the daemon has ended its session
    new = _create_world(plugin_api)
    try:
        executables = [c.compile(ALL_REDUCE, compile_options=TWO_REPLICAS) for c in new]
        inputs = [np.array([1.0, 2.0], np.float32), np.array([10.0, 20.0], np.float32)]

        def rank(index):
            (out,), = executables[index].execute([new[index].buffer_from_numpy(inputs[index])])
            return out.to_numpy()

        for r in _run_together([lambda i=i: rank(i) for i in range(2)]):
            np.testing.assert_array_equal(r, inputs[0] + inputs[1])
    finally:
        for c in [old[1], *new]:
            c.destroy()


def test_a_rank_that_exits_fails_its_waiting_peer_at_once(plugin_api, monkeypatch):
    monkeypatch.setenv("PJRT_NEURON_COLLECTIVE_TIMEOUT", "120")
    first, second = _create_world(plugin_api)
    try:
        executable = first.compile(ALL_REDUCE, compile_options=TWO_REPLICAS)
        arg = first.buffer_from_numpy(np.ones(2, np.float32))
        threading.Timer(1.0, second.destroy).start()  # rank 1 leaves while rank 0 waits
        start = time.monotonic()
        with pjrt_error(P.ErrorCode.ABORTED, "PJRT_LoadedExecutable_Execute",
                        "process 1 (pid", "NeuronCore(s) 1) exited before joining"):
            executable.execute([arg])
        assert time.monotonic() - start < 60  # well before the 120 s timeout
    finally:
        first.destroy()


def test_a_process_whose_peers_never_start_fails_after_the_timeout(plugin_api, monkeypatch):
    monkeypatch.setenv("PJRT_NEURON_COLLECTIVE_TIMEOUT", "2")
    with pjrt_error(P.ErrorCode.DEADLINE_EXCEEDED, "PJRT_Client_Create",
                    "process(es) 1 of 2 never attached", "check that every rank started"):
        plugin_api.create_client({"node_id": 0, "num_nodes": 2, "visible_cores": "0"})


@pytest.mark.parametrize("options, message", [
    ({"node_id": -1, "num_nodes": 2}, "create option 'node_id' must be a non-negative integer"),
    ({"node_id": 0, "num_nodes": 0}, "create option 'num_nodes' must be a positive integer"),
    ({"node_id": 2, "num_nodes": 2}, "process index 2 is not below the world size 2"),
    ({"node_id": "0", "num_nodes": 2}, "create option 'node_id' must be a non-negative integer"),
])
def test_bad_process_options_are_refused(plugin_api, options, message):
    with pjrt_error(P.ErrorCode.INVALID_ARGUMENT, "PJRT_Client_Create", message):
        plugin_api.create_client(options)


@pytest.mark.parametrize("variable, value, message", [
    ("NEURON_PJRT_PROCESS_INDEX", "one", "NEURON_PJRT_PROCESS_INDEX='one' is not a process index"),
    ("NEURON_PJRT_WORLD_SIZE", "0", "NEURON_PJRT_WORLD_SIZE='0' is not a positive integer"),
    ("NEURON_PJRT_PROCESSES_NUM_DEVICES", "1,x", "NEURON_PJRT_PROCESSES_NUM_DEVICES entry='x'"),
    ("PJRT_NEURON_COLLECTIVE_TIMEOUT", "soon", "PJRT_NEURON_COLLECTIVE_TIMEOUT='soon' is not a positive number"),
    ("PJRT_NEURON_COLLECTIVE_TIMEOUT", "5s", "PJRT_NEURON_COLLECTIVE_TIMEOUT='5s' is not a positive number"),
    ("PJRT_NEURON_DAEMON_IDLE_SECONDS", "-1", "PJRT_NEURON_DAEMON_IDLE_SECONDS='-1' is not a non-negative number"),
])
def test_bad_process_environment_is_refused(plugin_api, monkeypatch, variable, value, message):
    monkeypatch.setenv("NEURON_PJRT_WORLD_SIZE", "2")
    monkeypatch.setenv("NEURON_PJRT_PROCESS_INDEX", "0")
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "0")
    monkeypatch.setenv(variable, value)
    with pjrt_error(P.ErrorCode.INVALID_ARGUMENT, "PJRT_Client_Create", message):
        plugin_api.create_client()


def test_update_global_process_info_checks_its_arguments(world):
    client = world[0]
    client._call("PJRT_Client_UpdateGlobalProcessInfo", process_infos=None, num_process_infos=0)
    with pjrt_error(P.ErrorCode.INVALID_ARGUMENT, "PJRT_Client_UpdateGlobalProcessInfo",
                    "process_infos is null but num_process_infos is 2"):
        client._call("PJRT_Client_UpdateGlobalProcessInfo", process_infos=None, num_process_infos=2)


def test_a_program_placed_nowhere_runs_on_the_process_own_core(world):
    # Compile options without a device assignment: each rank's own core, not the job's first.
    for index, client in enumerate(world):
        executable = client.compile(PER_REPLICA)
        assert [d.id for d in executable.addressable_devices] == [index]
        (out,), = executable.execute([client.buffer_from_numpy(np.full(2, 5.0, np.float32))])
        np.testing.assert_array_equal(out.to_numpy(), [5.0, 5.0])


def test_a_collective_started_after_a_rank_exited_fails_at_once(plugin_api, monkeypatch):
    monkeypatch.setenv("PJRT_NEURON_COLLECTIVE_TIMEOUT", "120")
    first, second = _create_world(plugin_api)
    try:
        second.destroy()
        executable = first.compile(ALL_REDUCE, compile_options=TWO_REPLICAS)
        start = time.monotonic()
        # The daemon may learn of the exit just before or just after the request arrives.
        with pjrt_error(P.ErrorCode.ABORTED, "PJRT_LoadedExecutable_Execute", "NeuronCore", "exited"):
            executable.execute([first.buffer_from_numpy(np.ones(2, np.float32))])
        assert time.monotonic() - start < 30
    finally:
        first.destroy()


ALL_REDUCE_4 = ALL_REDUCE.replace("dense<[[0, 1]]> : tensor<1x2xi64>", "dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>")


def test_processes_with_several_cores_each_reduce_over_all_of_them(plugin_api, monkeypatch):
    # Two processes holding cores 4-5 and 6-7 of a trn1.32xlarge: a 4-replica all-reduce gets
    # two argument lists from each process, and device ids are physical cores, not 0-3.
    monkeypatch.setenv("PJRT_NEURON_COLLECTIVE_TIMEOUT", "60")
    with ThreadPoolExecutor(2) as pool:
        clients = list(pool.map(lambda i: plugin_api.create_client(
            {"node_id": i, "num_nodes": 2, "visible_cores": ["4-5", "6-7"][i], "instance_type": "trn1.32xlarge"}),
            range(2)))
    try:
        assignment = P.compile_options_proto(num_replicas=4)
        executables = []
        for c in clients:
            assert [d.id for d in c.devices()] == [4, 5, 6, 7]
            assert [d.process_index for d in c.devices()] == [0, 0, 1, 1]
            executables.append(c.compile(ALL_REDUCE_4, compile_options=assignment))

        def rank(index):
            client = clients[index]
            args = [[client.buffer_from_numpy(np.full(2, 10.0 ** (2 * index + k), np.float32), device=d)]
                    for k, d in enumerate(client.addressable_devices())]
            outputs = executables[index].execute(args)
            return [row[0].to_numpy() for row in outputs]

        for outputs in _run_together([lambda i=i: rank(i) for i in range(2)]):
            assert len(outputs) == 2
            for out in outputs:
                np.testing.assert_array_equal(out, [1111.0, 1111.0])
    finally:
        for c in clients:
            c.destroy()


# The child only calls the plugin once and sleeps: none of JAX's threads are needed there.
@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")
def test_a_forked_child_neither_uses_the_cores_nor_keeps_a_dead_rank_alive(plugin_api, monkeypatch):
    # A DataLoader worker forked from rank 1 inherits its connection to the daemon.
    monkeypatch.setenv("PJRT_NEURON_COLLECTIVE_TIMEOUT", "60")
    first, second = _create_world(plugin_api)
    child = os.fork()
    if child == 0:
        try:
            second.buffer_from_numpy(np.ones(2, np.float32))
            status = 1
        except P.PjrtError as e:
            status = 0 if "forked from the one that holds the NeuronCores" in str(e) else 2
        time.sleep(30 if status == 0 else 0)
        os._exit(status)
    try:
        time.sleep(1.0)  # the child has tried by now
        second.destroy()  # rank 1 exits; its child lives on
        executable = first.compile(ALL_REDUCE, compile_options=TWO_REPLICAS)
        start = time.monotonic()
        with pjrt_error(P.ErrorCode.ABORTED, "PJRT_LoadedExecutable_Execute", "exited"):
            executable.execute([first.buffer_from_numpy(np.ones(2, np.float32))])
        assert time.monotonic() - start < 30
        os.kill(child, signal.SIGTERM)
        _, status = os.waitpid(child, 0)
        assert os.WIFSIGNALED(status) or os.WEXITSTATUS(status) == 0, status
    finally:
        first.destroy()


# ---------------------------------------------------------------- transfers through the daemon
# From 64 KiB up, bytes cross in shared memory (a window per connection) instead of the socket.

WINDOW_THRESHOLD = 64 << 10
KEPT_WINDOW = 256 << 20


def _sample(dtype, count, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(count).astype(dtype)
    return rng.integers(-100, 100, count).astype(dtype)


@pytest.mark.parametrize("nbytes", [4, WINDOW_THRESHOLD - 4, WINDOW_THRESHOLD, (1 << 20) + 4, 8 << 20, 2 << 20])
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.float64])
def test_transfers_of_every_size_round_trip_exactly(world, nbytes, dtype):
    count = max(1, nbytes // np.dtype(dtype).itemsize)

    def rank(index):  # both ranks at once: each uses its own connection and window
        x = _sample(dtype, count, seed=index)
        got = world[index].buffer_from_numpy(x).to_numpy()
        return x, got

    for x, got in _run_together([lambda i=i: rank(i) for i in range(2)]):
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got, x)


def test_strided_input_above_the_window_threshold_arrives_dense(world):
    whole = _sample(np.float32, 512 * 1024, seed=3).reshape(512, 1024)
    view = whole[:, ::2]  # every other column: 1 MiB of elements spread over 2 MiB
    buf = world[0].buffer_from_numpy(view, byte_strides=view.strides)
    np.testing.assert_array_equal(buf.to_numpy(), view)


def test_copy_raw_to_host_above_the_window_threshold_reads_its_range(plugin_api, world):
    x = _sample(np.float32, 1 << 20, seed=4)
    buf = world[1].buffer_from_numpy(x)
    out = np.zeros(x.size - 1000, np.float32)
    a = plugin_api.call("PJRT_Buffer_CopyRawToHost", buffer=buf, dst=out, offset=4000,
                        transfer_size=out.nbytes)
    if a.event:
        event = P.Event(plugin_api, a.event, world[1])
        event.await_()
        event.destroy()
    np.testing.assert_array_equal(out, x[1000:])


def _transfer_windows(pid) -> list[int]:
    """Sizes of the shared transfer windows a process has mapped."""
    sizes = []
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            if "pjrt-neuron-transfer" in line:
                start, end = (int(part, 16) for part in line.split()[0].split("-"))
                sizes.append(end - start)
    return sizes


def _daemon_pids() -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if b"pjrt-neuron-instanced" in f.read().split(b"\0")[0]:
                    pids.append(int(entry))
        except (OSError, ValueError):
            continue
    return pids


def test_a_huge_transfer_leaves_no_huge_window_mapped(world):
    x = np.arange((KEPT_WINDOW + (4 << 20)) // 4, dtype=np.float32)  # 260 MiB, above the kept size
    buf = world[0].buffer_from_numpy(x)
    back = buf.to_numpy()
    assert back[0] == 0 and back[-1] == x[-1] and np.array_equal(back[::4099], x[::4099])
    del back
    buf.destroy()
    small = _sample(np.float32, 1 << 20, seed=5)  # a kept window afterwards still works
    np.testing.assert_array_equal(world[0].buffer_from_numpy(small).to_numpy(), small)
    daemons = _daemon_pids()
    assert daemons, "no instance daemon is running"
    for pid in [os.getpid(), *daemons]:
        assert all(size <= KEPT_WINDOW for size in _transfer_windows(pid)), (pid, _transfer_windows(pid))
    assert any(_transfer_windows(pid) for pid in daemons)  # the small transfer's window is kept


NO_RESULTS = """
func.func @main(%a: tensor<2xf32>) -> () {
  return
}"""


def test_program_without_results_runs_in_each_process(world):
    # Through the instance daemon: nothing comes back, and the argument stays usable.
    for client in world:
        executable = client.compile(NO_RESULTS, compile_options=TWO_REPLICAS)
        a = client.buffer_from_numpy(np.array([1.0, 2.0], np.float32))
        assert executable.execute([a]) == [[]]
        np.testing.assert_array_equal(a.to_numpy(), [1.0, 2.0])


DOUBLE_F32_4X6 = """
func.func @main(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %y = stablehlo.add %x, %x : tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}
"""


def test_transfer_manager_through_the_daemon(plugin_api, world):
    """Parts gather in the process and reach the daemon at the last one: buffers retrieved first,
    refused until then, HBM charged at creation, errors to their readers, then used in a run."""
    from test_capi_transfer_manager import ARRAYS, Manager

    client = world[1]
    device = client.addressable_devices()[0]
    before = device.memory_stats()["bytes_in_use"]
    m = Manager(plugin_api, client, ARRAYS, memory=device.default_memory)
    assert device.memory_stats()["bytes_in_use"] == before + sum(a.nbytes for a in ARRAYS)
    buffers = [m.retrieve(i) for i in range(len(ARRAYS))]
    raw = ARRAYS[0].tobytes()
    m.transfer(0, raw[:16], 0, False)
    assert not buffers[0].ready_event().is_ready
    with pjrt_error(P.ErrorCode.FAILED_PRECONDITION, "still being filled by a transfer manager"):
        buffers[0].to_numpy()
    m.transfer(0, raw[16:], 16, True)
    buffers[0].ready_event().await_()
    m.upload(1, ARRAYS[1])
    message = b"upload source went away"
    m.call("SetBufferError", buffer_index=2, error_code=P.ErrorCode.DATA_LOSS,
           error_message=ctypes.c_char_p(message), error_message_size=len(message))
    with pjrt_error(P.ErrorCode.DATA_LOSS, "upload source went away"):
        buffers[2].to_numpy()
    for b, a in zip(buffers[:2], ARRAYS):
        assert b.device.id == device.id
        np.testing.assert_array_equal(b.to_numpy(), a)
    m.destroy()
    (out,) = client.compile(DOUBLE_F32_4X6).execute([buffers[0]])
    np.testing.assert_array_equal(out[0].to_numpy(), ARRAYS[0] * 2)
    for b in buffers:
        b.destroy()
    assert device.memory_stats()["bytes_in_use"] == before + out[0].to_numpy().nbytes


def test_a_copy_to_the_host_checks_its_destination_size_in_the_daemon(world):
    # Through the daemon the size check and the copy are one request: a short destination is
    # refused whole (nothing written), an exact one gets the bytes, a large one gets them inline
    # or through the shared window.
    for count in (4, 1 << 16):
        values = np.arange(count, dtype=np.float32)
        buffer = world[0].buffer_from_numpy(values)
        assert buffer.host_size() == values.nbytes
        short = np.full(count - 1, -1.0, np.float32)
        with pjrt_error(P.ErrorCode.INVALID_ARGUMENT, "PJRT_Buffer_ToHostBuffer",
                        f"dst_size is {short.nbytes} bytes but the buffer needs {values.nbytes}"):
            buffer.api.call("PJRT_Buffer_ToHostBuffer", src=buffer.ptr, dst=short.ctypes.data, dst_size=short.nbytes)
        np.testing.assert_array_equal(short, -1.0)
        np.testing.assert_array_equal(buffer.to_numpy(), values)


def test_layouts_on_the_daemon_engine_come_from_the_model_and_equal_the_cpu_plugin_s(plugin_api, cpu_api, world):
    from test_capi_extensions import LAYOUT_SLOTS, LAYOUTS, OutputLayouts, Ext
    ours, cpu = Ext(plugin_api, LAYOUTS, LAYOUT_SLOTS), Ext(cpu_api, LAYOUTS, LAYOUT_SLOTS)
    cpu_client = P.Client(cpu_api)
    try:
        client = world[0]
        for dtype, dims in [(np.float32, (2, 3)), (np.int8, ()), (np.int32, (4, 0, 5))]:
            assert ours.default_layout(client, dtype, dims) == cpu.default_layout(cpu_client, dtype, dims)
            host = np.zeros(dims, dtype=dtype)
            buffer, cpu_buffer = client.buffer_from_numpy(host), cpu_client.buffer_from_numpy(host)
            assert ours.buffer_layout(buffer) == cpu.buffer_layout(cpu_buffer)
            buffer.destroy()
            cpu_buffer.destroy()
        executable = client.compile(PER_REPLICA, compile_options=TWO_REPLICAS)
        with executable.get_executable() as e:
            with pytest.raises(P.PjrtError) as info:
                ours.call("output_layouts", OutputLayouts(executable=e.ptr))
        assert info.value.code == P.ErrorCode.UNIMPLEMENTED
        assert "PJRT_Layouts_ExecutableGetOutputLayouts" in str(info.value)
        executable.destroy()
    finally:
        cpu_client.close()


@pytest.fixture
def newer_build_world(plugin_api, monkeypatch):
    monkeypatch.setenv("PJRT_NEURON_COLLECTIVE_TIMEOUT", "60")
    path = config.engine_builds()["lammps-jax-pjrt-cpu"]
    assert path is not None, "pip install '.[engine-jax]'"
    clients = _create_world(plugin_api, engine_library_path=path)
    yield clients
    for c in clients:
        c.destroy()


def test_the_newer_build_runs_a_job_launch_by_launch_as_the_older_one_does(newer_build_world):
    # That build holds a launch of a program of several cores until all its cores launched it.
    world = newer_build_world
    assert "pjrt_c_api_cpu_plugin.so" in world[0].platform_version
    executable = world[1].compile(PER_REPLICA, compile_options=TWO_REPLICAS)
    (out,), = executable.execute([world[1].buffer_from_numpy(np.zeros(2, np.float32))])
    np.testing.assert_array_equal(out.to_numpy(), [1.0, 1.0])  # alone, and with its own replica id
    executables = [c.compile(ALL_REDUCE, compile_options=TWO_REPLICAS) for c in world]

    def rank(index):
        (out,), = executables[index].execute([world[index].buffer_from_numpy(np.full(2, index + 1, np.float32))])
        return out.to_numpy()

    for _ in range(2):
        for r in _run_together([lambda i=i: rank(i) for i in range(2)]):
            np.testing.assert_array_equal(r, [3.0, 3.0])


def test_different_programs_that_meet_in_collectives_are_refused_on_the_newer_build(newer_build_world):
    world = newer_build_world
    # A channel id is what lets the daemon match the collectives of different programs.
    with_channel = ALL_REDUCE.replace(
        "{replica_groups", "{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups")
    doubled = with_channel.replace("return %0 : tensor<2xf32>",
                                   "%1 = stablehlo.add %0, %0 : tensor<2xf32>\n  return %1 : tensor<2xf32>")
    assert doubled != with_channel != ALL_REDUCE
    executables = [world[0].compile(with_channel, compile_options=TWO_REPLICAS),
                   world[1].compile(doubled, compile_options=TWO_REPLICAS)]

    def rank(index):
        with pjrt_error(P.ErrorCode.FAILED_PRECONDITION, "PJRT_LoadedExecutable_Execute",
                        "ran different programs whose collectives correspond",
                        "PJRT_NEURON_SIM_ENGINE=xla-cpu-pjrt"):
            executables[index].execute([world[index].buffer_from_numpy(np.ones(2, np.float32))])
        return True

    assert _run_together([lambda i=i: rank(i) for i in range(2)]) == [True, True]
    # The job goes on: the same program in both processes still runs.
    same = [c.compile(ALL_REDUCE, compile_options=TWO_REPLICAS) for c in world]
    results = _run_together([lambda i=i: same[i].execute([world[i].buffer_from_numpy(np.ones(2, np.float32))])[0][0]
                             .to_numpy() for i in range(2)])
    for r in results:
        np.testing.assert_array_equal(r, [2.0, 2.0])
