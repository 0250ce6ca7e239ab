"""Signals under `geoengine serve --workers 2` (the soak's setting): SIGHUP replaces every worker
process (uvicorn's supervisor restarts them one by one; each new worker opens the bundle afresh) with no
failed request under load, and SIGTERM lets a request that is provably still in flight (its body is
still arriving when the signal is sent) finish with 200 before the server exits."""

from __future__ import annotations

import os
import re
import signal
import threading
import time

import httpx
import pytest

from geoengine.gateway import KeyStore
from geoengine.procs import alive as _alive  # a zombie is gone
from tests.serving import free_port, start_serve, wait_up

from .test_faults import HOST, A, B

_STARTED = re.compile(r"Started server process \[(\d+)\]")


def _worker_pids(logpath) -> list[int]:
    return [int(p) for p in _STARTED.findall(logpath.read_text())]


@pytest.mark.e2e
def test_sighup_replaces_both_workers_and_sigterm_drains_an_in_flight_request(build_region, tmp_path):
    bundle = build_region("andorra")
    home = tmp_path / "home"
    env = {**os.environ, "GEOENGINE_HOME": str(home), "GEOENGINE_GATEWAY_HOST": HOST, "GEOENGINE_LOG_LEVEL": "info"}
    env.pop("GEOENGINE_REDIS_URL", None)
    key, _ = KeyStore(home / "state.sqlite3").create("unlimited")
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    port = free_port()
    logpath = tmp_path / "serve.log"
    proc = start_serve(bundle, port, env, open(logpath, "w"), "--workers", "2")
    try:
        wait_up(port, proc, logpath)
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 120
        while len(_worker_pids(logpath)) < 2:  # both workers up (the first may answer before the second)
            assert time.time() < deadline, logpath.read_text()[-3000:]
            time.sleep(0.3)
        old = _worker_pids(logpath)
        assert len(old) == 2 and all(map(_alive, old)), old

        statuses: list = []
        stop = threading.Event()

        def load():
            # keep-alive connections, as real clients use: a worker that shuts down gives an idle
            # connection a grace to deliver a request already on the wire (server/protocol.py)
            with httpx.Client(base_url=base, headers=h, timeout=60) as c:
                while not stop.is_set():
                    for call in (lambda: c.post("/route", json={"locations": [A, B]}),
                                 lambda: c.get("/search", params={"q": "andorra"})):
                        try:
                            statuses.append(call().status_code)
                        except httpx.HTTPError as exc:
                            statuses.append(repr(exc))

        threads = [threading.Thread(target=load) for _ in range(3)]
        for t in threads:
            t.start()
        time.sleep(1)
        proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 240
        while time.time() < deadline:
            new = [p for p in _worker_pids(logpath) if p not in old]
            if len(new) >= 2 and not any(map(_alive, old)):
                break
            time.sleep(0.5)
        time.sleep(1)  # keep the load on the new workers a moment
        stop.set()
        for t in threads:
            t.join(60)
        new = [p for p in _worker_pids(logpath) if p not in old]
        assert len(new) >= 2 and all(map(_alive, new[-2:])), logpath.read_text()[-3000:]
        assert not any(map(_alive, old)), ("old workers still running", old)
        bad = [s for s in statuses if s != 200]
        assert len(statuses) > 20 and not bad, bad[:10]
        assert proc.poll() is None

        # SIGTERM with a request in flight: its body is sent in two parts, the signal between them
        sent_at: dict[str, float] = {}
        body = b'{"locations": [{"lon": 1.5218, "lat": 42.5063}, {"lon": 1.5333, "lat": 42.5107}]}'

        def slow_body():
            yield body[:20]
            time.sleep(1.5)
            sent_at["last_chunk"] = time.monotonic()
            yield body[20:]

        result: dict = {}

        def post():
            try:
                r = httpx.post(base + "/route", content=slow_body(), timeout=60,
                               headers={**h, "Content-Type": "application/json"})
                result["status"], result["at"] = r.status_code, time.monotonic()
            except httpx.HTTPError as exc:
                result["status"] = repr(exc)

        t = threading.Thread(target=post)
        t.start()
        time.sleep(0.7)  # the request line, headers and first chunk are in
        term_at = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        t.join(90)
        assert result.get("status") == 200, (result, logpath.read_text()[-3000:])
        assert sent_at["last_chunk"] > term_at and result["at"] > term_at  # in flight across the signal
        assert proc.wait(60) in (0, -signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        for pid in _worker_pids(logpath):  # a killed supervisor leaves its workers behind
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
