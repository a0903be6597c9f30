"""Subprocess jobs that the selected tests of a module read, started together on a small pool.

A module defines its jobs by name, marks each test with the names it reads (`uses`), and a
module-scoped fixture starts a `JobPool` with the names the selected tests want
(`wanted_jobs`): the slow subprocesses then run while the other tests go on.
"""

from __future__ import annotations

import json
import subprocess
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

# The test-function attribute `uses` sets (a plain attribute: no marker to register).
USES_ATTRIBUTE = "job_names"


@dataclass
class Job:
    argv: list
    env: dict
    data: Any = None  # whatever the module wants handed on with the result


@dataclass
class Result:
    name: str
    argv: list
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def describe(self) -> str:
        return (f"{self.name}: {' '.join(map(str, self.argv))}\nexit {self.returncode} after {self.seconds:.0f} s\n"
                f"--- stdout (tail) ---\n{self.stdout[-4000:]}\n--- stderr (tail) ---\n{self.stderr[-6000:]}")

    def ok(self) -> "Result":
        assert self.returncode == 0, self.describe()
        return self

    def json(self) -> dict:
        """The JSON of the last stdout line, of a run that succeeded."""
        self.ok()
        lines = self.stdout.strip().splitlines()
        assert lines, self.describe()
        return json.loads(lines[-1])


def run(name: str, job: Job, cwd, timeout: float) -> Result:
    """Runs a job to its end; a timeout is a failed result (exit -1), not an exception."""
    start = time.monotonic()
    try:
        p = subprocess.run(job.argv, env=job.env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        return Result(name, job.argv, p.returncode, p.stdout, p.stderr, time.monotonic() - start)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return Result(name, job.argv, -1, out, err + f"\n[timed out after {timeout} s]", time.monotonic() - start)


def uses(*names):
    """Records which jobs a test reads."""
    def mark(test):
        setattr(test, USES_ATTRIBUTE, names)
        return test
    return mark


def wanted_jobs(request) -> set:
    """The job names the selected tests of the requesting module read."""
    wanted = set()
    for item in request.session.items:
        if getattr(item, "module", None) is request.module:
            wanted.update(getattr(getattr(item, "function", None), USES_ATTRIBUTE, ()))
    return wanted


class JobPool:
    """Starts the wanted jobs at once (in `jobs` order: list the longest first, so the pool
    finishes sooner); results are read by name, and a job not started yet starts when read."""

    def __init__(self, jobs: dict, wanted: set, workers: int = 3, *, run: Callable[[str, Any], Any]):
        self.jobs = jobs
        self._run = run
        self.pool = ThreadPoolExecutor(max_workers=workers)
        self.futures: dict[str, Future] = {}
        self._json: dict[str, dict] = {}
        for name in jobs:
            if name in wanted:
                self._submit(name)

    def _submit(self, name) -> Future:
        if name not in self.futures:
            self.futures[name] = self.pool.submit(self._run, name, self.jobs[name])
        return self.futures[name]

    def __getitem__(self, name):
        return self._submit(name).result()

    def json(self, name) -> dict:
        """`self[name].json()`, parsed once for all the tests that read it."""
        if name not in self._json:
            self._json[name] = self[name].json()
        return self._json[name]

    def close(self):
        self.pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "JobPool":
        return self

    def __exit__(self, *exc):
        self.close()
