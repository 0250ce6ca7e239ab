"""POST /map_match and POST /map_match/attributes through the façade (in-process client, real Andorra
bundle): response shapes, and every 400/422 case with the problem body."""

from __future__ import annotations

import numpy as np
import pytest

from geoengine.geo import decode_polyline, encode_polyline


@pytest.fixture(scope="module")
def client(andorra, api_client):
    return api_client(andorra)


@pytest.fixture(scope="module")
def trace(andorra):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "routing"))
    from match_traces import route_trace

    return route_trace(andorra, (1.5211, 42.5063), (1.5730, 42.5450), seed=7, noise_m=10.0)


def _shape(lon, lat, n=120):
    return [{"lon": float(a), "lat": float(b), "time": 2.0 * i} for i, (a, b) in enumerate(zip(lon[:n], lat[:n], strict=False))]


def test_map_match_returns_a_route_shaped_trip(client, trace):
    r = client.post("/map_match", json={"shape": _shape(trace.lon, trace.lat), "costing": "auto",
                                        "directions_options": {"units": "miles", "language": "de"}, "id": "t1"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["id"] == "t1"
    trip = body["trip"]
    assert trip["units"] == "miles" and trip["language"] == "de" and trip["costing"] == "auto"
    assert len(trip["legs"]) == 1 and body["matched"] == {"points": 120, "unmatched": 0, "sections": 1}
    leg = trip["legs"][0]
    lat, lon = decode_polyline(leg["shape"], 6)
    assert len(lat) >= 2
    # the matched shape stays within the trace's neighbourhood
    assert np.abs(lat.min() - trace.lat[:120].min()) < 0.001
    # the noisy first trace point may lie beside the road: start, start_left or start_right
    assert leg["maneuvers"][0]["type_name"].startswith("start") and leg["maneuvers"][-1]["type_name"].startswith("destination")
    assert leg["maneuvers"][0]["type"] in (1, 2, 3) and leg["maneuvers"][-1]["type"] in (4, 5, 6)
    assert trip["summary"]["length"] > 0 and trip["summary"]["time"] > 0
    assert [loc["original_index"] for loc in trip["locations"]] == [0, 119]


def test_map_match_attributes(client, trace):
    r = client.post("/map_match/attributes", json={"encoded_polyline": encode_polyline(trace.lat[:120],
                                                                                         trace.lon[:120], 6)})
    assert r.status_code == 200, r.text
    body = r.json()
    edges, points = body["edges"], body["matched_points"]
    assert len(points) == 120
    assert {p["type"] for p in points} <= {"matched", "interpolated"}
    assert all(0 <= p["edge_index"] < len(edges) for p in points)
    assert all(0.0 <= p["distance_along_edge"] <= 1.0 for p in points)
    assert all(p["distance_from_trace_point"] <= 50.0 for p in points)
    for e in edges:
        assert set(e) >= {"names", "length", "speed", "road_class", "way_id", "begin_shape_index", "end_shape_index"}
        assert e["way_id"] > 0 and e["begin_shape_index"] <= e["end_shape_index"]
    lat, _ = decode_polyline(body["shape"], 6)
    assert edges[-1]["end_shape_index"] == len(lat) - 1
    # most of the way ids are those of the route the trace came from
    true_ways = set(np.asarray(client.app.state.engine.graph.seg_way)[trace.true_edge[:120] >> 1].tolist())
    assert sum(e["way_id"] in true_ways for e in edges) >= 0.9 * len(edges)


@pytest.mark.parametrize("mode", ["map_snap", "edge_walk", "walk_or_snap"])
def test_shape_match_modes_on_an_exact_shape(client, trace, mode):
    body = {"encoded_polyline": encode_polyline(trace.shape_lat, trace.shape_lon, 6), "shape_match": mode}
    r = client.post("/map_match/attributes", json=body)
    assert r.status_code == 200, r.text
    ids = [e["id"] for e in r.json()["edges"]]
    assert ids == trace.edges.tolist()


def test_edge_walk_on_a_noisy_trace_is_422(client, trace):
    r = client.post("/map_match", json={"shape": _shape(trace.lon, trace.lat), "shape_match": "edge_walk"})
    assert r.status_code == 422
    body = r.json()
    assert body["status"] == 422 and body["errors"][0]["field"].startswith("shape[")
    r = client.post("/map_match", json={"shape": _shape(trace.lon, trace.lat), "shape_match": "walk_or_snap"})
    assert r.status_code == 200


PT = {"lon": 1.5212, "lat": 42.5063}
PT2 = {"lon": 1.5230, "lat": 42.5065}


@pytest.mark.parametrize("body, field", [
    ({}, "shape"),
    ({"costing": "auto"}, "shape"),
    ({"shape": [PT]}, "shape"),
    ({"shape": []}, "shape"),
    ({"shape": [PT, PT2], "encoded_polyline": encode_polyline([42.5063, 42.5065], [1.5212, 1.5230], 6)}, "shape"),
    ({"encoded_polyline": encode_polyline([42.5063], [1.5212], 6)}, "encoded_polyline"),
    ({"encoded_polyline": "not a polyline"}, "encoded_polyline"),
    ({"shape": [PT, PT2], "costing": "truck"}, "costing"),
    ({"shape": [PT, PT2], "costing": "helicopter"}, "costing"),
    ({"shape": [PT, PT2], "shape_match": "teleport"}, "shape_match"),
    ({"shape": [PT, PT2], "trace_options": {"search_radius": 500}}, "trace_options.search_radius"),
    ({"shape": [PT, PT2], "trace_options": {"gps_accuracy": 0}}, "trace_options.gps_accuracy"),
    ({"shape": [PT, PT2], "trace_options": {"breakage_distance": -5}}, "trace_options.breakage_distance"),
    ({"shape": [PT, PT2], "trace_options": {"interpolation_distance": "far"}}, "trace_options.interpolation_distance"),
    ({"shape": [PT, PT2], "trace_options": {"search_radious": 20}}, "trace_options.search_radious"),
    ({"shape": [PT, {"lon": 200, "lat": 42.5}]}, "shape[1].lon"),
    ({"shape": [PT, {"lat": 42.5}]}, "shape[1].lon"),
    ({"shape": [PT, PT2], "units": "furlongs"}, "units"),
    ({"shape": [PT, PT2], "costing_options": {"auto": {"use_highways": 7}}}, None),
])
@pytest.mark.parametrize("path", ["/map_match", "/map_match/attributes"])
def test_bad_requests_are_400(client, path, body, field):
    r = client.post(path, json=body)
    assert r.status_code == 400, r.text
    problem = r.json()
    assert problem["status"] == 400 and problem["title"] and problem["detail"]
    if field is not None:
        assert field in [e["field"] for e in problem["errors"]], problem


@pytest.mark.parametrize("path", ["/map_match", "/map_match/attributes"])
def test_points_in_the_sea_are_422(client, path):
    # Andorra has no sea; these points are in the Mediterranean, far from any road of the bundle
    r = client.post(path, json={"shape": [{"lon": 3.5, "lat": 42.0}, {"lon": 3.51, "lat": 42.01}]})
    assert r.status_code == 422
    assert r.json()["status"] == 422


def test_a_trace_whose_points_are_all_isolated_is_422(client):
    # two points with roads nearby but too far apart (beyond breakage_distance) to be one section
    body = {"shape": [{"lon": 1.5212, "lat": 42.5063}, {"lon": 1.5980, "lat": 42.5360}],
            "trace_options": {"breakage_distance": 1000}}
    r = client.post("/map_match", json=body)
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "shape"


def test_openapi_documents_the_endpoints(client):
    doc = client.get("/openapi.json").json()
    for path in ("/map_match", "/map_match/attributes"):
        post = doc["paths"][path]["post"]
        assert "requestBody" in post
        assert {"200", "400", "422"} <= set(post["responses"])
