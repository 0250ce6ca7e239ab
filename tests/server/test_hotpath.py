"""The hot path (geoengine/server/hotpath.py) answers exactly as the FastAPI routes do: the same
documents for valid requests on real Andorra data, the same problem bodies for bad ones (which it hands
to FastAPI), the same domain errors; and the gateway still guards and counts what it answers."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from geoengine.config import Settings
from geoengine.gateway import KeyStore
from geoengine.server.app import create_app
from geoengine.server.dispatch import Middleware as HotPath

HOST = "hot.example.test"


@pytest.fixture(scope="module")
def clients(andorra, tmp_path_factory):
    home = tmp_path_factory.mktemp("hot")
    settings = Settings(home=home, gateway_host=HOST)
    store = KeyStore(settings.state)
    key, _ = store.create("unlimited")
    hot = create_app(andorra, settings, store)
    plain = create_app(andorra, settings, store)
    plain.user_middleware = [m for m in plain.user_middleware if m.cls is not HotPath]
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    out = []
    for app in (hot, plain):
        c = TestClient(app, raise_server_exceptions=False)
        c.headers.update(h)
        out.append(c)
    return out[0], out[1], store


A = {"lon": 1.5218, "lat": 42.5063}
B = {"lon": 1.5333, "lat": 42.5107}
C = {"lon": 1.59034, "lat": 42.55450}

ROUTE_BODIES = [
    {"locations": [A, B]},
    {"locations": [A, B], "costing": "pedestrian", "directions_options": {"directions_type": "none"}},
    {"locations": [B, C], "shape_format": "geojson", "id": "x1", "directions_options": {"language": "fr-FR"}},
    {"locations": [A, B, C], "costing": "bicycle"},  # three locations: the thread pool
    {"locations": [A, C], "alternates": 2},
    {"locations": [A, B], "costing_options": {"auto": {"use_highways": 0.2}}, "elevation_interval": 30},
]

BAD_ROUTE_BODIES = [
    b"",
    b"{",
    b"[]",
    b'{"locations": [{"lon": 1.5, "lat": 42.5}]}',
    b'{"locations": [{"lon": 1.5, "lat": 142.5}, {"lon": 1.5, "lat": 42.5}]}',
    b'{"locations": [{"lon": 1.5218, "lat": 42.5063}, {"lon": 1.5333, "lat": 42.5107}], "costing": "jetpack"}',
    b'{"locations": [{"lon": 1.5218, "lat": 42.5063}, {"lon": 1.5333, "lat": 42.5107}], "alternates": 9}',
    b'{"locations": [{"lon": "x", "lat": 42.5063}, {"lon": 1.5333, "lat": 42.5107}]}',
    b'{"locations": [{"lon": NaN, "lat": 42.5063}, {"lon": 1.5333, "lat": 42.5107}]}',
]


def test_route_documents_are_the_same(clients):
    hot, plain, _ = clients
    ok = 0
    for body in ROUTE_BODIES:
        a, b = hot.post("/route", json=body), plain.post("/route", json=body)
        assert a.status_code == b.status_code, (body, a.text, b.text)
        assert a.json() == b.json(), body
        if a.status_code == 200:
            assert a.headers["content-type"] == "application/json"
            assert a.json()["trip"]["summary"]["length"] > 0
            ok += 1
    assert ok >= len(ROUTE_BODIES) - 1


def test_bad_route_bodies_get_the_same_problems(clients):
    hot, plain, _ = clients
    for raw in BAD_ROUTE_BODIES:
        a = hot.post("/route", content=raw, headers={"content-type": "application/json"})
        b = plain.post("/route", content=raw, headers={"content-type": "application/json"})
        assert a.status_code == b.status_code and a.status_code in (400, 422), (raw, a.text)
        assert a.headers["content-type"].startswith("application/problem+json")
        assert a.json() == b.json(), raw


def test_domain_errors_use_the_problem_body(clients):
    hot, plain, _ = clients
    far = {"locations": [A, {"lon": 2.35, "lat": 48.85}]}  # Paris is not in the Andorra bundle
    a, b = hot.post("/route", json=far), plain.post("/route", json=far)
    assert a.status_code == b.status_code == 422 and a.json() == b.json()
    assert a.headers["content-type"].startswith("application/problem+json")
    a = hot.get("/elevation?lat=10.5&lon=10.5")
    b = plain.get("/elevation?lat=10.5&lon=10.5")
    assert a.status_code == b.status_code == 422 and a.json() == b.json()


@pytest.mark.parametrize("path", [
    "/elevation?lat=42.5063&lon=1.5218", "/elevation?lat=42.5&lon=1.6", "/elevation?lat=91&lon=1.5",
    "/elevation?lat=42.5", "/elevation?lat=abc&lon=1.5", "/elevation?lat=42.5063&lon=1.5218&lat=1",
    "/search/reverse?lat=42.5063&lon=1.5218", "/search/reverse?lat=42.5063&lon=1.5218&size=3&radius=500m",
    "/search/reverse?lat=420&lon=1.5", "/search?q=xx&size=99", "/search?q=a",
])
def test_get_answers_are_the_same(clients, path):
    hot, plain, _ = clients
    a, b = hot.get(path), plain.get(path)
    assert a.status_code == b.status_code, (path, a.text, b.text)
    ja, jb = a.json(), b.json()
    ja.pop("took_ms", None), jb.pop("took_ms", None)
    assert ja == jb, path


def test_search_answers_are_the_same(clients):
    hot, plain, _ = clients
    for q in ("andorra la vella", "encamp", "carrer de", "pic de"):
        a, b = hot.get("/search", params={"q": q, "size": 5}), plain.get("/search", params={"q": q, "size": 5})
        assert a.status_code == b.status_code == 200
        ja, jb = a.json(), b.json()
        ja.pop("took_ms"), jb.pop("took_ms")
        assert ja == jb and ja["results"], q


def test_gateway_guards_and_counts_hot_requests(clients, andorra, tmp_path):
    settings = Settings(home=tmp_path, gateway_host=HOST)
    store = KeyStore(settings.state)
    key, rec = store.create("starter")  # 500 routing requests a month
    c = TestClient(create_app(andorra, settings, store), raise_server_exceptions=False)
    for path in ("/elevation?lat=42.5&lon=1.5", "/search?q=encamp"):
        assert c.get(path, headers={"X-Gateway-Host": HOST}).status_code == 403
    assert c.post("/route", json=ROUTE_BODIES[0], headers={"X-Gateway-Key": "gk_00000000_x",
                                                           "X-Gateway-Host": HOST}).status_code == 403
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    for _ in range(3):
        assert c.post("/route", json=ROUTE_BODIES[0], headers=h).status_code == 200
    assert c.post("/route", content=b"{", headers={**h, "content-type": "application/json"}).status_code == 400
    assert sum(store.usage(rec.id).values()) == 4  # the 400 counts too, as documented


def test_matrix_documents_and_problems_are_the_same(clients):
    hot, plain, _ = clients
    pts = [A, B, C, {"lon": 1.55489, "lat": 42.51822}]
    for body in ({"sources": pts, "targets": pts},
                 {"sources": pts[:2], "targets": pts, "costing": "pedestrian", "units": "miles", "id": "m"}):
        a, b = hot.post("/matrix", json=body), plain.post("/matrix", json=body)
        assert a.status_code == b.status_code == 200, a.text
        assert a.json() == b.json()
        cells = [c for row in a.json()["sources_to_targets"] for c in row]
        assert len(cells) == len(body["sources"]) * len(body["targets"]) and any(c["time"] for c in cells)
    for raw in (b"{", b'{"sources": [], "targets": []}', b'{"sources": [{"lon": 1}], "targets": [{"lon": 1, "lat": 2}]}',
                b'{"sources": [{"lon": 1.52, "lat": 42.5}], "targets": [{"lon": 1.52, "lat": 42.5}], "costing": "bus"}'):
        a = hot.post("/matrix", content=raw, headers={"content-type": "application/json"})
        b = plain.post("/matrix", content=raw, headers={"content-type": "application/json"})
        assert a.status_code == b.status_code and a.status_code >= 400 and a.json() == b.json(), raw


def _hot_and_plain(andorra, home, **kw):
    settings = Settings(home=home, gateway_host=HOST, **kw)
    store = KeyStore(settings.state)
    key, _ = store.create("unlimited")
    hot = create_app(andorra, settings, store)
    plain = create_app(andorra, settings, store)
    plain.user_middleware = [m for m in plain.user_middleware if m.cls is not HotPath]
    out = []
    for app in (hot, plain):
        c = TestClient(app, raise_server_exceptions=False)
        c.headers.update({"X-Gateway-Key": key, "X-Gateway-Host": HOST})
        out.append(c)
    return out


@pytest.mark.parametrize("setting", [{}, {"public_url": "https://maps.example.org/geo/"},
                                     {"forwarded_allow_ips": "testclient"}])
def test_sources_and_tilejson_are_the_routes_documents(andorra, tmp_path, setting):
    """GET /sources and the TileJSON, whose URLs come from the request (Host, trusted forwarded
    headers, the public URL setting): the hot path's documents are the FastAPI routes'."""
    hot, plain = _hot_and_plain(andorra, tmp_path, **setting)
    headers = [{}, {"Host": "tiles.example.net:8443"},
               {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "edge.example.com", "X-Forwarded-Prefix": "/maps"}]
    for path in ("/sources", "/tiles/andorra", "/tiles/no-such-source", "/tiles/andorra?x=1"):
        for h in headers:
            a, b = hot.get(path, headers=h), plain.get(path, headers=h)
            assert (a.status_code, a.headers["content-type"], a.json()) == \
                (b.status_code, b.headers["content-type"], b.json()), (path, h)
    doc = hot.get("/tiles/andorra", headers=headers[2]).json()
    want = {"public_url": "https://maps.example.org/geo", "forwarded_allow_ips": "https://edge.example.com/maps"}
    base = want.get(next(iter(setting), ""), "http://testserver")
    assert doc["tiles"][0].startswith(f"{base}/tiles/andorra/") and doc["vector_layers"]
    assert hot.get("/tiles/no-such-source").status_code == 404
    assert [s["id"] for s in hot.get("/sources").json()["sources"]] == ["andorra"]
