"""Faults and reloads: a bundle file removed or changed after start makes its endpoint group answer 503
while the others keep working; a newly published bundle is reloaded on SIGHUP with no failed request
under load; SIGTERM lets in-flight requests finish."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time

import httpx
import pytest
from starlette.testclient import TestClient

import geoengine
from geoengine.config import Settings
from geoengine.gateway import KeyStore
from geoengine.server.app import create_app
from tests.serving import free_port, start_serve, wait_up

HOST = "maps.example.test"
A = {"lon": 1.5218, "lat": 42.5063}
B = {"lon": 1.5333, "lat": 42.5107}


def linked_copy(src, dst):
    """A copy of a bundle made of hard links: removing or replacing a file in it leaves the original."""
    shutil.copytree(os.path.realpath(src), dst, copy_function=os.link)
    return dst


@pytest.fixture
def damaged_env(build_region, tmp_path):
    bundle = linked_copy(build_region("andorra"), tmp_path / "bundle")
    settings = Settings(home=tmp_path, gateway_host=HOST)
    engine = geoengine.open(bundle, settings=settings)
    engine.warm()
    store = KeyStore(settings.state)
    key, _ = store.create("unlimited")
    app = create_app(engine, settings, store)
    client = TestClient(app, raise_server_exceptions=False)
    client.headers.update({"X-Gateway-Key": key, "X-Gateway-Host": HOST})
    return bundle, app, client


def _calls(client):
    return {
        "routing": client.post("/route", json={"locations": [A, B]}).status_code,
        "search": client.get("/search", params={"q": "andorra"}).status_code,
        "elevation": client.get("/elevation", params={"lat": 42.5063, "lon": 1.5218}).status_code,
        "tiles": client.get("/tiles/andorra/10/516/374").status_code,
        "health": client.get("/health").status_code,
    }


def test_removed_or_changed_files_make_only_their_group_503(damaged_env):
    bundle, app, client = damaged_env
    watch = app.state.bundle_watch
    assert watch.check() == {}
    before = _calls(client)
    assert before["routing"] == 200 and before["search"] == 200 and before["elevation"] == 200
    assert before["tiles"] in (200, 204) and before["health"] == 200

    victim = next(p for p in sorted((bundle / "search").rglob("*")) if p.is_file())
    victim.unlink()
    assert "search" in watch.check()
    after = _calls(client)
    assert after["search"] == 503
    assert {k: v for k, v in after.items() if k != "search"} == {k: v for k, v in before.items() if k != "search"}
    resp = client.get("/search", params={"q": "andorra"})
    body = resp.json()
    assert resp.headers["content-type"].startswith("application/problem+json") and body["status"] == 503
    assert "search" in body["detail"] and "removed" in body["detail"]

    # a file overwritten in place (corruption): the elevation group goes too, routing still answers
    dem = next(p for p in sorted((bundle / "elevation").rglob("*.npy")))
    data = dem.read_bytes()
    dem.unlink()  # a new inode, so the original bundle behind the hard link is untouched
    dem.write_bytes(data[: len(data) // 2])
    assert set(watch.check()) >= {"search", "elevation"}
    after = _calls(client)
    assert after["elevation"] == 503 and after["search"] == 503 and after["routing"] == 200
    assert after["health"] == 200


@pytest.mark.e2e
def test_sighup_reloads_a_new_publication_without_a_failed_request_and_sigterm_drains(build_region, tmp_path):
    from geoengine.bundler.pipeline import publish

    source = build_region("andorra")
    out = tmp_path / "bundles" / "andorra"
    out.parent.mkdir()
    publish(linked_copy(source, tmp_path / "v1"), out)
    home = tmp_path / "home"
    env = {**os.environ, "GEOENGINE_HOME": str(home), "GEOENGINE_GATEWAY_HOST": HOST, "GEOENGINE_LOG_LEVEL": "info"}
    env.pop("GEOENGINE_REDIS_URL", None)
    key, _ = KeyStore(home / "state.sqlite3").create("unlimited")
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    port = free_port()
    logpath = tmp_path / "serve.log"
    proc = start_serve(out, port, env, open(logpath, "w"))
    try:
        wait_up(port, proc, logpath)
        base = f"http://127.0.0.1:{port}"
        up0 = httpx.get(base + "/health", headers=h, timeout=10).json()["uptime_s"]
        statuses: list[tuple[str, int]] = []
        stop = threading.Event()

        def load(i):
            with httpx.Client(base_url=base, headers=h, timeout=60) as c:
                while not stop.is_set():
                    for name, call in (("route", lambda: c.post("/route", json={"locations": [A, B]})),
                                       ("search", lambda: c.get("/search", params={"q": "andorra"})),
                                       ("elevation", lambda: c.get("/elevation", params={"lat": 42.5, "lon": 1.52})),
                                       ("tile", lambda: c.get(f"/tiles/andorra/12/{2065 + i}/1495"))):
                        try:
                            statuses.append((name, call().status_code))
                        except httpx.HTTPError as exc:
                            statuses.append((name, repr(exc)))

        threads = [threading.Thread(target=load, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        time.sleep(2)
        publish(linked_copy(source, tmp_path / "v2"), out)  # the old version folder is removed
        hup_at = time.monotonic()
        proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 120
        while time.time() < deadline:
            time.sleep(1)
            if "reloaded bundle" in logpath.read_text():
                break
        time.sleep(2)
        stop.set()
        for t in threads:
            t.join(60)
        assert "reloaded bundle" in logpath.read_text(), logpath.read_text()[-3000:]
        bad = [s for s in statuses if s[1] not in (200, 204)]
        assert len(statuses) > 20 and not bad, bad[:10]
        up1 = httpx.get(base + "/health", headers=h, timeout=10).json()["uptime_s"]
        since_hup = time.monotonic() - hup_at
        # a new engine, opened after the SIGHUP, serves now: its uptime is shorter than the time since the signal
        # (the old engine's would be longer: it was already up for up0 seconds before the load started); the
        # uptime is rounded to the millisecond, and a reload can follow the signal within one
        assert up1 < since_hup + 0.001 < up0 + since_hup, (up0, up1, since_hup)
        assert proc.poll() is None

        # SIGTERM while requests are in flight: they finish with 200, then the server exits
        results: list = []

        def slow(i):
            good = [(1.5218, 42.5063), (1.5333, 42.5107), (1.5485, 42.5123), (1.6437, 42.5762), (1.5197, 42.5445),
                    (1.4913, 42.4637), (1.5803, 42.5345), (1.7333, 42.5426), (1.5660, 42.5100), (1.5100, 42.4990)]
            many = [{"lon": lo, "lat": la} for lo, la in good] * 6  # 60 x 60, all on the car network
            try:
                r = httpx.post(base + "/matrix", json={"sources": many, "targets": many}, headers=h, timeout=120)
                results.append(r.status_code)
            except httpx.HTTPError as exc:
                results.append(repr(exc))

        inflight = [threading.Thread(target=slow, args=(i,)) for i in range(3)]
        for t in inflight:
            t.start()
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        for t in inflight:
            t.join(120)
        assert results == [200, 200, 200], results
        # uvicorn drains, then re-raises the captured SIGTERM: a clean exit is 0 or -SIGTERM
        assert proc.wait(60) in (0, -signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def test_reload_lets_the_collector_see_the_old_engine_again(andorra, tmp_path):
    """A worker freezes its warmed engine out of the collector (freeze_long_lived); a reload unfreezes,
    so an old engine caught in reference cycles is collected instead of kept for the worker's life."""
    import gc
    from types import SimpleNamespace

    from geoengine.server.lifecycle import Reloader, freeze_long_lived

    app = SimpleNamespace(state=SimpleNamespace(engine=andorra))
    reloader = Reloader(app, andorra.bundle.path)
    freeze_long_lived()
    try:
        assert gc.get_freeze_count() > 0
        assert reloader.reload()
        assert app.state.engine is not andorra and gc.get_freeze_count() == 0
        assert reloader.refreeze is not None and reloader.refreeze.is_alive()  # freezes the new one later
    finally:
        if reloader.refreeze is not None:
            reloader.refreeze.cancel()
        gc.unfreeze()
