"""The gateway's shared state in a real Redis (Debian's redis-server on loopback): keys, plans and exact
counters shared by replicas; 503 and never an uncounted request when Redis is lost; recovery by itself;
counters that survive a restart of a server. Ends with two `geoengine serve` processes sharing one Redis."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import subprocess
import sys
import threading
import time

import httpx
import pytest
from starlette.testclient import TestClient

from geoengine.config import Settings
from geoengine.errors import QuotaExceeded, Unavailable
from geoengine.gateway import Plan, Pool
from geoengine.gateway.store import RedisKeyStore, open_keystore
from geoengine.server.app import create_app
from tests.serving import free_port, start_serve, wait_up

from .redis_helpers import RedisServer

HOST = "maps.example.test"


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


def test_keys_round_trip_and_are_shared(redis_server):
    a = RedisKeyStore(redis_server.url)
    b = RedisKeyStore(redis_server.url)  # a second replica
    key, rec = a.create("free", "me", scopes=["admin"])
    got = b.authenticate(key)
    assert got is not None and got.id == rec.id and got.plan == "free" and got.scopes == ("admin",)
    assert b.authenticate(key[:-1] + ("A" if key[-1] != "A" else "B")) is None
    assert b.authenticate("gk_deadbeef_x") is None and b.authenticate(None) is None
    assert [r.id for r in b.list()] == [rec.id]
    b.revoke(rec.id)
    assert a.authenticate(key) is None
    assert a.list()[0].revoked is not None


def test_plans_are_published_by_the_replica_that_has_the_file(redis_server):
    team = {"team": Plan("team", (Pool("all", "day", 3),), "three a day")}
    RedisKeyStore(redis_server.url, team)
    other = RedisKeyStore(redis_server.url)  # no plans file: reads the shared plans
    assert other.plans == team
    key, rec = other.create("team")
    for _ in range(3):
        other.consume(rec, "/health")
    with pytest.raises(QuotaExceeded):
        other.consume(rec, "/tiles/x/0/0/0")


def test_counting_is_exact_under_threads_and_two_stores(redis_server):
    stores = [RedisKeyStore(redis_server.url), RedisKeyStore(redis_server.url)]
    key, rec = stores[0].create("free")  # 1,000 non-tile requests a day
    ok, refused = [], []
    lock = threading.Lock()

    def worker(i):
        store = stores[i % 2]
        for _ in range(150):
            try:
                store.consume(rec, "/search")
                with lock:
                    ok.append(1)
            except QuotaExceeded as exc:
                assert int(exc.headers["Retry-After"]) >= 1
                with lock:
                    refused.append(1)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ok) == 1000 and len(refused) == 200
    label = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    assert stores[1].usage(rec.id) == {f"non_tile/day@{label}": 1000}


def test_all_pools_or_nothing(redis_server):
    plans = {"p": Plan("p", (Pool("routing", "month", 2), Pool("all", "day", 5)))}
    store = RedisKeyStore(redis_server.url, plans)
    _, rec = store.create("p")
    store.consume(rec, "/route")
    store.consume(rec, "/route")
    with pytest.raises(QuotaExceeded) as err:
        store.consume(rec, "/route")
    assert "monthly pool of 2 routing" in err.value.detail
    # the refused request counted nowhere: the day pool has 2, so 3 more non-routing requests pass
    for _ in range(3):
        store.consume(rec, "/health")
    with pytest.raises(QuotaExceeded):
        store.consume(rec, "/health")


def test_lost_redis_is_503_and_recovers_by_itself(redis_server, andorra, tmp_path):
    settings = Settings(home=tmp_path, gateway_host=HOST, redis_url=redis_server.url)
    store = open_keystore(settings)
    assert isinstance(store, RedisKeyStore)
    key, rec = store.create("free")
    tile_key, _ = store.create("unlimited")
    client = TestClient(create_app(andorra, settings, store), raise_server_exceptions=False)
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    assert client.get("/health", headers=h).status_code == 200
    redis_server.kill()
    with pytest.raises(Unavailable):
        store.consume(rec, "/health")
    for path, hh in (("/health", h), ("/search?q=andorra", h),
                     ("/sources", {**h, "X-Gateway-Key": tile_key})):  # uncounted paths need the key check too
        resp = client.get(path, headers=hh)
        assert resp.status_code == 503, resp.text
        assert resp.headers["content-type"].startswith("application/problem+json")
        assert resp.headers["retry-after"] == "1"
        body = resp.json()
        assert body["status"] == 503 and "Redis" in body["detail"] and key not in resp.text
    redis_server.start()  # same port, same append-only file
    deadline = time.time() + 10
    while client.get("/health", headers=h).status_code != 200:
        assert time.time() < deadline, "the gateway did not recover after Redis came back"
        time.sleep(0.1)
    label = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    assert store.usage(rec.id)[f"non_tile/day@{label}"] == 2  # the one before and the one after


def test_a_recently_checked_key_keeps_uncounted_paths_while_redis_is_down(redis_server, andorra, tmp_path):
    """The decision for uncounted paths (tiles, /sources) with Redis lost: a key the in-process cache
    checked within GEOENGINE_GATEWAY_KEY_TTL_S keeps them (no counter is involved; a revocation already
    takes up to that TTL to reach a replica); a key it has not seen, and every counted path, get 503."""
    settings = Settings(home=tmp_path, gateway_host=HOST, redis_url=redis_server.url)
    store = open_keystore(settings)
    seen, _ = store.create("free")  # tiles uncounted, everything else in a daily pool
    unseen, _ = store.create("free")
    client = TestClient(create_app(andorra, settings, store), raise_server_exceptions=False)
    hs = {"X-Gateway-Key": seen, "X-Gateway-Host": HOST}
    assert client.get("/sources", headers=hs).status_code == 200
    redis_server.kill()
    assert client.get("/sources", headers=hs).status_code == 200
    assert client.get("/tiles/andorra/0/0/0", headers=hs).status_code in (200, 204)
    assert client.get("/health", headers=hs).status_code == 503  # counted: never let through uncounted
    assert client.get("/sources", headers={**hs, "X-Gateway-Key": unseen}).status_code == 503


def test_cli_keys_use_redis_when_set(redis_server, tmp_path):
    env = {**os.environ, "GEOENGINE_HOME": str(tmp_path), "GEOENGINE_REDIS_URL": redis_server.url}
    made = subprocess.run([sys.executable, "-m", "geoengine", "keys", "create", "--plan", "free"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip().splitlines()[-1]
    assert RedisKeyStore(redis_server.url).authenticate(key) is not None
    from geoengine.gateway import KeyStore

    assert KeyStore(tmp_path / "state.sqlite3").authenticate(key) is None  # not in the SQLite store


def test_publishable_keys_live_in_redis_and_share_their_quota(redis_server, andorra, tmp_path):
    """A pk_ key made through one replica's settings works on another replica (its own state file, the
    same Redis) and both count it in one pool; revoking it on one refuses it on both; a lost Redis is a
    503 for it, never an unchecked request."""
    from geoengine.gateway.store import RedisPublishableKeys, open_publishable

    origin = "https://maps.example.org"
    team = {"team": Plan("team", (Pool("all", "day", 3),), "three a day")}
    replicas = []
    for name in ("a", "b"):
        st = Settings(home=tmp_path / name, gateway_host=HOST, redis_url=redis_server.url, cors_origins=origin)
        store = RedisKeyStore(redis_server.url, team)
        replicas.append((st, store, TestClient(create_app(andorra, st, store), raise_server_exceptions=False)))
    pubs = [open_publishable(st, store) for st, store, _c in replicas]
    assert all(isinstance(p, RedisPublishableKeys) for p in pubs)
    key, rec = pubs[0].create("team", [origin], ["search"], "page")
    assert [p.id for p in pubs[1].list()] == [rec.id]
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST, "Origin": origin}
    codes = [replicas[i % 2][2].get("/search?q=andorra", headers=h).status_code for i in range(5)]
    assert codes == [200, 200, 200, 429, 429], codes  # one pool of 3 across both replicas
    label = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    assert replicas[1][1].usage(rec.usage_id) == {f"all/day@{label}": 3}
    assert replicas[0][2].get("/search?q=andorra", headers={**h, "Origin": "https://evil.example"}).status_code == 403
    pubs[1].revoke(key)
    assert replicas[0][2].get("/search?q=andorra", headers=h).status_code == 403
    key2, _ = pubs[1].create("team", [origin], ["tiles"])
    redis_server.kill()
    resp = replicas[0][2].get("/sources", headers={**h, "X-Gateway-Key": key2})
    assert resp.status_code == 503 and resp.headers["retry-after"] == "1", resp.text
    assert key2 not in resp.text


# -- two real servers, one Redis ---------------------------------------------------------------------
async def _fire(urls, headers, n, concurrency=64, on_progress=None):
    statuses: list[int] = []
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        async def one(i):
            async with sem:
                try:
                    r = await client.get(urls[i % len(urls)], headers=headers)
                except httpx.RemoteProtocolError:
                    # a kept-alive connection the server closed as idle (5 s) just as this request went out
                    # on it: the server never read the request, and a client sends it again on a new
                    # connection (as browsers and nginx do). The exact counts below still catch a request
                    # that was counted and not answered.
                    r = await client.get(urls[i % len(urls)], headers=headers)
                statuses.append(r.status_code)
                if r.status_code >= 400:
                    assert r.headers["content-type"].startswith("application/problem+json")
                if on_progress:
                    on_progress(len(statuses))

        await asyncio.gather(*(one(i) for i in range(n)))
    return statuses


@pytest.mark.e2e
def test_two_servers_share_one_redis(redis_server, build_region, tmp_path):
    bundle = build_region("andorra")
    env = {**os.environ, "GEOENGINE_HOME": str(tmp_path / "home"), "GEOENGINE_REDIS_URL": redis_server.url,
           "GEOENGINE_GATEWAY_HOST": HOST, "GEOENGINE_LOG_LEVEL": "warning"}
    store = RedisKeyStore(redis_server.url)
    key, rec = store.create("free", "two-servers")
    headers = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    ports = [free_port(), free_port()]
    logs = [tmp_path / f"serve{i}.log" for i in range(2)]
    procs = [start_serve(bundle, p, env, open(lp, "w")) for p, lp in zip(ports, logs, strict=True)]
    try:
        for p, proc, lp in zip(ports, procs, logs, strict=True):
            wait_up(p, proc, lp)
        urls = [f"http://127.0.0.1:{p}/health" for p in ports]

        # 2,000 concurrent requests across both servers from one free key (1,000 a day): exactly 1,000 pass
        statuses = asyncio.run(_fire(urls, headers, 2000))
        assert statuses.count(200) == 1000 and statuses.count(429) == 1000, {s: statuses.count(s) for s in set(statuses)}
        label = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
        assert store.usage(rec.id) == {f"non_tile/day@{label}": 1000}

        # counters survive a restart of either server: the restarted one still refuses the key
        procs[0].terminate()
        procs[0].wait(60)
        procs[0] = start_serve(bundle, ports[0], env, open(logs[0], "a"))
        wait_up(ports[0], procs[0], logs[0])
        r = httpx.get(urls[0], headers=headers, timeout=10)
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1

        # Redis killed mid-run: 503s, and no 200 that Redis did not count
        key2, rec2 = store.create("free", "redis-lost")
        h2 = {"X-Gateway-Key": key2, "X-Gateway-Host": HOST}
        killed = threading.Event()

        def progress(done):
            if done >= 150 and not killed.is_set():
                killed.set()
                redis_server.kill()

        statuses = asyncio.run(_fire(urls, h2, 600, concurrency=16, on_progress=progress))
        assert set(statuses) <= {200, 503}, {s: statuses.count(s) for s in set(statuses)}
        assert statuses.count(503) >= 400
        served = statuses.count(200)
        redis_server.start()  # the same append-only file
        counted = store.usage(rec2.id).get(f"non_tile/day@{label}", 0)
        assert served <= counted <= served + 16  # over-counting only by requests in flight at the kill
        # each server recovers by itself
        for url in urls:
            deadline = time.time() + 15
            while httpx.get(url, headers=h2, timeout=10).status_code != 200:
                assert time.time() < deadline, f"{url} did not recover"
                time.sleep(0.2)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
