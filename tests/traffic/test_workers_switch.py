"""`geoengine serve --workers 2` on the real Liechtenstein bundle under load (4 client threads, a new
connection per request, so the kernel spreads them over both workers; a bounded loop on loopback that
stops by itself): POST /admin/speeds in the middle. No request fails, every answer is entirely the old
or entirely the new duration, and every request sent after the POST answered gets the new one."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from geoengine.gateway import KeyStore
from tests import serving
from tests.serving import free_port, start_serve, wait_up

pytestmark = pytest.mark.e2e
HOST = "workers.test"
OSRM = "/route/v1/driving/9.5209,47.1410;9.5100,47.2200?overview=false"
BODY = json.dumps({"locations": [{"lon": 9.5209, "lat": 47.1410}, {"lon": 9.5100, "lat": 47.2200}]}).encode()


def call(url, headers, data=None):
    req = urllib.request.Request(url, data=data, headers={**headers, "Content-Type": "application/json"},
                                 method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def duration(path, body) -> float:
    doc = json.loads(body)
    return doc["routes"][0]["duration"] if path == "osrm" else doc["trip"]["summary"]["time"]


def test_speeds_switch_every_worker_under_load(build_region, tmp_path):
    bundle = build_region("liechtenstein")
    home = tmp_path / "home"
    key, _ = KeyStore(home / "state.sqlite3").create("unlimited", scopes=["admin"])
    env = {**os.environ, "GEOENGINE_HOME": str(home), "GEOENGINE_GATEWAY_HOST": HOST,
           "GEOENGINE_LOG_LEVEL": "warning", "GEOENGINE_SPEEDS_DIR": str(tmp_path / "speeds")}
    env.pop("GEOENGINE_WORKERS", None)
    port = free_port()
    log = open(tmp_path / "serve.log", "w")
    proc = start_serve(bundle, port, env, log, "--workers", "2", exit_after=600)
    base = f"http://127.0.0.1:{port}"
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    try:
        wait_up(port, proc, tmp_path / "serve.log", path="/health", headers=h)
        old = {"osrm": duration("osrm", call(base + OSRM, h)[1]),
               "route": duration("route", call(base + "/route", h, BODY)[1])}
        results = []  # (kind, sent, received, status, body)
        stop = threading.Event()
        lock = threading.Lock()

        def client(i):
            n = 0
            end = time.time() + 120  # stops by itself
            while not stop.is_set() and time.time() < end:
                kind = "osrm" if (i + n) % 2 else "route"
                sent = time.monotonic()
                try:
                    status, body = call(base + OSRM, h) if kind == "osrm" else call(base + "/route", h, BODY)
                except OSError as exc:
                    status, body = -1, str(exc).encode()
                with lock:
                    results.append((kind, sent, time.monotonic(), status, body))
                n += 1

        threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        time.sleep(3)
        ways = np.unique(np.load(bundle / "graph" / "seg_way.npy"))
        csv = ("way_id,speed_kmh\n" + "".join(f"{w},13\n" for w in ways.tolist())).encode()
        posted = time.monotonic()
        status, body = call(base + "/admin/speeds", h, csv)
        switched = time.monotonic()
        assert status == 200, body
        time.sleep(5)
        stop.set()
        for t in threads:
            t.join()
        new = {"osrm": duration("osrm", call(base + OSRM, h)[1]),
               "route": duration("route", call(base + "/route", h, BODY)[1])}
        assert new["osrm"] > old["osrm"] and new["route"] > old["route"]
        bad = [(k, s, b[:200]) for k, _, _, s, b in results if s != 200]
        assert not bad, bad
        after = [r for r in results if r[1] > switched]
        before = [r for r in results if r[2] < posted]
        assert len(after) >= 10 and len(before) >= 10, (len(before), len(after))
        for kind, sent, _recv, _s, body in results:
            d = duration(kind, body)
            assert d in (old[kind], new[kind]), (kind, d, old, new)  # never a mix
            if sent > switched:
                assert d == new[kind], (kind, sent - switched)
        for kind, _sent, _recv, _s, body in before:
            assert duration(kind, body) == old[kind]
        health = json.loads(call(base + "/health", h)[1])
        assert health["speeds"]["form"] == "way" and health["speeds"]["edges"] > 0
    finally:
        serving.stop(proc)
        log.close()
