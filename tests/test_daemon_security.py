"""The instance daemon serves its owner only, and nothing planted in the shared lock directory
redirects a user's processes.

The machine runs the tests as root; "another user" is a Python process started as `nobody`.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import time

import numpy as np
import pytest

import pjrt_capi as P
from assertions import pjrt_error
from programs import ALL_REDUCE
from test_multiprocess_capi import TWO_REPLICAS, _create_world, _run_together

INSTANCE = "trn1.2xlarge"
NOBODY = 65534
OTHER_USER_PYTHON = "/usr/bin/python3"  # the venv's interpreter is not needed for a socket

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="starting a process as another user needs root")


@pytest.fixture
def lock_dir(tmp_path, monkeypatch):
    """A lock directory (so a daemon) of the test's own; the daemon leaves soon after its job."""
    monkeypatch.setenv("PJRT_NEURON_LOCK_DIR", str(tmp_path))
    monkeypatch.setenv("PJRT_NEURON_INSTANCE_TYPE", INSTANCE)
    monkeypatch.setenv("PJRT_NEURON_COLLECTIVE_TIMEOUT", "60")
    monkeypatch.setenv("PJRT_NEURON_DAEMON_IDLE_SECONDS", "1")
    return tmp_path


def _daemon_of(lock_dir) -> tuple[int, str]:
    """The pid and abstract address of the daemon logging into `lock_dir`."""
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if b"pjrt-neuron-instanced" in argv[0] and os.readlink(f"/proc/{entry}/fd/1").startswith(str(lock_dir)):
                return int(entry), argv[2].decode()
        except (OSError, ValueError, IndexError):
            continue
    raise AssertionError(f"no instance daemon logs into {lock_dir}")


def _daemon_log(lock_dir) -> str:
    return (lock_dir / INSTANCE / f"daemon-uid{os.geteuid()}" / "daemon.log").read_text()


def _all_reduce_works(clients):
    def rank(index):
        executable = clients[index].compile(ALL_REDUCE, compile_options=TWO_REPLICAS)
        (out,), = executable.execute([clients[index].buffer_from_numpy(np.full(2, index + 1, np.float32))])
        return out.to_numpy()
    for result in _run_together([lambda i=i: rank(i) for i in range(2)]):
        np.testing.assert_array_equal(result, [3.0, 3.0])


def _as_nobody(script: str, *args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([OTHER_USER_PYTHON, "-c", script, *args], user=NOBODY, group=NOBODY, extra_groups=[],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/", **kwargs)


# Connects to the address as the user it runs as and says hello; prints its uid, its pid and
# what came back ("closed" when the daemon hung up without a word).
INTRUDER = r"""
import os, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("\0" + sys.argv[1])
try:
    s.sendall(struct.pack("=Q", 1) + b"\x01")
    reply = s.recv(64)
except (ConnectionResetError, BrokenPipeError):  # closed before or while it spoke
    reply = b""
print(os.geteuid(), os.getpid(), "closed" if reply == b"" else "answered")
"""


def test_a_connection_from_another_user_is_refused_and_logged_while_the_owner_keeps_working(plugin_api, lock_dir):
    clients = _create_world(plugin_api)
    try:
        _, address = _daemon_of(lock_dir)
        intruder = _as_nobody(INTRUDER, address)
        out, err = intruder.communicate(timeout=60)
        assert intruder.returncode == 0, err
        uid, pid, outcome = out.split()
        assert (int(uid), outcome) == (NOBODY, "closed")
        assert (f"refused a connection from process {pid} of uid {NOBODY}: this daemon serves uid "
                f"{os.geteuid()} only") in _daemon_log(lock_dir)
        _all_reduce_works(clients)
    finally:
        for c in clients:
            c.destroy()


def _owner_connection(address):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect("\0" + address)
    return s


def _read_until_closed(s) -> bytes:
    data = b""
    while chunk := s.recv(4096):
        data += chunk
    return data


def test_malformed_truncated_and_oversized_frames_close_only_their_connection(plugin_api, lock_dir):
    clients = _create_world(plugin_api)
    try:
        daemon, address = _daemon_of(lock_dir)
        # Garbage as the first message: an error reply, then the connection closes.
        with _owner_connection(address) as s:
            s.sendall(struct.pack("=Q", 5) + b"\xfe\x00junk"[:5])
            reply = _read_until_closed(s)
        (length,) = struct.unpack("=Q", reply[:8])
        payload = reply[8:]
        assert len(payload) == length and payload[0] == P.ErrorCode.INVALID_ARGUMENT
        assert b"the first message must be hello or attach" in payload
        # A length no message comes near: closed without reading on.
        with _owner_connection(address) as s:
            s.sendall(struct.pack("=Q", 1 << 40))
            assert _read_until_closed(s) == b""
        # A frame that stops short: closed when the peer stops.
        with _owner_connection(address) as s:
            s.sendall(struct.pack("=Q", 1 << 30) + b"\x01" * 10)
            s.shutdown(socket.SHUT_WR)
            assert _read_until_closed(s) == b""
        # A length cut in half.
        with _owner_connection(address) as s:
            s.sendall(b"\x01\x02\x03")
            s.shutdown(socket.SHUT_WR)
            assert _read_until_closed(s) == b""
        assert _daemon_of(lock_dir)[0] == daemon  # the same daemon, still serving the job
        _all_reduce_works(clients)
    finally:
        for c in clients:
            c.destroy()


def test_the_daemon_files_are_the_owner_s_alone(plugin_api, lock_dir):
    clients = _create_world(plugin_api)
    for c in clients:
        c.destroy()
    directory = lock_dir / INSTANCE / f"daemon-uid{os.geteuid()}"
    assert oct(directory.lstat().st_mode & 0o7777) == oct(0o700)
    for name in ("daemon.log", "daemon.lock"):
        info = (directory / name).lstat()
        assert (info.st_uid, oct(info.st_mode & 0o777)) == (os.geteuid(), oct(0o600)), name


def _plant_link(directory, target):
    directory.parent.mkdir(parents=True, exist_ok=True)
    target.mkdir(mode=0o700)
    directory.symlink_to(target)


def _plant_foreign(directory, target):
    directory.mkdir(parents=True, mode=0o700)
    os.chown(directory, NOBODY, NOBODY)


def _plant_open(directory, target):
    directory.mkdir(parents=True)
    directory.chmod(0o755)


@pytest.mark.parametrize("plant, message", [
    (_plant_link, "is not a directory of this user"),
    (_plant_foreign, f"belongs to uid {NOBODY}, not to this user"),
    (_plant_open, "other users may enter it (mode 0755, not 0700)"),
], ids=["symlink", "another-user-s-directory", "open-to-everyone"])
def test_a_planted_daemon_directory_is_refused(plugin_api, lock_dir, plant, message):
    directory = lock_dir / INSTANCE / f"daemon-uid{os.geteuid()}"
    target = lock_dir / "planted-target"
    plant(directory, target)
    with pjrt_error(P.ErrorCode.PERMISSION_DENIED, "PJRT_Client_Create", str(directory), message):
        _create_world(plugin_api)
    assert not (directory / "daemon.log").exists() and not (target / "daemon.log").exists()


# Takes the address first (any user may bind an abstract name), then waits to be killed.
SQUATTER = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + sys.argv[1])
s.listen(8)
print("listening", flush=True)
while True:
    s.accept()
"""


def _wait_until_gone(pid, seconds=30):
    deadline = time.monotonic() + seconds
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{pid}"), "the idle daemon did not leave"


def test_another_user_s_process_at_the_daemon_address_is_refused(plugin_api, lock_dir):
    clients = _create_world(plugin_api)
    daemon, address = _daemon_of(lock_dir)
    for c in clients:
        c.destroy()
    _wait_until_gone(daemon)
    squatter = _as_nobody(SQUATTER, address)
    try:
        assert squatter.stdout.readline().strip() == "listening"
        with pjrt_error(P.ErrorCode.PERMISSION_DENIED, "PJRT_Client_Create",
                        f"is held by process {squatter.pid} of uid {NOBODY}, not by a daemon of this user"):
            _create_world(plugin_api)
    finally:
        squatter.kill()
        squatter.wait()


@pytest.mark.parametrize("kind", ["symlink", "hard link"])
def test_a_planted_link_in_place_of_a_core_lock_is_refused_and_its_target_untouched(plugin_api, lock_dir, kind):
    victim = lock_dir / "victim"
    victim.write_text("precious\n")
    lock = lock_dir / INSTANCE / "core-0.lock"
    lock.parent.mkdir()
    lock.parent.chmod(0o1777)
    if kind == "symlink":
        lock.symlink_to(victim)
        message = "is a symbolic link; refusing to use it as a core lock"
    else:
        os.link(victim, lock)
        message = "is not a plain file of one name"
    with pjrt_error(P.ErrorCode.PERMISSION_DENIED, "PJRT_Client_Create", str(lock), message):
        plugin_api.create_client({"visible_cores": "0"})
    assert victim.read_text() == "precious\n"
