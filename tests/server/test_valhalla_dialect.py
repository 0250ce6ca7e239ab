"""The Valhalla dialect over HTTP (in-process, gateway headers preset) on Andorra: every action's
response shape, equality with the spec endpoints, the GET ?json= form, bad input (one problem body,
no 500), the gateway's counting and the OpenAPI entries."""

from __future__ import annotations

import json

import numpy as np
import pytest

from geoengine.geo import decode_polyline, encode_polyline, haversine_m

A = {"lon": 1.5218, "lat": 42.5063}
B = {"lon": 1.5333, "lat": 42.5107}
C = {"lon": 1.5341, "lat": 42.5555}
D = {"lon": 1.4921, "lat": 42.4630}


@pytest.fixture(scope="module")
def client(api_client, andorra):
    andorra.warm()  # as the server does at start-up: compile the kernels before the timed requests
    return api_client(andorra)


def assert_problem(r, status):
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["status"] == status and body["detail"] and "Traceback" not in r.text
    return body


def _trace(client, a, b, step=5):
    r = client.post("/route", json={"locations": [a, b], "directions_options": {"directions_type": "none"}})
    lat, lon = decode_polyline(r.json()["trip"]["legs"][0]["shape"], 6)
    idx = np.unique(np.r_[np.arange(0, len(lat), step), len(lat) - 1])
    return [{"lon": float(lon[i]), "lat": float(lat[i])} for i in idx]


# -- shapes and equality with the spec endpoints ---------------------------------------------------------------
def test_sources_to_targets_equals_matrix(client):
    body = {"sources": [A, B], "targets": [B, C, D], "costing": "auto"}
    va = client.post("/sources_to_targets", json=body)
    sp = client.post("/matrix", json=body)
    assert va.status_code == 200 and sp.status_code == 200, va.text
    va, sp = va.json(), sp.json()
    assert [[c["time"] for c in row] for row in va["sources_to_targets"]] == \
        [[c["time"] for c in row] for row in sp["sources_to_targets"]]
    assert [[c["distance"] for c in row] for row in va["sources_to_targets"]] == \
        [[c["distance"] for c in row] for row in sp["sources_to_targets"]]
    assert va["units"] == "kilometers" and va["algorithm"] == "timedistancematrix"
    concise = client.post("/sources_to_targets", json={**body, "verbose": False, "units": "mi"}).json()
    assert concise["units"] == "miles"
    assert concise["sources_to_targets"]["durations"] == [[c["time"] for c in row] for row in sp["sources_to_targets"]]
    # GET ?json= gives the same
    g = client.get("/sources_to_targets", params={"json": json.dumps(body)})
    assert g.status_code == 200 and g.json()["sources_to_targets"] == va["sources_to_targets"]


def test_get_route_json_equals_post_route(client):
    body = {"locations": [A, C], "costing": "auto", "directions_options": {"units": "miles"}}
    post = client.post("/route", json=body).json()
    get = client.get("/route", params={"json": json.dumps(body)})
    assert get.status_code == 200, get.text
    assert get.json()["trip"]["summary"] == post["trip"]["summary"]
    assert get.json()["trip"]["units"] == "miles"


def test_isochrone_points_first_contours_largest_first(client):
    r = client.post("/isochrone", json={"locations": [A], "costing": "pedestrian",
                                        "contours": [{"time": 5}, {"time": 10}]})
    feats = r.json()["features"]
    kinds = [f["geometry"]["type"] for f in feats]
    n_points = kinds.count("Point")
    assert n_points >= 2 and kinds[:n_points] == ["Point"] * n_points
    assert [f["properties"]["contour"] for f in feats[n_points:]] == [10, 5]
    g = client.get("/isochrone", params={"json": json.dumps({"locations": [A], "contours": [{"time": 5}],
                                                             "show_locations": False})})
    assert g.status_code == 200 and len(g.json()["features"]) == 1


def test_optimized_route_integer_maneuvers(client):
    r = client.post("/optimized_route", json={"locations": [A, C, B, D], "costing": "auto"})
    assert r.status_code == 200, r.text
    trip = r.json()["trip"]
    assert sorted(loc["original_index"] for loc in trip["locations"]) == [0, 1, 2, 3]
    assert trip["locations"][0]["original_index"] == 0 and trip["locations"][-1]["original_index"] == 3
    ms = [m for leg in trip["legs"] for m in leg["maneuvers"]]
    assert all(isinstance(m["type"], int) and "type_code" not in m for m in ms)
    assert ms[0]["type"] in (1, 2, 3) and ms[-1]["type"] in (4, 5, 6)
    spec = client.post("/optimised_route", json={"locations": [A, C, B, D]}).json()
    assert spec["trip"]["summary"]["time"] == trip["summary"]["time"]


def test_trace_route_and_attributes(client):
    shape = _trace(client, A, B)
    r = client.post("/trace_route", json={"shape": shape, "costing": "auto",
                                          "trace_options": {"turn_penalty_factor": 500, "search_radius": 30}})
    assert r.status_code == 200, r.text
    trip = r.json()["trip"]
    assert trip["legs"] and all(isinstance(m["type"], int) for m in trip["legs"][0]["maneuvers"])
    spec = client.post("/map_match", json={"shape": shape, "costing": "auto", "shape_match": "walk_or_snap",
                                           "trace_options": {"search_radius": 30}}).json()
    assert spec["trip"]["summary"]["time"] == trip["summary"]["time"]
    a = client.post("/trace_attributes", json={"shape": shape, "costing": "auto"})
    assert a.status_code == 200, a.text
    doc = a.json()
    assert doc["edges"] and all(e["use"] and e["road_class"] and "sidewalk" in e for e in doc["edges"])
    assert all(isinstance(e["way_id"], int) and e["begin_shape_index"] <= e["end_shape_index"] for e in doc["edges"])
    assert len(doc["matched_points"]) == len(shape) and doc["shape"]
    ex = client.post("/trace_attributes", json={"shape": shape, "costing": "auto",
                                                "filters": {"attributes": ["edge.way_id", "shape"], "action": "exclude"}})
    assert all("way_id" not in e and "use" in e for e in ex.json()["edges"]) and "shape" not in ex.json()


def test_height(client, andorra):
    shape = [A, B, C]
    r = client.post("/height", json={"shape": shape, "range": True, "height_precision": 1})
    assert r.status_code == 200, r.text
    rh = r.json()["range_height"]
    want = andorra.elevation(lat=[p["lat"] for p in shape], lon=[p["lon"] for p in shape])
    assert [h for _, h in rh] == [round(float(x), 1) for x in want]
    assert rh[0][0] == 0 and rh[1][0] == round(float(haversine_m(A["lat"], A["lon"], B["lat"], B["lon"])))
    r = client.post("/height", json={"shape": [A, B], "resample_distance": 100})
    h = r.json()["height"]
    d = float(haversine_m(A["lat"], A["lon"], B["lat"], B["lon"]))
    assert len(h) == int(np.ceil(d / 100)) + 1 and all(isinstance(x, int) for x in h)
    poly = client.post("/height", json={"encoded_polyline": encode_polyline([A["lat"], B["lat"]],
                                                                             [A["lon"], B["lon"]], 6)})
    assert poly.status_code == 200 and len(poly.json()["height"]) == 2


def test_locate(client, andorra):
    r = client.post("/locate", json={"locations": [A, {"lon": 1.6, "lat": 42.9}], "costing": "auto", "verbose": True})
    assert r.status_code == 200, r.text
    first, far = r.json()
    assert first["input_lon"] == A["lon"] and first["edges"]
    e = first["edges"][0]
    assert e["side_of_street"] in ("left", "right", "neither") and 0 <= e["percent_along"] <= 1
    assert haversine_m(A["lat"], A["lon"], e["correlated_lat"], e["correlated_lon"]) < 200
    assert e["edge_info"]["way_id"] == e["way_id"] and e["edge"]["use"]
    assert far["edges"] is None and far["reason"]


def test_status_and_expansion(client):
    s = client.get("/status").json()
    assert s["version"] and "sources_to_targets" in s["available_actions"] and s["tileset_last_modified"] > 0
    v = client.post("/status", json={"verbose": True}).json()
    assert v["has_tiles"] is True and v["bbox"]["features"][0]["geometry"]["type"] == "Polygon"
    r = client.post("/expansion", json={"action": "isochrone", "locations": [A], "costing": "pedestrian",
                                        "contours": [{"time": 2}], "expansion_properties": ["duration", "edge_id",
                                                                                          "edge_status"]})
    assert r.status_code == 200, r.text
    feats = r.json()["features"]
    assert feats and all(f["geometry"]["type"] == "LineString" and len(f["geometry"]["coordinates"]) >= 2
                         for f in feats)
    d = [f["properties"]["duration"] for f in feats]
    assert d == sorted(d) and all(x <= 120.5 for x in d)
    assert {f["properties"]["edge_status"] for f in feats} <= {"s", "r"}
    skip = client.post("/expansion", json={"action": "isochrone", "locations": [A], "costing": "pedestrian",
                                           "contours": [{"time": 2}], "skip_opposites": True,
                                           "expansion_properties": ["edge_id"]}).json()["features"]
    ids = [f["properties"]["edge_id"] for f in skip]
    assert len({i >> 1 for i in ids}) == len(ids) < len(feats)
    route = client.post("/expansion", json={"action": "route", "locations": [A, B]})
    assert route.status_code == 200 and route.json()["features"]


# -- bad input: one problem body, never a 500 ----------------------------------------------------------------
BAD = [
    ("post", "/sources_to_targets", {"sources": [A]}, "targets"),
    ("post", "/sources_to_targets", {"sources": [A], "targets": [B], "verbose": "x"}, "verbose"),
    ("post", "/sources_to_targets", {"sources": [A], "targets": [B], "costing": "taxi"}, "costing"),
    ("post", "/optimized_route", {"locations": [A]}, "locations"),
    ("post", "/trace_route", {"costing": "auto"}, "shape"),
    ("post", "/trace_attributes", {"shape": [A, B], "filters": {"attributes": "edge.names"}}, "filters.attributes"),
    ("post", "/trace_attributes", {"shape": [A, B], "filters": {"attributes": [], "action": "keep"}},
     "filters.action"),
    ("post", "/trace_attributes", {"shape": [A, B], "trace_options": {"search_radius": -1}},
     "trace_options.search_radius"),
    ("post", "/height", {}, "shape"),
    ("post", "/height", {"shape": [{"lat": 95, "lon": 1}]}, "shape[0].lat"),
    ("post", "/height", {"shape": [A], "height_precision": 5}, "height_precision"),
    ("post", "/locate", {"locations": []}, "locations"),
    ("post", "/expansion", {"locations": [A]}, "action"),
    ("post", "/expansion", {"action": "isochrone", "locations": [A]}, "contours"),
    ("post", "/expansion", {"action": "isochrone", "locations": [A], "contours": [{"time": 1}],
                            "expansion_properties": ["colour"]}, "expansion_properties"),
    ("get", "/route", None, "json"),
    ("get", "/route?json={not json", None, "json"),
    ("get", "/route?json=[1]", None, "json"),
    ("get", "/sources_to_targets?json=" + json.dumps({"sources": [A]}), None, "targets"),
    ("get", "/route?json=" + json.dumps({"locations": [A, {"lon": 1.5, "lat": 99}]}), None, "locations[1].lat"),
]


@pytest.mark.parametrize("method,path,body,field", BAD)
def test_bad_input(client, method, path, body, field):
    r = client.post(path, json=body) if method == "post" else client.get(path)
    problem = assert_problem(r, 400)
    assert any(e["field"] == field for e in problem.get("errors", [])), problem


def test_not_json_body(client):
    r = client.post("/sources_to_targets", content=b"{nope", headers={"Content-Type": "application/json"})
    assert_problem(r, 400)


def test_unsnappable_is_422(client):
    far = {"lon": 1.6, "lat": 42.9}
    assert_problem(client.post("/sources_to_targets", json={"sources": [far], "targets": [A]}), 422)
    assert_problem(client.post("/trace_attributes", json={"shape": [far, {"lon": 1.61, "lat": 42.91}]}), 422)


# -- gateway and OpenAPI -----------------------------------------------------------------------------------------
def test_counted_like_their_spec_twins(andorra, tmp_path):
    from starlette.testclient import TestClient

    from geoengine.config import Settings
    from geoengine.gateway import KeyStore, load_plans
    from geoengine.server.app import create_app

    settings = Settings(home=tmp_path, gateway_host="h.test")
    store = KeyStore(settings.state, load_plans(None))
    c = TestClient(create_app(andorra, settings, store), raise_server_exceptions=False)
    key, rec = store.create("starter")
    h = {"X-Gateway-Key": key, "X-Gateway-Host": "h.test"}
    for path in ("/sources_to_targets", "/optimized_route", "/trace_route", "/trace_attributes", "/expansion"):
        c.post(path, json={}, headers=h)
    c.post("/height", json={}, headers=h)
    c.get("/status", headers=h)
    usage = store.usage(rec.id)
    assert sum(v for k, v in usage.items() if k.startswith("routing")) == 5
    # missing credentials: 401 on the matrix twin, 403 elsewhere
    assert_problem(c.post("/sources_to_targets", json={}), 401)
    assert_problem(c.post("/trace_attributes", json={}), 403)


def test_openapi_lists_the_actions(client):
    paths = client.get("/openapi.json").json()["paths"]
    for p in ("/sources_to_targets", "/optimized_route", "/trace_route", "/trace_attributes", "/height", "/locate",
              "/status", "/expansion"):
        assert p in paths, p
    assert "get" in paths["/route"] and "post" in paths["/route"]
    assert "401" in paths["/sources_to_targets"]["post"]["responses"]
