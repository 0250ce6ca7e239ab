"""Issue 17 regressions over in-process HTTP on the Andorra bundle: requests that once answered 500
(date_time overflow, waiting_secs, NaN in avoid_polygons), and the trust boundaries (forwarded headers
only from trusted proxies, the admin scope for clearing a tile cache, case-insensitive host names)."""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from geoengine.config import Settings
from geoengine.gateway import KeyStore
from geoengine.server.app import create_app

PROBLEM_KEYS = {"type", "title", "status", "detail"}
# Andorra la Vella, two points on the car network (README's example)
A = {"lon": 1.5218, "lat": 42.5063}
B = {"lon": 1.5333, "lat": 42.5107}
HOST = "maps.example.test"


def problem(resp, status):
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    body = resp.json()
    assert PROBLEM_KEYS <= set(body) and body["status"] == status
    assert "Traceback" not in resp.text
    return body


def fields(body):
    return [e["field"] for e in body.get("errors", [])]


@pytest.fixture(scope="module")
def client(api_client, andorra):
    andorra.warm()  # compile / load the kernels outside the request timeout
    andorra.route(locations=[A, B])
    andorra.matrix([[A["lon"], A["lat"]]], [[B["lon"], B["lat"]]])
    return api_client(andorra)


def _raw(client, path, text):
    """POST a body as text, so it can carry NaN / Infinity / huge integers as a hostile client would."""
    return client.post(path, content=text.encode(), headers={"Content-Type": "application/json"})


# -- the five 500s -----------------------------------------------------------------------------------
@pytest.mark.parametrize("date_time", [{"type": 1, "value": "9999-12-31T23:59"},
                                       {"type": 2, "value": "0001-01-01T00:00"}])
def test_route_date_time_at_the_ends_of_the_calendar_is_400(client, date_time):
    body = problem(client.post("/route", json={"locations": [A, B], "date_time": date_time}), 400)
    assert fields(body) == ["date_time.value"]
    assert "1900-01-01T00:00" in body["detail"] and "2199-12-31T23:59" in body["detail"]


@pytest.mark.parametrize("date_time", [{"type": 1, "value": "9999-12-31T23:59"},
                                       {"type": 2, "value": "0001-01-01T00:00"}])
def test_matrix_date_time_at_the_ends_of_the_calendar_is_400(client, date_time):
    resp = client.post("/matrix", json={"sources": [A], "targets": [B], "date_time": date_time})
    body = problem(resp, 400)
    assert fields(body) in (["date_time.value"], ["date_time.type"])
    # also inside costing_options, where the spec puts it
    resp = client.post("/matrix", json={"sources": [A], "targets": [B],
                                        "costing_options": {"auto": {"date_time": date_time}}})
    problem(resp, 400)


def test_dates_inside_the_bounds_still_work(client):
    for value in ("1900-01-01T00:00", "2199-12-31T23:00"):
        resp = client.post("/route", json={"locations": [A, B], "date_time": {"type": 1, "value": value}})
        assert resp.status_code == 200, resp.text
        assert resp.json()["trip"]["departure"] == value
    resp = client.post("/matrix", json={"sources": [A], "targets": [B],
                                        "date_time": {"type": 1, "value": "2199-12-31T23:00"}})
    assert resp.status_code == 200, resp.text
    assert resp.json()["sources_to_targets"][0][0]["date_time"].startswith("2199-12-31T23:")


@pytest.mark.parametrize("waiting", ["999999999999999", "99999999999999999999999", "604801"])
def test_huge_waiting_secs_is_400(client, waiting):
    text = ('{"locations": [{"lon": 1.5218, "lat": 42.5063, "waiting_secs": W}, {"lon": 1.5333, "lat": 42.5107}],'
            ' "date_time": {"type": 1, "value": "2026-01-01T08:00"}}').replace("W", waiting)
    body = problem(_raw(client, "/route", text), 400)
    assert fields(body) == ["locations[0].waiting_secs"]


def test_longest_wait_is_served(client):
    locs = [{**A, "waiting_secs": 604800}, B]
    resp = client.post("/route", json={"locations": locs, "date_time": {"type": 1, "value": "2199-12-20T08:00"}})
    assert resp.status_code == 200, resp.text
    trip = resp.json()["trip"]
    assert trip["summary"]["time"] >= 604800
    assert trip["arrival"].startswith("2199-12-27")


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_avoid_polygon_point_is_400(client, bad):
    text = ('{"locations": [{"lon": 1.5218, "lat": 42.5063}, {"lon": 1.5333, "lat": 42.5107}],'
            ' "avoid_polygons": [[[1.52, 42.50], [X, 42.51], [1.53, 42.51], [1.52, 42.50]]]}').replace("X", bad)
    body = problem(_raw(client, "/route", text), 400)
    assert fields(body) == ["avoid_polygons[0][1][0]"]
    assert "finite" in body["detail"]


def test_avoid_polygon_outside_the_world_is_400(client):
    ring = [[1.52, 42.50], [1e308, 42.51], [1.53, 42.51]]
    body = problem(client.post("/route", json={"locations": [A, B], "avoid_polygons": [ring]}), 400)
    assert fields(body) == ["avoid_polygons[0][1][0]"]


@pytest.mark.parametrize("bad", ["NaN", "Infinity"])
def test_non_finite_coordinates_say_finite(client, bad):
    text = '{"locations": [{"lon": 1.5218, "lat": X}, {"lon": 1.5333, "lat": 42.5107}]}'.replace("X", bad)
    body = problem(_raw(client, "/route", text), 400)
    assert fields(body) == ["locations[0].lat"]
    assert "finite" in body["detail"] and "less than" not in body["detail"]


def test_library_date_time_guard(andorra):
    """Library callers of apply_date_time get the same 400, not an OverflowError."""
    from geoengine.errors import InvalidRequest
    from geoengine.services.route_options import apply_date_time

    route = andorra.compute_route(locations=[A, B]).routes[0]
    with pytest.raises(InvalidRequest) as err:
        apply_date_time(route, {"type": 1, "value": "2026-01-01T08:00"}, [1e15, 0])
    assert err.value.errors[0].field == "locations[0].waiting_secs"
    with pytest.raises(InvalidRequest) as err:
        apply_date_time(route, {"type": 2, "value": "0001-01-01T00:00"})
    assert err.value.errors[0].field == "date_time.value"


# -- trust boundaries ----------------------------------------------------------------------------------
def _app(andorra, tmp_path, **kw):
    settings = Settings(home=tmp_path, gateway_host=HOST, **kw)
    store = KeyStore(settings.state)
    return TestClient(create_app(andorra, settings, store), raise_server_exceptions=False), store


def test_forwarded_host_is_ignored_from_untrusted_peers(andorra, tmp_path):
    client, store = _app(andorra, tmp_path)
    key, _ = store.create("unlimited")
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST, "X-Forwarded-Host": "attacker.example",
         "X-Forwarded-Proto": "https", "X-Forwarded-Prefix": "/evil"}
    for path in ("/sources", "/tiles/andorra"):
        resp = client.get(path, headers=h)
        assert resp.status_code == 200, resp.text
        assert "attacker.example" not in resp.text and "/evil" not in resp.text and "https://" not in resp.text
    src = client.get("/sources", headers=h).json()["sources"][0]
    assert src["tiles"].startswith("http://testserver/tiles/")


def test_forwarded_host_is_honoured_from_a_trusted_proxy(andorra, tmp_path):
    # the TestClient's peer is "testclient"; a network list that does not contain it is not trusted
    client, store = _app(andorra, tmp_path / "a", forwarded_allow_ips="10.0.0.0/8")
    key, _ = store.create("unlimited")
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST, "X-Forwarded-Host": "maps.example.org",
         "X-Forwarded-Proto": "https", "X-Forwarded-Prefix": "/geo"}
    assert "maps.example.org" not in client.get("/sources", headers=h).text
    client, store = _app(andorra, tmp_path / "b", forwarded_allow_ips="testclient")
    key, _ = store.create("unlimited")
    h["X-Gateway-Key"] = key
    src = client.get("/sources", headers=h).json()["sources"][0]
    assert src["tiles"].startswith("https://maps.example.org/geo/tiles/")
    tj = client.get("/tiles/andorra", headers=h).json()
    assert tj["tiles"][0].startswith("https://maps.example.org/geo/tiles/andorra/")


def test_trusted_proxies_spec():
    from geoengine.server.proxy import TrustedProxies

    t = TrustedProxies("127.0.0.1, 10.0.0.0/8,::1")
    assert t.trusts("127.0.0.1") and t.trusts("10.2.3.4") and t.trusts("::1")
    assert not t.trusts("192.168.1.1") and not t.trusts(None) and not t.trusts("not-an-ip")
    assert not TrustedProxies(None) and not TrustedProxies("").trusts("127.0.0.1")
    assert TrustedProxies("*").trusts("203.0.113.9")


def test_cache_clear_needs_the_admin_scope_and_counts(andorra, tmp_path):
    client, store = _app(andorra, tmp_path)
    plain, rec = store.create("free")
    admin, arec = store.create("free", "ops", scopes=["admin"])
    assert arec.scopes == ("admin",) and rec.scopes == ()
    body = problem(client.post("/tiles/andorra/cache/clear", headers={"X-Gateway-Key": plain, "X-Gateway-Host": HOST}),
                   403)
    assert "admin" in body["detail"]
    resp = client.post("/tiles/andorra/cache/clear", headers={"X-Gateway-Key": admin, "X-Gateway-Host": HOST})
    assert resp.status_code == 200, resp.text
    assert resp.json()["source"] == "andorra"
    # an administrative call, not a tile read: it counts against the non-tile pool
    assert sum(store.usage(arec.id).values()) == 1
    assert sum(store.usage(rec.id).values()) == 1
    # the scope survives a reopen of the store and shows in the listing
    again = KeyStore(store.path)
    assert again.authenticate(admin).scopes == ("admin",)
    assert {r.id: r.scopes for r in again.list()}[arec.id] == ("admin",)


def test_unknown_key_scope_is_refused(tmp_path):
    from geoengine.errors import InvalidRequest

    store = KeyStore(tmp_path / "s.sqlite3")
    with pytest.raises(InvalidRequest):
        store.create("free", scopes=["root"])


def test_old_state_database_gains_the_scopes_column(tmp_path):
    import sqlite3

    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE keys (id TEXT PRIMARY KEY, key_hash TEXT NOT NULL, plan TEXT NOT NULL, "
                       "label TEXT NOT NULL DEFAULT '', created TEXT NOT NULL, revoked TEXT);")
    conn.close()
    store = KeyStore(path)
    key, rec = store.create("free")
    assert store.authenticate(key).scopes == ()


@pytest.mark.parametrize("host", ["MAPS.EXAMPLE.TEST", "Maps.Example.Test", " maps.example.test"])
def test_gateway_host_is_case_insensitive(andorra, tmp_path, host):
    client, store = _app(andorra, tmp_path)
    key, _ = store.create("unlimited")
    assert client.get("/health", headers={"X-Gateway-Key": key, "X-Gateway-Host": host}).status_code == 200
    problem(client.get("/health", headers={"X-Gateway-Key": key, "X-Gateway-Host": "maps.example.test.evil"}), 403)


def test_cli_keys_create_with_scope(tmp_path, monkeypatch, capsys):
    from geoengine.cli import main

    monkeypatch.setenv("GEOENGINE_HOME", str(tmp_path))
    monkeypatch.delenv("GEOENGINE_STATE", raising=False)
    monkeypatch.delenv("GEOENGINE_REDIS_URL", raising=False)
    assert main(["keys", "create", "--plan", "free", "--scope", "admin"]) == 0
    key = capsys.readouterr().out.strip().splitlines()[-1]
    assert main(["keys", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed[0]["scopes"] == ["admin"]
    assert KeyStore(tmp_path / "state.sqlite3").authenticate(key).scopes == ("admin",)
    assert main(["keys", "create", "--plan", "free", "--scope", "root"]) == 1
    assert "unknown key scope" in capsys.readouterr().err


# -- strict JSON types, limits, error details (after the issue-12 restructure) ------------------------
@pytest.mark.parametrize(("path", "body", "field"), [
    ("/route", {"locations": [{"lon": 1.5218, "lat": "42.5063"}, B]}, "locations[0].lat"),
    ("/route", {"locations": [A, B], "linear_references": "yes"}, "linear_references"),
    ("/route", {"locations": [{**A, "waiting_secs": 10.5}, B]}, "locations[0].waiting_secs"),
    ("/route", {"locations": [A, B], "avoid_polygons": [[["1.52", 42.5], [1.53, 42.5], [1.53, 42.51]]]},
     "avoid_polygons[0][0][0]"),
    ("/route", {"locations": [A, B], "avoid_polygons": [[[1.52, 42.5], [1.53, 42.5]]]}, "avoid_polygons[0]"),
    ("/matrix", {"sources": [{"lon": "1.5218", "lat": 42.5063}], "targets": [B]}, "sources[0].lon"),
    ("/isochrone", {"locations": [A], "contours": [{"time": "10"}]}, "contours[0].time"),
    ("/isochrone", {"locations": [A], "contours": [{"time": 10}], "polygons": "yes"}, "polygons"),
    ("/v1/routing/directions", {"waypoints": [{"lon": 1.5218, "lat": 42.5063}, {"lon": 1.5333, "lat": 42.5107}],
                                "steps": "no"}, "steps"),
    ("/elevation", {"shape": [{"lat": 42.5, "lon": 1.52}], "range": "yes"}, "range"),
    ("/elevation", {"shape": [{"lat": 42.5, "lon": 1.52}], "range": 1}, "range"),
    ("/elevation", {"shape": [{"lat": "42.5", "lon": 1.52}]}, "shape[0].lat"),
])
def test_strings_are_never_numbers_or_booleans(client, path, body, field):
    resp = client.post(path, json=body)
    b = problem(resp, 400)
    assert field in fields(b), b


def test_search_size_must_be_digits(client):
    for bad in ("2.0", "1e1", " 2"):
        b = problem(client.get("/search", params={"q": "andorra", "size": bad}), 400)
        assert "size" in fields(b)
    assert client.get("/search", params={"q": "andorra", "size": "2"}).status_code == 200


def test_matrix_cell_limit_is_400_naming_it(client):
    many = [A] * 101
    b = problem(client.post("/matrix", json={"sources": many, "targets": [B] * 100}), 400)
    assert "10000" in b["detail"] and "101 sources x 100 targets" in b["detail"]


def test_optimised_route_stop_limit(client):
    b = problem(client.post("/optimised_route", json={"locations": [A] * 51}), 400)
    assert fields(b) == ["locations"] and "50" in b["detail"]


def test_tile_coordinate_of_twenty_digits_is_out_of_range(client):
    b = problem(client.get("/tiles/andorra/3/" + "9" * 20 + "/1"), 400)
    assert "out of range" in b["detail"] or "0 to" in b["detail"], b


def test_405_lists_every_method_of_the_path(client):
    resp = client.delete("/elevation")
    b = problem(resp, 405)
    assert resp.headers["allow"] == "GET, HEAD, POST" or set(resp.headers["allow"].split(", ")) >= {"GET", "POST"}
    assert "POST" in b["detail"]


def test_openapi_documents_the_common_statuses(client):
    spec = client.get("/openapi.json").json()
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            codes = set(op["responses"])
            assert {"400", "404", "405", "429", "503", "5XX"} <= codes, (path, method)
            if "requestBody" in op:
                assert "413" in codes, (path, method)


def test_serve_refuses_a_bad_or_busy_port(tmp_path):
    import socket
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "geoengine", "serve", "--port", "99999"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and "99999 is not a port number" in out.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "geoengine", "serve", "--port", str(port), "--bundle", str(tmp_path)],
                             capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [f"error: cannot listen on 127.0.0.1:{port}: Address already in use"]
