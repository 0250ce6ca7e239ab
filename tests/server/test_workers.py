"""`geoengine serve --workers 2` on real Andorra tiles: a tile cache clear reaches both worker processes
before it answers (no worker serves bytes cached before it) and `cleared` counts the entries of both."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from geoengine.gateway import KeyStore
from geoengine.tiles.shared import MAX_SOURCES
from tests.serving import free_port, start_serve, stop, wait_up

pytestmark = pytest.mark.e2e
HOST = "workers.test"


def request(url, headers, method="GET"):
    """One request on a new connection (urllib never reuses one), so the kernel picks the worker."""
    req = urllib.request.Request(url, headers={**headers, "Accept-Encoding": "gzip"}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def slots(state_file, index):
    """(pid, generation seen, entries) of every claimed slot for source `index`, read from the state file."""
    from geoengine.tiles import shared

    w = np.fromfile(state_file, dtype=np.int64)
    pid = w[shared._PID:shared._SEEN]
    seen = w[shared._SEEN:shared._COUNT].reshape(shared.MAX_WORKERS, MAX_SOURCES)
    count = w[shared._COUNT:shared._WORDS].reshape(shared.MAX_WORKERS, MAX_SOURCES)
    gen = int(w[shared._GEN + index])
    return gen, [(int(pid[s]), int(seen[s, index]), int(count[s, index])) for s in np.flatnonzero(pid)]


def biggest_tile(mbtiles):
    import sqlite3

    db = sqlite3.connect(f"file:{mbtiles}?mode=ro", uri=True)
    z, x, row = db.execute("SELECT zoom_level, tile_column, tile_row FROM tiles WHERE zoom_level = 14 "
                           "ORDER BY length(tile_data) DESC LIMIT 1").fetchone()
    db.close()
    return z, x, (1 << z) - 1 - row


def test_cache_clear_reaches_every_worker(build_region, tmp_path):
    from pmtiles.convert import mbtiles_to_pmtiles

    bundle = build_region("andorra")
    extra = tmp_path / "extra"
    extra.mkdir()
    archive = extra / "andorra_pm.pmtiles"
    mbtiles_to_pmtiles(str(bundle / "tiles" / "andorra.mbtiles"), str(archive), 14)
    home = tmp_path / "home"
    key, _ = KeyStore(home / "state.sqlite3").create("unlimited", scopes=["admin"])  # cache clear needs admin
    env = {**os.environ, "GEOENGINE_HOME": str(home), "GEOENGINE_TILES_DIR": str(extra),
           "GEOENGINE_GATEWAY_HOST": HOST, "GEOENGINE_LOG_LEVEL": "warning"}
    env.pop("GEOENGINE_WORKERS", None)
    port = free_port()
    log = open(tmp_path / "serve.log", "w")
    proc = start_serve(bundle, port, env, log, "--workers", "2", exit_after=600)
    base = f"http://127.0.0.1:{port}"
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    state = home / "run" / f"serve-{proc.pid}.workers"
    try:
        wait_up(port, proc, tmp_path / "serve.log", path="/health", headers=h)
        ids = sorted(s["id"] for s in json.loads(request(base + "/sources", h)[1])["sources"])
        assert ids == ["andorra", "andorra_pm"]
        index = ids.index("andorra_pm")
        z, x, y = biggest_tile(bundle / "tiles" / "andorra.mbtiles")
        tile = base + f"/tiles/andorra_pm/{z}/{x}/{y}"
        status, old = request(tile, h)
        assert status == 200 and old[:2] == b"\x1f\x8b"
        # Warm the tile into both workers' caches: new connections until both slots hold it.
        deadline = time.time() + 120
        while True:
            _, held = slots(state, index)
            if len([s for s in held if s[2] == 1]) == 2:
                break
            assert time.time() < deadline, f"the second worker never got a request: {held}"
            assert request(tile, h) == (200, old)
        # Change the tile in the archive (in place, same length): the caches still hold the old bytes.
        raw = archive.read_bytes()
        at = raw.find(old)
        assert at > 0 and raw.find(old, at + 1) == -1
        new = old[:-12] + bytes(b ^ 0xFF for b in old[-12:])
        with open(archive, "r+b") as f:
            f.seek(at)
            f.write(new)
        for _ in range(10):
            assert request(tile, h) == (200, old), "a worker served the archive instead of its cache"
        # One clear, answered by one worker, drops the entries of both.
        status, body = request(base + "/tiles/andorra_pm/cache/clear", h, method="POST")
        assert status == 200, body
        assert json.loads(body) == {"cleared": 2, "source": "andorra_pm"}
        gen, held = slots(state, index)
        assert gen == 1 and len(held) == 2
        # New connections until both workers have answered since the clear (which worker accepts a
        # connection is the kernel's choice: a fixed number of requests may all reach one of them);
        # every answer is the new bytes.
        deadline = time.time() + 120
        while True:
            assert request(tile, h) == (200, new), "a worker served bytes cached before the clear"
            gen, held = slots(state, index)
            if all(seen == 1 for _, seen, _ in held):
                break
            assert time.time() < deadline, f"a worker never answered after the clear: {held}"
        # The other source was not touched.
        assert request(base + f"/tiles/andorra/{z}/{x}/{y}", h) == (200, old)
        status, body = request(base + "/tiles/nope/cache/clear", h, method="POST")
        assert status == 404 and json.loads(body)["status"] == 404
    finally:
        stop(proc)
        log.close()
    assert not state.exists(), "serve leaves no state file behind"
