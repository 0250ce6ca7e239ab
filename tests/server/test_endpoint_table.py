"""The endpoint table (geoengine.server.endpoints) walked against both ways in: every entry is a FastAPI
route too (so documented in /openapi.json), answers a plainly valid request the same through the fast
dispatch and through FastAPI alone, and is answered below ASGI exactly when the table says so; every
admission rule reaches the fast paths (the front door admits nothing that `Admission.quick` refuses,
and HotPath sits inside `AdmissionMiddleware`)."""

from __future__ import annotations

import asyncio
import json

from starlette.routing import Match
from starlette.testclient import TestClient

from geoengine.server import endpoints
from geoengine.server.admission import AdmissionMiddleware
from geoengine.server.app import create_app
from geoengine.server.dispatch import Middleware as HotPath
from tests.server.test_frontdoor import HOST, TILE, A, B, Conn, get, post

ROUTE = {"locations": [A, B], "costing": "auto", "directions_options": {"directions_type": "none"}}
# entry name -> a plainly valid request: (method, target, JSON body or None)
SAMPLES = {
    "GET|HEAD tile": ("GET", TILE, None),
    "GET /sources|TileJSON": ("GET", "/tiles/andorra", None),
    "GET /search|/reverse (Nominatim)": ("GET", "/reverse?lat=42.5063&lon=1.5218&format=jsonv2", None),
    "GET /search": ("GET", "/search?q=Andorra", None),
    "GET /search/reverse": ("GET", "/search/reverse?lat=42.5063&lon=1.5218", None),
    "GET /elevation": ("GET", "/elevation?lat=42.5063&lon=1.5218", None),
    "POST /elevation": ("POST", "/elevation", {"shape": [{"lat": 42.5063, "lon": 1.5218}, {"lat": 42.5345, "lon": 1.5803}]}),
    "GET /health": ("GET", "/health", None),
    "GET /route?json=": ("GET", "/route?json=" + json.dumps(ROUTE, separators=(",", ":")), None),
    "GET OSRM": ("GET", f"/route/v1/driving/{A['lon']},{A['lat']};{B['lon']},{B['lat']}?overview=false", None),
    "POST /route": ("POST", "/route", ROUTE),
    "POST /matrix": ("POST", "/matrix", {"sources": [A], "targets": [B], "costing": "auto"}),
}
VOLATILE = ("took_ms", "uptime", "uptime_s", "data_age_s")


def _plain(doc):
    if isinstance(doc, dict):
        return {k: _plain(v) for k, v in doc.items() if k not in VOLATILE}
    return [_plain(v) for v in doc] if isinstance(doc, list) else doc


def _fastapi_route(app, method: str, path: str):
    scope = {"type": "http", "method": method, "path": path, "root_path": "", "query_string": b"", "headers": []}
    for route in app.router.routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return route
    return None


def _hit(app, key, method, target, body):
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    client = TestClient(app, raise_server_exceptions=False)
    return client.request(method, target, headers=h, json=body)


def test_every_entry_has_a_sample_and_a_fastapi_route(served):
    app, _, _ = served
    assert set(SAMPLES) == {ep.name for ep in endpoints.ENDPOINTS}, "a table entry without a sample request"
    for ep in endpoints.ENDPOINTS:
        method, target, _ = SAMPLES[ep.name]
        path = target.split("?")[0]
        assert [e for e, _ in endpoints.candidates(method, path)][0] is ep or ep.name.startswith("GET /search"), ep
        assert _fastapi_route(app, method, path) is not None, f"{ep.name}: no FastAPI route for {method} {path}"
    documented = app.openapi()["paths"]
    for ep in endpoints.ENDPOINTS:
        if "{service}" not in ep.path:
            assert ep.path in documented, ep.path


def test_each_entry_answers_as_fastapi_alone_and_below_asgi_as_declared(served):
    app, store, _ = served
    key, _ = store.create("unlimited")
    plain = create_app(app.state.engine, app.state.settings, store)
    plain.user_middleware = [m for m in plain.user_middleware if m.cls is not HotPath]
    door = app.state.front_door

    async def through_protocol():
        conn = Conn(app, asyncio.get_running_loop())
        await conn.exchange(get("/health", key), 1)  # the key in the cache
        out = {}
        for name, (method, target, body) in SAMPLES.items():
            before = door.answered
            raw = get(target, key) if method == "GET" else post(target, key, body)
            (r,) = await conn.exchange(raw, 1)
            out[name] = (r, door.answered == before + 1)
        conn.proto.connection_lost(None)
        return out

    below = asyncio.run(through_protocol())
    for ep in endpoints.ENDPOINTS:
        method, target, body = SAMPLES[ep.name]
        fast, ref = _hit(app, key, method, target, body), _hit(plain, key, method, target, body)
        assert fast.status_code == ref.status_code == 200, (ep.name, fast.status_code, ref.status_code)
        if "json" in ref.headers["content-type"]:
            assert _plain(fast.json()) == _plain(ref.json()), ep.name
        else:
            assert fast.content == ref.content, ep.name
        r, answered = below[ep.name]
        assert r["status"] == 200, ep.name
        assert answered == ep.below_asgi, ep.name  # every sample is inline; below ASGI iff the table says


def test_admission_rules_reach_both_fast_paths(served, monkeypatch):
    app, store, client = served
    key, _ = store.create("unlimited")
    # HotPath sits inside admission: a request admission refuses never reaches the table's dispatch
    classes = [m.cls for m in app.user_middleware]
    assert classes.index(AdmissionMiddleware) < classes.index(HotPath)
    for name, (method, target, body) in SAMPLES.items():
        r = client.request(method, target, headers={"X-Gateway-Host": HOST}, json=body)
        assert r.status_code in (401, 403), name  # no key: the gateway's refusal on every entry
    # below ASGI, only what Admission.quick admits: with it refusing, nothing is answered there
    monkeypatch.setattr(app.state.admission, "quick", lambda *a, **k: None)
    door = app.state.front_door

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        for _name, (method, target, body) in SAMPLES.items():
            raw = get(target, key) if method == "GET" else post(target, key, body)
            (r,) = await conn.exchange(raw, 1)
            assert r["status"] == 200
        conn.proto.connection_lost(None)

    before = door.answered
    asyncio.run(main())
    assert door.answered == before
