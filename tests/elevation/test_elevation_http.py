"""GET and POST /elevation over in-process HTTP: values, shapes, every 400 and 422."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import geoengine
from geoengine.geo import encode_polyline

ANDORRA_LA_VELLA = (42.5063, 1.5218)
ENCAMP = (42.5345, 1.5803)
PROBLEM_KEYS = {"type", "title", "status", "detail"}


@pytest.fixture(scope="module")
def client(api_client, andorra):
    return api_client(andorra)


def problem(resp, status):
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    body = resp.json()
    assert PROBLEM_KEYS <= set(body) and body["status"] == status
    return body


def great_circle_m(lat1, lon1, lat2, lon2):
    """Haversine written out here, independently of geoengine.geo."""
    p1, p2, dp, dl = map(math.radians, (lat1, lat2, lat2 - lat1, lon2 - lon1))
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * 6_371_008.8 * math.asin(math.sqrt(a))


# -- GET -------------------------------------------------------------------------------------------


def test_get_known_point(client, n42e001, bilinear):
    lat, lon = ANDORRA_LA_VELLA
    resp = client.get("/elevation", params={"lat": lat, "lon": lon})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == {"lat", "lon", "elevation_m"}
    assert (body["lat"], body["lon"]) == (lat, lon)
    assert body["elevation_m"] == pytest.approx(bilinear(n42e001, 42, 1, lat, lon), abs=0.05)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"lat": 90.5, "lon": 1.5}, "lat"),
        ({"lat": -91, "lon": 1.5}, "lat"),
        ({"lat": 42.5, "lon": 180.01}, "lon"),
        ({"lat": 42.5, "lon": -181}, "lon"),
        ({"lon": 1.5}, "lat"),
        ({"lat": 42.5}, "lon"),
        ({"lat": "north", "lon": 1.5}, "lat"),
        ({"lat": "nan", "lon": 1.5}, "lat"),
    ],
)
def test_get_bad_coordinates_400(client, params, field):
    body = problem(client.get("/elevation", params=params), 400)
    assert field in [e["field"] for e in body["errors"]]


def test_get_outside_coverage_422(client):
    body = problem(client.get("/elevation", params={"lat": 48.85, "lon": 2.35}), 422)
    assert "outside the elevation coverage" in body["detail"]
    assert "N42E001" in body["detail"]


def test_get_all_void_cell_422(api_client, monaco, n43e007):
    v = n43e007 == -32768
    r0, c0 = map(int, np.argwhere(v[:-1, :-1] & v[:-1, 1:] & v[1:, :-1] & v[1:, 1:])[0])
    lat, lon = 44 - (r0 + 0.5) / 1200, 7 + (c0 + 0.5) / 1200
    body = problem(api_client(monaco).get("/elevation", params={"lat": lat, "lon": lon}), 422)
    assert "void" in body["detail"]


def test_bundle_without_dem_422(api_client, liechtenstein):
    c = api_client(liechtenstein)
    body = problem(c.get("/elevation", params={"lat": 47.14, "lon": 9.52}), 422)
    assert "without a DEM" in body["detail"]
    body = problem(c.post("/elevation", json={"shape": [{"lat": 47.14, "lon": 9.52}]}), 422)
    assert "without a DEM" in body["detail"]


# -- POST ------------------------------------------------------------------------------------------


def test_post_shape_heights(client, andorra):
    shape = [dict(zip(("lat", "lon"), p, strict=True)) for p in (ANDORRA_LA_VELLA, ENCAMP)]
    resp = client.post("/elevation", json={"shape": shape})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == {"height"}
    expected = andorra.elevation(lat=np.array([ANDORRA_LA_VELLA[0], ENCAMP[0]]), lon=np.array([ANDORRA_LA_VELLA[1], ENCAMP[1]]))
    assert body["height"] == pytest.approx(list(expected), abs=0.05)


def test_post_range_height(client, andorra):
    pts = [ANDORRA_LA_VELLA, (42.52, 1.55), ENCAMP]
    resp = client.post("/elevation", json={"shape": [{"lat": a, "lon": b} for a, b in pts], "range": True})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == {"range_height"}  # like Valhalla: height is not repeated
    rh = body["range_height"]
    assert len(rh) == 3 and all(len(pair) == 2 for pair in rh)
    cum = [0.0]
    for (a, b), (c, d) in zip(pts, pts[1:], strict=False):
        cum.append(cum[-1] + great_circle_m(a, b, c, d))
    assert [p[0] for p in rh] == pytest.approx(cum, abs=0.05)
    heights = andorra.elevation(lat=np.array([p[0] for p in pts]), lon=np.array([p[1] for p in pts]))
    assert [p[1] for p in rh] == pytest.approx(list(heights), abs=0.05)


def test_post_encoded_polyline_equals_shape(client):
    lats = np.linspace(42.02, 41.98, 41)  # across the N41/N42 tile boundary
    lons = np.linspace(1.51, 1.53, 41)
    enc = encode_polyline(lats, lons, 6)
    by_poly = client.post("/elevation", json={"encoded_polyline": enc, "range": True}).json()
    shape = [{"lat": float(a), "lon": float(b)} for a, b in zip(np.round(lats, 6), np.round(lons, 6), strict=True)]
    by_shape = client.post("/elevation", json={"shape": shape, "range": True}).json()
    assert by_poly == by_shape
    assert all(h is not None for _, h in by_poly["range_height"])


def test_post_integer_coordinates_are_numbers(client, andorra):
    body = client.post("/elevation", json={"shape": [{"lat": 42, "lon": 1}, {"lat": 42.5, "lon": 1.5}]}).json()
    assert body["height"][0] == pytest.approx(float(andorra.elevation(lat=[42.0], lon=[1.0])[0]), abs=0.05)


def test_post_points_outside_coverage_are_null(client):
    shape = [{"lat": 42.5, "lon": 1.5}, {"lat": 48.85, "lon": 2.35}, {"lat": 42.51, "lon": 1.51}]
    body = client.post("/elevation", json={"shape": shape}).json()
    assert body["height"][1] is None
    assert body["height"][0] is not None and body["height"][2] is not None
    body = client.post("/elevation", json={"shape": shape, "range": True}).json()
    assert body["range_height"][1][1] is None and body["range_height"][1][0] > 600_000


@pytest.mark.parametrize(
    ("payload", "field", "needle"),
    [
        ({}, "shape", "exactly one"),
        ({"range": True}, "shape", "exactly one"),
        ({"shape": [{"lat": 42.5, "lon": 1.5}], "encoded_polyline": "??"}, "encoded_polyline", "not both"),
        ({"shape": []}, "shape", "at least one"),
        ({"shape": [{"lat": 42.5, "lon": 1.5}, {"lat": 95, "lon": 1.5}]}, "shape[1].lat", "90"),
        ({"shape": [{"lat": 42.5, "lon": 200}]}, "shape[0].lon", "180"),
        ({"shape": [{"lat": 42.5}]}, "shape[0].lon", "required"),
        ({"shape": [{"lat": 42.5, "lon": 1.5, "height": 3}]}, "shape[0].height", "not permitted"),
        ({"shape": {"lat": 42.5, "lon": 1.5}}, "shape", "list"),
        ({"shape": [{"lat": 42.5, "lon": 1.5}, {"lat": "42.5", "lon": 1.5}]}, "shape[1].lat", "number"),
        ({"shape": [{"lat": True, "lon": 1.5}]}, "shape[0].lat", "number"),
        ({"shape": [{"lat": 42.5, "lon": 1.5}, [42.5, 1.5]]}, "shape[1]", "dictionary"),
        ({"shape": [{"lat": 42.5, "lon": None}]}, "shape[0].lon", "number"),
        ({"encoded_polyline": "_p~iF~ps|U_ulL nnqC"}, "encoded_polyline", "alphabet"),
        ({"encoded_polyline": "_p~iF~ps|U_ulL"}, "encoded_polyline", "odd number"),
        ({"encoded_polyline": ""}, "encoded_polyline", "at least one"),
        ({"encoded_polyline": 42}, "encoded_polyline", "string"),
        ({"shape": [{"lat": 42.5, "lon": 1.5}], "range": "perhaps"}, "range", "boolean"),
        ({"shape": [{"lat": 42.5, "lon": 1.5}], "resample_distance": 10}, "resample_distance", "not permitted"),
    ],
)
def test_post_bad_bodies_400(client, payload, field, needle):
    body = problem(client.post("/elevation", json=payload), 400)
    fields = [e["field"] for e in body["errors"]]
    assert field in fields
    assert needle in " ".join(e["message"] for e in body["errors"])


def test_post_polyline_decoding_outside_the_world_400(client):
    enc = encode_polyline([42.5, 95.0], [1.5, 1.5], 6)
    body = problem(client.post("/elevation", json={"encoded_polyline": enc}), 400)
    assert body["errors"][0]["field"] == "encoded_polyline.points[1].lat"


def test_post_malformed_json_400(client):
    resp = client.post("/elevation", content=b'{"shape": [', headers={"Content-Type": "application/json"})
    assert "malformed JSON" in problem(resp, 400)["detail"]
    resp = client.post("/elevation", content=b"[1, 2]", headers={"Content-Type": "application/json"})
    problem(resp, 400)


def test_point_limit_default_2000(client):
    pts = np.linspace(42.45, 42.65, 2001)
    shape = [{"lat": float(a), "lon": 1.55} for a in pts]
    ok = client.post("/elevation", json={"shape": shape[:2000]})
    assert ok.status_code == 200 and len(ok.json()["height"]) == 2000
    body = problem(client.post("/elevation", json={"shape": shape}), 400)
    assert "2001 given, at most 2000 points" in body["detail"]
    enc = encode_polyline(pts, np.full(pts.size, 1.55), 6)
    body = problem(client.post("/elevation", json={"encoded_polyline": enc}), 400)
    assert "at most 2000 points" in body["detail"]


def test_point_limit_is_configurable(api_client, build_region, settings):
    small = dataclasses.replace(settings, elevation_max_points=5)
    engine = geoengine.open(build_region("andorra"), settings=small)
    c = api_client(engine)
    shape = [{"lat": 42.5 + i / 1000, "lon": 1.5} for i in range(6)]
    assert c.post("/elevation", json={"shape": shape[:5]}).status_code == 200
    body = problem(c.post("/elevation", json={"shape": shape}), 400)
    assert "at most 5 points" in body["detail"]


def test_openapi_documents_elevation(client):
    doc = client.get("/openapi.json").json()
    get = doc["paths"]["/elevation"]["get"]
    assert {p["name"] for p in get["parameters"]} == {"lat", "lon"}
    assert {"200", "400", "422"} <= set(get["responses"])
    post = doc["paths"]["/elevation"]["post"]
    ref = post["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert ref.endswith("/ElevationRequest")
    req = doc["components"]["schemas"]["ElevationRequest"]
    assert {"shape", "encoded_polyline", "range"} <= set(req["properties"])
    ok = post["responses"]["200"]["content"]["application/json"]["schema"]
    refs = {r["$ref"].rsplit("/", 1)[1] for r in ok["anyOf"]}
    assert refs == {"HeightResponse", "RangeHeightResponse"}
    assert "not repeated" in doc["components"]["schemas"]["RangeHeightResponse"]["properties"]["range_height"]["description"]
    assert {"400", "422"} <= set(post["responses"])
