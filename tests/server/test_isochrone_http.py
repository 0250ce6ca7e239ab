"""POST /isochrone over HTTP (in-process client with valid gateway headers): response shape, options,
every 400 case with its field path, 422 for a location off the network, the OpenAPI entry."""

from __future__ import annotations

import pytest
import shapely
from shapely.geometry import shape

LOC = {"lon": 1.5218, "lat": 42.5063}


@pytest.fixture(scope="module")
def client(api_client, andorra):
    return api_client(andorra)


def _post(client, **body):
    body.setdefault("locations", [LOC])
    body.setdefault("contours", [{"time": 10}])
    return client.post("/isochrone", json=body)


def test_feature_collection(client):
    r = _post(client, contours=[{"time": 5, "color": "ff0000"}, {"time": 10}], id="iso-1")
    assert r.status_code == 200, r.text
    fc = r.json()
    assert fc["type"] == "FeatureCollection" and fc["id"] == "iso-1"
    contours = [f for f in fc["features"] if "contour" in f["properties"]]
    assert [f["properties"]["contour"] for f in contours] == [10, 5]
    for f in contours:
        p = f["properties"]
        assert p["metric"] == "time" and p["fill-opacity"] == 0.33 and p["color"].startswith("#")
        assert f["geometry"]["type"] in ("Polygon", "MultiPolygon")
        g = shape(f["geometry"])
        assert g.is_valid and g.area > 0
        # the input location is inside its own isochrone
        assert shapely.contains_xy(g, LOC["lon"], LOC["lat"])
    assert contours[1]["properties"]["color"] == "#ff0000"
    kinds = [f["properties"].get("type") for f in fc["features"] if f["geometry"]["type"] == "Point"]
    assert kinds[0] == "input" and kinds.count("snapped") >= 1


def test_lines_distance_and_no_locations(client):
    r = _post(client, contours=[{"distance": 3}], polygons=False, show_locations=False, costing="bicycle")
    assert r.status_code == 200, r.text
    feats = r.json()["features"]
    assert len(feats) == 1
    f = feats[0]
    assert f["geometry"]["type"] in ("LineString", "MultiLineString")
    assert f["properties"]["metric"] == "distance" and f["properties"]["contour"] == 3


def test_every_iso_costing(client):
    areas = {}
    for costing in ("auto", "bicycle", "pedestrian", "truck", "motorcycle", "motor_scooter"):
        r = _post(client, costing=costing, show_locations=False)
        assert r.status_code == 200, (costing, r.text)
        areas[costing] = shape(r.json()["features"][0]["geometry"]).area
    assert areas["pedestrian"] < areas["bicycle"] < areas["auto"]


def test_options_reach(client):
    a = shape(_post(client, costing="pedestrian").json()["features"][-1]["geometry"])
    b = shape(_post(client, costing="pedestrian", costing_options={"pedestrian": {"walking_speed": 2}})
              .json()["features"][-1]["geometry"])
    assert b.area < 0.8 * a.area


BAD = [
    ({"locations": []}, "locations"),
    ({"locations": [LOC, LOC]}, "locations"),
    ({"locations": [{"lon": 200, "lat": 42.5}]}, "locations[0].lon"),
    ({"locations": [{"lat": 42.5}]}, "locations[0].lon"),
    ({"costing": "bus"}, "costing"),
    ({"costing": "auto_shorter"}, "costing"),
    ({"costing_options": {"use_highways": 3}}, "costing_options.use_highways"),
    ({"costing_options": {"teleport": True}}, "costing_options.teleport"),
    ({"costing_options": "fast"}, "costing_options"),
    ({"contours": []}, "contours"),
    ({"contours": [{"time": 1}, {"time": 2}, {"time": 3}, {"time": 4}, {"time": 5}]}, "contours"),
    ({"contours": [{"time": 120.5}]}, "contours[0].time"),
    ({"contours": [{"time": 0}]}, "contours[0].time"),
    ({"contours": [{"distance": 201}]}, "contours[0].distance"),
    ({"contours": [{"distance": -1}]}, "contours[0].distance"),
    ({"contours": [{"time": 5, "distance": 1}]}, "contours[0]"),
    ({"contours": [{}]}, "contours[0]"),
    ({"contours": [{"color": "ff0000"}]}, "contours[0]"),
    ({"contours": [{"time": 5, "color": "red"}]}, "contours[0].color"),
    ({"contours": [{"time": 5, "speed": 3}]}, "contours[0].speed"),
    ({"polygons": "maybe"}, "polygons"),
    ({"denoise": 1.5}, "denoise"),
    ({"denoise": -0.1}, "denoise"),
    ({"generalize": -5}, "generalize"),
    ({"show_locations": "perhaps"}, "show_locations"),
]


@pytest.mark.parametrize("patch,field", BAD, ids=[f for _, f in BAD])
def test_bad_requests_are_400(client, patch, field):
    r = _post(client, **patch)
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["status"] == 400 and body["title"]
    fields = [e["field"] for e in body.get("errors", [])]
    assert any(f == field or f.startswith(field + ".") for f in fields), fields


def test_missing_contours_is_400(client):
    r = client.post("/isochrone", json={"locations": [LOC]})
    assert r.status_code == 400
    assert any(e["field"] == "contours" for e in r.json()["errors"])


def test_malformed_json_is_400(client):
    r = client.post("/isochrone", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400


def test_unsnappable_is_422(client):
    r = _post(client, locations=[{"lon": 10.0, "lat": 10.0}])
    assert r.status_code == 422, r.text
    assert r.json()["status"] == 422


def test_openapi_documents_isochrone(client):
    doc = client.get("/openapi.json").json()
    op = doc["paths"]["/isochrone"]["post"]
    assert "requestBody" in op and "200" in op["responses"] and "400" in op["responses"]


def test_gateway_credential_required(client):
    from starlette.testclient import TestClient

    bare = TestClient(client.app, raise_server_exceptions=False)
    r = bare.post("/isochrone", json={"locations": [LOC], "contours": [{"time": 5}]})
    assert r.status_code in (401, 403)
