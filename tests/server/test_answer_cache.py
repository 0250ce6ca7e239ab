"""The search answer cache (geoengine.server.answers): a repeated plainly valid GET /search or
/search/reverse is answered with the bytes the engine's answer had, through the front door and the
hot path alike; every gateway rule still holds for a cached answer (key, host, revocation, exact
quotas); a new engine (bundle reload) never gets an old engine's answer; the cache stays within its
budget. Also GET /health below the application. Real Andorra and Liechtenstein engines."""

from __future__ import annotations

import asyncio
import gc
import json
import time

import pytest
from starlette.testclient import TestClient

from geoengine.config import Settings
from geoengine.gateway import KeyStore, load_plans
from geoengine.server.answers import AnswerCache
from geoengine.server.app import create_app
from tests.server.test_frontdoor import HOST, Conn, get

QUERIES = ["/search?q=Encamp&size=5", "/search?q=Enc", "/search?q=andorra%20la&size=3",
           "/search?q=carrer&lat=42.51&lon=1.54", "/search?q=Escaldes&types=place",
           "/search/reverse?lat=42.5063&lon=1.5218", "/search/reverse?lat=42.5063&lon=1.5218&size=3&radius=500m"]


def _app(tmp_path, engine, **kw):
    settings = Settings(home=tmp_path, gateway_host=HOST, gateway_key_ttl_s=60, **kw)
    store = KeyStore(settings.state, load_plans(None))
    app = create_app(engine, settings)
    return app, store, TestClient(app, raise_server_exceptions=False)


def _results(body: bytes) -> dict:
    doc = json.loads(body)
    doc.pop("took_ms", None)  # the one number that may differ between two computations
    return doc


def test_repeated_queries_get_the_engines_answer_again(tmp_path, andorra):
    app, store, client = _app(tmp_path / "on", andorra)
    _, off_store, off = _app(tmp_path / "off", andorra, search_cache_bytes=0)
    key, _ = store.create("unlimited")
    off_key, _ = off_store.create("unlimited")
    cache = app.state.answers
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    reference = {}
    for path in QUERIES:
        r = off.get(path, headers={"X-Gateway-Key": off_key, "X-Gateway-Host": HOST})
        assert r.status_code == 200, path
        reference[path] = r
    assert len(off.app.state.answers) == 0  # budget 0: nothing kept

    # the hot path (ASGI): first computed, then the same bytes from the cache
    for path in QUERIES:
        first = client.get(path, headers=h)
        hits = cache.hits
        again = client.get(path, headers=h)
        assert cache.hits == hits + 1, path
        assert again.content == first.content and again.headers["content-type"] == "application/json"
        assert again.headers["content-length"] == str(len(first.content))
        assert _results(first.content) == _results(reference[path].content), path
    assert len(cache) == len(QUERIES)

    # the front door: the answers the hot path kept, below ASGI
    door = app.state.front_door

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        for path in QUERIES:
            hits, answered = cache.hits, door.answered
            (r,) = await conn.exchange(get(path, key), 1)
            assert r["status"] == 200 and door.answered == answered + 1 and cache.hits == hits + 1, path
            assert r["body"] == client.get(path, headers=h).content
        # a new query through the front door is computed there and kept
        (r,) = await conn.exchange(get("/search?q=Ordino&size=2", key), 1)
        assert _results(r["body"]) == _results(off.get("/search?q=Ordino&size=2", headers={
            "X-Gateway-Key": off_key, "X-Gateway-Host": HOST}).content)
        hits = cache.hits
        (again,) = await conn.exchange(get("/search?q=Ordino&size=2", key), 1)
        assert again["body"] == r["body"] and cache.hits == hits + 1
        conn.proto.connection_lost(None)

    asyncio.run(main())


def test_errors_and_other_queries_are_not_kept(tmp_path, andorra):
    app, store, client = _app(tmp_path, andorra)
    key, _ = store.create("unlimited")
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    for path in ("/search?q=a", "/search?q=xx&size=99", "/search/reverse?lat=420&lon=1.5", "/search?q=Encamp&lat=42.5"):
        r = client.get(path, headers=h)
        assert r.status_code in (400, 422) and r.headers["content-type"] == "application/problem+json", path
        assert client.get(path, headers=h).json() == r.json()
    # a repeated parameter is the FastAPI route's to read: answered there, never kept
    assert client.get("/search?q=Enc&q=Ordino", headers=h).json()["query"] == "Ordino"
    assert len(app.state.answers) == 0
    # a different query string is a different entry, even when it means the same
    a = client.get("/search?q=Encamp&size=5", headers=h)
    b = client.get("/search?size=5&q=Encamp", headers=h)
    assert _results(a.content) == _results(b.content) and len(app.state.answers) == 2


def test_cached_answers_still_need_a_valid_key_and_host(tmp_path, andorra):
    app, store, client = _app(tmp_path, andorra)
    key, rec = store.create("unlimited")
    path = "/search?q=Encamp&size=5"
    assert client.get(path, headers={"X-Gateway-Key": key, "X-Gateway-Host": HOST}).status_code == 200
    assert len(app.state.answers) == 1
    door = app.state.front_door

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        (r,) = await conn.exchange(get(path, key), 1)
        assert r["status"] == 200
        for raw in (get(path, key, host="evil.example"), get(path, "gk_not_a_key"),
                    f"GET {path} HTTP/1.1\r\nHost: x\r\nX-Gateway-Host: {HOST}\r\n\r\n".encode()):
            (r,) = await conn.exchange(raw, 1)
            assert r["status"] == 403 and r["headers"]["content-type"] == "application/problem+json"
            assert b"results" not in r["body"]
        # revoked elsewhere: refused within the key cache's lifetime, cached answer or not
        door.keystore.ttl_s = 0.5
        door.keystore.forget()
        (r,) = await conn.exchange(get(path, key), 1)
        assert r["status"] == 200
        # the key was read from the store before t0, so its cache entry is gone by t0 + ttl: a request
        # that starts after that must be refused, however slow the machine (a 200 is only allowed to a
        # request that started within the lifetime)
        t0 = time.monotonic()
        KeyStore(app.state.settings.state, load_plans(None)).revoke(rec.id)
        while True:
            started = time.monotonic()
            (r,) = await conn.exchange(get(path, key), 1)
            if r["status"] == 403:
                break
            assert r["status"] == 200
            assert started - t0 < door.keystore.ttl_s, "a revoked key kept getting cached answers"
            await asyncio.sleep(0.02)
        conn.proto.connection_lost(None)

    asyncio.run(main())
    assert client.get(path, headers={"X-Gateway-Key": key, "X-Gateway-Host": HOST}).status_code == 403


def test_quotas_count_cached_answers_exactly(tmp_path, andorra):
    plans_file = tmp_path / "plans.toml"
    plans_file.write_text('[plans.trial]\npools = [{scope = "non_tile", period = "day", limit = 3}]\n')
    settings = Settings(home=tmp_path, gateway_host=HOST, gateway_key_ttl_s=60, plans_file=plans_file)
    store = KeyStore(settings.state, load_plans(settings.plans_file))
    app = create_app(andorra, settings)
    client = TestClient(app, raise_server_exceptions=False)
    key, rec = store.create("trial")
    path = "/search?q=Encamp&size=5"

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        statuses = [(await conn.exchange(get(path, key), 1))[0]["status"] for _ in range(5)]
        conn.proto.connection_lost(None)
        return statuses

    statuses = asyncio.run(main())
    assert statuses == [200, 200, 200, 429, 429]
    assert app.state.answers.hits == 2  # the second and third were the cache's, and were counted
    assert sum(store.usage(rec.id).values()) == 3
    assert client.get(path, headers={"X-Gateway-Key": key, "X-Gateway-Host": HOST}).status_code == 429


def test_a_new_engine_never_gets_the_old_engines_answers(tmp_path, andorra, liechtenstein):
    app, store, client = _app(tmp_path, andorra)
    key, _ = store.create("unlimited")
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    path = "/search?q=Vaduz&size=3"
    before = client.get(path, headers=h)
    assert client.get(path, headers=h).content == before.content and app.state.answers.hits == 1
    app.state.engine = liechtenstein  # what a bundle reload does (server/lifecycle.py)
    after = client.get(path, headers=h)
    assert after.status_code == 200 and app.state.answers.hits == 1
    top = after.json()["results"][0]
    assert top["name"] == "Vaduz" and top["id"].startswith("osm:") and abs(top["location"]["lat"] - 47.14) < 0.05
    assert _results(after.content) != _results(before.content)
    assert len(app.state.answers) == 1


def test_budget_is_kept_least_recently_used_first_out():
    class Eng:
        pass

    eng = Eng()
    body = b"x" * 800
    cache = AnswerCache(16 * 1024)
    per = len(body) + len("/search") + 6 + 200
    for i in range(100):
        cache.put(eng, "/search", f"q={i:04d}".encode(), body)
        if i == 5:
            assert cache.get(eng, "/search", b"q=0000") == body  # used: moves to the back
        assert cache.nbytes <= cache.budget
    assert len(cache) == cache.budget // per
    assert cache.get(eng, "/search", b"q=0099") == body
    assert cache.get(eng, "/search", b"q=0001") is None
    cache.put(eng, "/search", b"q=big", b"y" * 1024)  # more than a sixteenth of the budget: not kept
    assert cache.get(eng, "/search", b"q=big") is None
    # another engine: the first one's answers are gone, and the cache does not keep an engine alive
    other = Eng()
    assert cache.get(other, "/search", b"q=0099") is None and len(cache) == 0
    cache.put(other, "/search", b"q=1", body)
    del other
    gc.collect()
    assert cache.get(Eng(), "/search", b"q=1") is None
    off = AnswerCache(0)
    off.put(eng, "/search", b"q=1", body)
    assert off.get(eng, "/search", b"q=1") is None and len(off) == 0


@pytest.mark.parametrize("front_door", [True, False])
def test_health_below_the_application(tmp_path, andorra, front_door):
    app, store, client = _app(tmp_path, andorra)
    key, _ = store.create("unlimited")
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    ref = client.get("/health?via=app", headers=h)  # a query string: the FastAPI route answers
    assert ref.status_code == 200
    assert client.get("/health").status_code == 403  # the gateway still guards it
    if front_door:
        async def main():
            conn = Conn(app, asyncio.get_running_loop())
            (r,) = await conn.exchange(get("/health", key), 1)
            conn.proto.connection_lost(None)
            return r

        r = asyncio.run(main())
        assert app.state.front_door.answered == 1
        status, ctype, doc = r["status"], r["headers"]["content-type"], json.loads(r["body"])
    else:
        r = client.get("/health", headers=h)
        status, ctype, doc = r.status_code, r.headers["content-type"], r.json()
    assert status == 200 and ctype == "application/json"
    want = ref.json()
    assert list(doc) == list(want)
    assert doc["uptime_s"] >= want["uptime_s"]
    for k in ("status", "version", "region", "stages"):
        assert doc[k] == want[k]
    assert want["region"] == "andorra" and "search" in want["stages"]
    # what the FastAPI route documents: the model's fields, whatever path answered
    spec = client.get("/openapi.json", headers=h).json()
    assert set(spec["components"]["schemas"]["Health"]["properties"]) == set(doc)
