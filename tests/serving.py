"""Servers in tests, in one place: a free loopback port, `geoengine serve` started as a user starts it (a
child process that stops by itself), the wait until it answers, its stop, and the application served by
uvicorn in a thread of the test process (for clients that need a real socket)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_serve(bundle, port: int, env: dict, log, *extra: str, exit_after: int = 900) -> subprocess.Popen:
    """`geoengine serve` on loopback `port`, access log off, exiting by itself after `exit_after` seconds;
    its output to the open file `log`. `extra`: more command-line options (`--workers 2`)."""
    return subprocess.Popen([sys.executable, "-m", "geoengine", "serve", "--bundle", str(bundle), "--port", str(port),
                             "--no-access-log", "--exit-after", str(exit_after), *extra],
                            env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_up(port: int, proc: subprocess.Popen, logpath: Path, timeout: float = 300, *, path: str = "/openapi.json",
            headers: dict | None = None) -> None:
    """Until GET `path` answers 200 (the test fails with the log's tail when the server exits or never does)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail("serve exited early:\n" + Path(logpath).read_text()[-3000:])
        try:
            if httpx.get(f"http://127.0.0.1:{port}{path}", headers=headers, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    pytest.fail("serve did not come up:\n" + Path(logpath).read_text()[-3000:])


def stop(proc: subprocess.Popen, timeout: float = 60) -> None:
    """SIGTERM, then SIGKILL when it has not exited after `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)


@contextlib.contextmanager
def thread_server(app, start_timeout: float = 30):
    """The ASGI `app` served by uvicorn on a free loopback port in a daemon thread: yields the port."""
    import uvicorn

    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + start_timeout
    while not srv.started and time.time() < deadline:
        time.sleep(0.05)
    assert srv.started, "uvicorn did not start"
    try:
        yield port
    finally:
        srv.should_exit = True
        thread.join(10)
