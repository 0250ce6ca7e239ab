"""POST /v1/routing/directions and engine.directions on the Andorra and Liechtenstein bundles."""

from __future__ import annotations

import numpy as np
import pytest

from geoengine.errors import InvalidRequest, NoRoute, Unsnappable
from geoengine.geo import decode_polyline, haversine_m

from .conftest import ANDORRA, LIECHTENSTEIN

PATH = "/v1/routing/directions"


def wp(*names, places=ANDORRA):
    return [{"lon": places[n][0], "lat": places[n][1]} for n in names]


def test_driving_route_shape(andorra_client, andorra):
    r = andorra_client.post(PATH, json={"waypoints": wp("andorra_la_vella", "canillo"), "profile": "driving"})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert len(doc["routes"]) == 1
    route = doc["routes"][0]
    geom = route["geometry"]
    assert geom["type"] == "LineString"
    coords = np.asarray(geom["coordinates"])
    # [lon, lat] order: Andorra's longitudes are ~1.4-1.8 and latitudes ~42.4-42.7
    assert (coords[:, 0] > 1.4).all() and (coords[:, 0] < 1.8).all() and (coords[:, 1] > 42.4).all()
    # the line starts and ends at the snapped waypoints
    snapped = doc["waypoints"]
    assert len(snapped) == 2
    assert coords[0].tolist() == pytest.approx([snapped[0]["lon"], snapped[0]["lat"]], abs=1e-5)
    assert coords[-1].tolist() == pytest.approx([snapped[1]["lon"], snapped[1]["lat"]], abs=1e-5)
    # the geometry's length is the route distance; the crow-fly distance is shorter
    seg = haversine_m(coords[:-1, 1], coords[:-1, 0], coords[1:, 1], coords[1:, 0]).sum()
    assert route["distance_m"] == pytest.approx(seg, rel=0.01)
    crow = haversine_m(coords[0, 1], coords[0, 0], coords[-1, 1], coords[-1, 0])
    assert route["distance_m"] > crow
    # the same trip as POST /route
    trip = andorra.route(locations=wp("andorra_la_vella", "canillo"))["trip"]
    assert route["duration_s"] == pytest.approx(trip["summary"]["time"], abs=0.1)
    leg = route["legs"][0]
    assert leg["distance_m"] == pytest.approx(route["distance_m"], abs=1)
    steps = leg["steps"]
    assert steps[0]["maneuver"].startswith("start") and steps[-1]["maneuver"].startswith("destination")
    assert sum(s["distance_m"] for s in steps) == pytest.approx(leg["distance_m"], rel=0.01)
    for s in steps:
        assert set(s) >= {"instruction", "distance_m", "duration_s", "maneuver", "bearing"}
        assert s["instruction"] and 0 <= s["bearing"] <= 360


def test_legs_per_waypoint_pair_and_polyline6(andorra_client):
    body = {"waypoints": wp("sant_julia", "andorra_la_vella", "encamp"), "profile": "driving", "geometry": "polyline6"}
    doc = andorra_client.post(PATH, json=body).json()
    route = doc["routes"][0]
    assert len(route["legs"]) == 2 and len(doc["waypoints"]) == 3
    assert route["distance_m"] == pytest.approx(sum(leg["distance_m"] for leg in route["legs"]), abs=1)
    assert route["duration_s"] == pytest.approx(sum(leg["duration_s"] for leg in route["legs"]), abs=0.5)
    lat, lon = decode_polyline(route["geometry"], 6)
    gj = andorra_client.post(PATH, json={**body, "geometry": "geojson"}).json()["routes"][0]["geometry"]
    assert np.column_stack([lon, lat]) == pytest.approx(np.asarray(gj["coordinates"]), abs=2e-6)
    # the middle waypoint lies on the line
    mid = doc["waypoints"][1]
    d = haversine_m(lat, lon, mid["lat"], mid["lon"])
    assert d.min() < 1.0


def test_steps_false_and_languages(andorra_client):
    body = {"waypoints": wp("andorra_la_vella", "ordino"), "profile": "driving"}
    no_steps = andorra_client.post(PATH, json={**body, "steps": False}).json()
    assert "steps" not in no_steps["routes"][0]["legs"][0]
    texts = {}
    for lang in ("en", "hi", "fr", "de", "es", "ar"):
        r = andorra_client.post(PATH, json={**body, "language": lang})
        assert r.status_code == 200, (lang, r.text)
        texts[lang] = r.json()["routes"][0]["legs"][0]["steps"][0]["instruction"]
    assert len(set(texts.values())) == 6
    assert any("\u0900" <= ch <= "\u097f" for ch in texts["hi"])  # Devanagari
    assert any("\u0600" <= ch <= "\u06ff" for ch in texts["ar"])  # Arabic


@pytest.mark.parametrize("profile", ["walking", "cycling"])
def test_other_profiles(andorra_client, profile):
    body = {"waypoints": wp("andorra_la_vella", "encamp"), "profile": profile}
    r = andorra_client.post(PATH, json=body)
    assert r.status_code == 200, r.text
    car = andorra_client.post(PATH, json={**body, "profile": "driving"}).json()["routes"][0]
    slow = r.json()["routes"][0]
    assert slow["duration_s"] > car["duration_s"] * 1.5


@pytest.mark.parametrize("body, field", [
    ({"waypoints": [{"lon": 1.52, "lat": 42.5}], "profile": "driving"}, "waypoints"),
    ({"waypoints": [{"lon": 1.52, "lat": 42.5}] * 26, "profile": "driving"}, "waypoints"),
    ({"waypoints": [{"lon": 1.52, "lat": 42.5}, {"lon": 1.53, "lat": 95}], "profile": "driving"}, "waypoints[1].lat"),
    ({"waypoints": [{"lon": 1.52, "lat": 42.5}, {"lat": 42.5}], "profile": "driving"}, "waypoints[1].lon"),
    ({"waypoints": [{"lon": 1.52, "lat": 42.5}, [1.53, 42.5]], "profile": "driving"}, "waypoints[1]"),
    ({"waypoints": [{"lon": 1.52, "lat": 42.5}, {"lon": 1.53, "lat": 42.5}], "profile": "flying"}, "profile"),
    ({"waypoints": [{"lon": 1.52, "lat": 42.5}, {"lon": 1.53, "lat": 42.5}]}, "profile"),
    ({"waypoints": [{"lon": 1.52, "lat": 42.5}, {"lon": 1.53, "lat": 42.5}], "profile": "driving",
      "geometry": "polyline5"}, "geometry"),
    ({"waypoints": [{"lon": 1.52, "lat": 42.5}, {"lon": 1.53, "lat": 42.5}], "profile": "driving",
      "language": "it"}, "language"),
    ({"waypoints": [{"lon": 1.52, "lat": 42.5}, {"lon": 1.53, "lat": 42.5}], "profile": "driving",
      "alternatives": "many"}, "alternatives"),
    ({"profile": "driving"}, "waypoints"),
])
def test_bad_requests_are_400(andorra_client, body, field):
    r = andorra_client.post(PATH, json=body)
    assert r.status_code == 400, r.text
    p = r.json()
    assert p["status"] == 400 and p["title"]
    assert any(e["field"] == field for e in p["errors"]), p


def test_unsupported_language_lists_supported(andorra_client):
    r = andorra_client.post(PATH, json={"waypoints": wp("andorra_la_vella", "encamp"), "profile": "driving",
                                        "language": "pt"})
    assert r.status_code == 400
    msg = r.json()["errors"][0]["message"]
    for lang in ("en", "hi", "fr", "de", "es", "ar"):
        assert lang in msg


def test_malformed_json_is_400(andorra_client):
    r = andorra_client.post(PATH, content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400


def test_no_road_is_422(andorra_client):
    # 5 km off the network, inside the bundle's area
    r = andorra_client.post(PATH, json={"waypoints": [{"lon": 1.5218, "lat": 42.5063}, {"lon": 1.44, "lat": 42.65}],
                                        "profile": "driving"})
    assert r.status_code == 422, r.text
    assert r.json()["status"] == 422 and "waypoints[1]" in r.json()["detail"]


def test_bad_credential_is_401(andorra_client):
    r = andorra_client.post(PATH, json={"waypoints": wp("andorra_la_vella", "encamp"), "profile": "driving"},
                            headers={"X-Gateway-Key": "wrong"})
    assert r.status_code == 401


def test_library_errors(andorra):
    with pytest.raises(InvalidRequest):
        andorra.directions(waypoints=wp("encamp"), profile="driving")
    with pytest.raises((Unsnappable, NoRoute)):
        andorra.directions(waypoints=[{"lon": 1.5218, "lat": 42.5063}, {"lon": 1.44, "lat": 42.65}], profile="driving")


def test_liechtenstein(liechtenstein, api_client):
    c = api_client(liechtenstein)
    doc = c.post(PATH, json={"waypoints": wp("balzers", "vaduz", "eschen", places=LIECHTENSTEIN),
                             "profile": "driving", "language": "fr"}).json()
    route = doc["routes"][0]
    assert len(route["legs"]) == 2
    assert 15_000 < route["distance_m"] < 40_000
    assert route["legs"][0]["steps"][-1]["maneuver"].startswith("destination")


def test_openapi_documents_directions(andorra_client):
    spec = andorra_client.get("/openapi.json").json()
    op = spec["paths"][PATH]["post"]
    assert "requestBody" in op and {"200", "400", "401", "422"} <= set(op["responses"])
    assert "DirectionsRequest" in spec["components"]["schemas"]
    assert "DirectionsResponse" in spec["components"]["schemas"]
