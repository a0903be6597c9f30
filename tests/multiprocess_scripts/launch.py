"""Starts N copies of a script as the processes of one job on localhost and reports them all.

    python launch.py N SCRIPT [ARGS...]

Copy i gets `--process-id i --num-processes N --coordinator 127.0.0.1:PORT` (a free port), and
the variables of entry i of LAUNCH_PER_PROCESS_ENV (a JSON list of objects) if it is set: the
processes of a job on several (simulated) hosts.
Prints one JSON line: per process, its exit status, its last JSON stdout line (or null), and
the tails of its output. Exits 0 whatever the copies did: the caller judges.
"""

import json
import os
import socket
import subprocess
import sys
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def last_json(text: str):
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def main(argv):
    count, script, extra = int(argv[0]), argv[1], argv[2:]
    coordinator = f"127.0.0.1:{free_port()}"
    start = time.monotonic()
    per_process = json.loads(os.environ.get("LAUNCH_PER_PROCESS_ENV", "[]")) or [{}] * count
    procs = [subprocess.Popen([sys.executable, script, "--process-id", str(i), "--num-processes", str(count),
                               "--coordinator", coordinator, *extra],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, **per_process[i]})
             for i in range(count)]
    report = []
    for p in procs:
        out, err = p.communicate()
        report.append({"returncode": p.returncode, "seconds": round(time.monotonic() - start, 2),
                       "result": last_json(out), "stdout": out[-3000:], "stderr": err[-6000:]})
    print(json.dumps({"processes": report}))


if __name__ == "__main__":
    main(sys.argv[1:])
