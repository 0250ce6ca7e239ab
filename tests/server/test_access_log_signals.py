"""The access log loses no line across signals: `geoengine serve --workers 2` as users start it (access
log on, to a file), tile requests answered by the front door (whose lines are buffered until the end of
the event-loop turn, server/protocol.py `_AccessLog`), then SIGHUP (uvicorn's supervisor replaces both
workers, which shut down with their buffers) and SIGTERM right after the last answer. Every request has
exactly one line, in the order it was answered on its connection."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import httpx
import pytest

from geoengine.gateway import KeyStore
from geoengine.procs import alive
from tests.serving import free_port, wait_up

from .test_faults import HOST

_STARTED = re.compile(r"Started server process \[(\d+)\]")
_LINE = re.compile(r'"GET /tiles/andorra/12/2065/1513\?n=(\d+) HTTP/1\.1" (\d+)')
TILE = "/tiles/andorra/12/2065/1513"


def _send(client: httpx.Client, first: int, n: int) -> list[int]:
    return [client.get(f"{TILE}?n={i}").status_code for i in range(first, first + n)]


@pytest.mark.e2e
def test_no_access_log_line_is_lost_on_sighup_or_sigterm(build_region, tmp_path):
    bundle = build_region("andorra")
    home = tmp_path / "home"
    env = {**os.environ, "GEOENGINE_HOME": str(home), "GEOENGINE_GATEWAY_HOST": HOST, "PYTHONUNBUFFERED": "1"}
    env.pop("GEOENGINE_REDIS_URL", None)
    key, _ = KeyStore(home / "state.sqlite3").create("unlimited")
    headers = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    port = free_port()
    logpath = tmp_path / "serve.log"
    with open(logpath, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "geoengine", "serve", "--bundle", str(bundle), "--port",
                                 str(port), "--workers", "2", "--exit-after", "900"],
                                env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_up(port, proc, logpath)
        deadline = time.time() + 120
        while len(_STARTED.findall(logpath.read_text())) < 2:
            assert time.time() < deadline, logpath.read_text()[-3000:]
            time.sleep(0.3)
        old = [int(p) for p in _STARTED.findall(logpath.read_text())]
        statuses = []
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as c:
            statuses += _send(c, 0, 400)
        proc.send_signal(signal.SIGHUP)  # the workers are replaced; the old ones exit with their buffers
        deadline = time.time() + 240
        while time.time() < deadline:
            new = [int(p) for p in _STARTED.findall(logpath.read_text()) if int(p) not in old]
            if len(new) >= 2 and not any(map(alive, old)):
                break
            time.sleep(0.3)
        assert not any(map(alive, old)), logpath.read_text()[-3000:]
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as c:
            statuses += _send(c, 400, 400)
            proc.send_signal(signal.SIGTERM)  # at once after the last answer
        assert proc.wait(60) in (0, -signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert set(statuses) == {200}, sorted(set(statuses))
    text = logpath.read_text()
    logged = [(int(n), int(s)) for n, s in _LINE.findall(text)]
    assert [n for n, _ in logged] == list(range(800)), (len(logged), text[-2000:])  # each once, in order
    assert {s for _, s in logged} == {200}
    assert "Logging error" not in text
