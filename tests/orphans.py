"""A process forked by a build must die with the build: run a script whose forked child writes its pid
to a file, SIGKILL the script, and check that the child goes too (tiles collector, forked stages)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from geoengine.procs import alive as _alive  # a zombie is dead, waiting to be reaped


def assert_child_dies_with_parent(script: str, pidfile: Path, env: dict | None = None, what: str = "the child") -> None:
    """`script` (python -c) forks a child that writes its pid to `pidfile` and then waits."""
    proc = subprocess.Popen([sys.executable, "-c", script], env=env)
    try:
        t0 = time.monotonic()
        while not pidfile.exists() or not pidfile.read_text():
            assert proc.poll() is None and time.monotonic() - t0 < 60, f"{what} did not start"
            time.sleep(0.05)
        child = int(pidfile.read_text())
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        t0 = time.monotonic()
        while _alive(child) and time.monotonic() - t0 < 10:
            time.sleep(0.05)
        assert not _alive(child), f"{what} outlived its killed parent"
    finally:
        if proc.poll() is None:
            proc.kill()
        if pidfile.exists() and pidfile.read_text():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
