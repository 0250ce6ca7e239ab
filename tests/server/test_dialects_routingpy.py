"""routingpy's Valhalla and OSRM clients, unmodified (base URL and the gateway headers only), against a
real uvicorn server on loopback serving the Andorra bundle. Durations are checked against the spec
endpoints: the Valhalla dialect's equal them exactly, the OSRM dialect's within 1%."""

from __future__ import annotations

import numpy as np
import pytest
from shapely.geometry import Point, Polygon

from geoengine.geo import haversine_m
from tests.serving import thread_server

routingpy = pytest.importorskip("routingpy")

# reference pairs on Andorra's roads: (origin, destination), lon/lat
A = (1.5218, 42.5063)   # Andorra la Vella
B = (1.5333, 42.5107)   # Escaldes-Engordany
C = (1.5341, 42.5555)   # La Massana - Ordino road
D = (1.4921, 42.4630)   # Sant Julia de Loria
PAIRS = [(A, B), (A, C), (B, D), (C, D)]


@pytest.fixture(scope="module")
def server(andorra, settings, keystore, api_key):
    """(base_url, gateway headers) of a uvicorn server on loopback, in a thread of this process."""
    from geoengine.server.app import create_app

    andorra.warm()  # as `geoengine serve` does before it listens
    with thread_server(create_app(andorra, settings, keystore)) as port:
        yield f"http://127.0.0.1:{port}", {"X-Gateway-Key": api_key, "X-Gateway-Host": settings.gateway_host}


@pytest.fixture(scope="module")
def spec(api_client, andorra):
    """The in-process client of the spec endpoints (the reference)."""
    return api_client(andorra)


@pytest.fixture(scope="module")
def valhalla(server):
    url, headers = server
    return routingpy.Valhalla(base_url=url, headers=headers, timeout=120)


@pytest.fixture(scope="module")
def osrm(server):
    url, headers = server
    return routingpy.OSRM(base_url=url, headers=headers, timeout=120)


def _spec_route(spec, a, b, costing="auto") -> dict:
    r = spec.post("/route", json={"locations": [{"lon": a[0], "lat": a[1]}, {"lon": b[0], "lat": b[1]}],
                                  "costing": costing})
    assert r.status_code == 200, r.text
    return r.json()["trip"]["summary"]


def _crow(a, b) -> float:
    return float(haversine_m(a[1], a[0], b[1], b[0]))


# -- Valhalla client ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("a,b", PAIRS)
def test_valhalla_directions(valhalla, spec, a, b):
    d = valhalla.directions(locations=[list(a), list(b)], profile="auto")
    ref = _spec_route(spec, a, b)
    assert d.duration == int(ref["time"])  # exactly the spec endpoint's duration
    assert d.distance == int(ref["length"] * 1000)
    assert _crow(a, b) <= d.distance <= 4 * _crow(a, b) + 500
    start, end = d.geometry[0], d.geometry[-1]
    assert _crow(start, a) < 300 and _crow(end, b) < 300
    ms = [m for leg in d.raw["trip"]["legs"] for m in leg["maneuvers"]]
    assert ms and all(isinstance(m["type"], int) for m in ms)  # Valhalla's integer maneuver types
    assert ms[0]["type"] in (1, 2, 3) and ms[-1]["type"] in (4, 5, 6)


def test_valhalla_isochrones_default_arguments(valhalla):
    intervals = [300, 600, 900]
    isos = valhalla.isochrones(locations=list(A), profile="pedestrian", intervals=intervals)
    assert len(isos) == 3
    areas = {}
    for iso in isos:
        assert iso.interval_type == "time"
        poly = Polygon(iso.geometry[0] if isinstance(iso.geometry[0][0], list) else iso.geometry)
        assert poly.is_valid and poly.contains(Point(*A))
        areas[iso.interval] = poly.area
    # routingpy paired each contour with its own interval: larger interval, larger area
    assert sorted(areas) == intervals
    assert areas[300] < areas[600] < areas[900]
    # the raw response also carries the location points (the spec's show_locations default)
    kinds = [f["geometry"]["type"] for f in isos.raw["features"]]
    assert "Point" in kinds


def test_valhalla_matrix_equals_spec_matrix(valhalla, spec):
    locs = [A, B, C, D]
    m = valhalla.matrix(locations=[list(p) for p in locs], profile="auto")
    ref = spec.post("/matrix", json={"sources": [{"lon": p[0], "lat": p[1]} for p in locs],
                                     "targets": [{"lon": p[0], "lat": p[1]} for p in locs]}).json()
    want = [[c["time"] for c in row] for row in ref["sources_to_targets"]]
    assert m.durations == want
    assert all(m.durations[i][i] == 0 for i in range(len(locs)))
    for i in range(len(locs)):
        for j in range(len(locs)):
            if i != j:
                assert m.distances[i][j] >= 0.9 * _crow(locs[i], locs[j])
    assert m.raw["algorithm"] == "timedistancematrix"


# a car-usable street off Andorra's main car network (a piece the car cannot reach from the rest),
# pinned with a 2 m search radius
ISOLATED = (1.5282352, 42.5058251)


def test_valhalla_matrix_with_an_unreachable_pair(valhalla, spec):
    """An unreachable pair is an object with null time and distance (Valhalla's shape), which routingpy's
    parser reads; the spec's /matrix gives null for the same pair."""
    m = valhalla.matrix(locations=[list(A), valhalla.Waypoint(list(ISOLATED), search_radius=2)], profile="auto",
                        sources=[0], destinations=[1])
    assert m.durations == [[None]] and m.distances == [[None]]
    assert m.raw["sources_to_targets"][0][0] == {"from_index": 0, "to_index": 0, "time": None, "distance": None}
    ref = spec.post("/matrix", json={"sources": [{"lon": A[0], "lat": A[1]}],
                                     "targets": [{"lon": ISOLATED[0], "lat": ISOLATED[1], "search_radius": 2}]})
    assert ref.json()["sources_to_targets"] == [[None]]


def _trace(andorra, a, b, step=6):
    """Points along the real route from a to b (every `step`-th shape point)."""
    from geoengine.geo import decode_polyline

    doc = andorra.route(locations=[{"lon": a[0], "lat": a[1]}, {"lon": b[0], "lat": b[1]}],
                        directions_options={"directions_type": "none"})
    lat, lon = decode_polyline(doc["trip"]["legs"][0]["shape"], 6)
    idx = np.unique(np.r_[np.arange(0, len(lat), step), len(lat) - 1])
    return [[float(lon[i]), float(lat[i])] for i in idx]


def test_valhalla_trace_attributes(valhalla, andorra):
    pts = _trace(andorra, A, B)
    res = valhalla.trace_attributes(locations=pts, profile="auto")
    edges = res.matched_edges
    assert len(edges) >= 2
    assert all(e.use is not None for e in edges)
    assert {e.use.value for e in edges} <= {"road", "ramp", "track", "driveway", "alley", "parking_aisle",
                                            "drive_through", "ferry"}
    assert any(e.names for e in edges) and all(e.osm_way_id > 0 for e in edges)
    assert len(res.matched_points) == len(pts)
    assert sum(p.match_type.value == "matched" for p in res.matched_points) >= 0.8 * len(pts)
    # bicycle, the client's default profile, and the filters
    # (routingpy's parser needs edge.use and edge.sidewalk, whatever the filter)
    res = valhalla.trace_attributes(locations=pts, filters=["edge.names", "edge.use", "edge.sidewalk",
                                                            "matched.point", "shape"], filters_action="include")
    raw = res.raw
    assert all(set(e) == {"names", "use", "sidewalk"} for e in raw["edges"])
    assert all(set(p) == {"lat", "lon"} for p in raw["matched_points"])
    assert len(res.matched_edges) == len(edges)


# -- OSRM client --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("profile,costing,a,b", [("driving", "auto", a, b) for a, b in PAIRS] +
                         [(p, c, a, b) for p, c in (("walking", "pedestrian"), ("cycling", "bicycle")) for a, b in PAIRS[:2]])
def test_osrm_directions_within_one_percent(osrm, spec, a, b, profile, costing):
    d = osrm.directions(locations=[list(a), list(b)], profile=profile)
    ref = _spec_route(spec, a, b, costing)
    assert abs(d.raw["routes"][0]["duration"] - ref["time"]) <= 0.01 * ref["time"]
    assert abs(d.raw["routes"][0]["distance"] - ref["length"] * 1000) <= 0.01 * ref["length"] * 1000 + 1
    assert d.raw["code"] == "Ok"
    wps = d.raw["waypoints"]
    assert len(wps) == 2 and all(w["distance"] < 200 for w in wps)
    assert _crow(d.geometry[0], a) < 300 and _crow(d.geometry[-1], b) < 300


def test_osrm_directions_with_steps_geojson(osrm, spec):
    d = osrm.directions(locations=[list(A), list(C)], profile="driving", steps=True, geometries="geojson",
                        overview="full", annotations=True)
    route = d.raw["routes"][0]
    leg = route["legs"][0]
    steps = leg["steps"]
    assert steps[0]["maneuver"]["type"] == "depart" and steps[-1]["maneuver"]["type"] == "arrive"
    assert abs(sum(s["duration"] for s in steps) - leg["duration"]) <= 0.001 * leg["duration"] + 0.1 * len(steps)
    assert abs(sum(s["distance"] for s in steps) - leg["distance"]) <= 0.01 * leg["distance"] + 1
    for s in steps:
        m = s["maneuver"]
        assert 0 <= m["bearing_before"] <= 360 and 0 <= m["bearing_after"] <= 360
        assert len(m["location"]) == 2 and s["intersections"][0]["location"] == m["location"]
        assert s["geometry"]["type"] == "LineString"
    assert any(s["maneuver"].get("modifier") for s in steps[1:-1])
    ann = leg["annotation"]
    n = len(route["geometry"]["coordinates"])
    assert len(ann["distance"]) == n - 1 and abs(sum(ann["distance"]) - leg["distance"]) <= 0.02 * leg["distance"]
    assert d.geometry == route["geometry"]["coordinates"]


def test_osrm_matrix_within_one_percent(osrm, spec):
    locs = [A, B, C, D]
    m = osrm.matrix(locations=[list(p) for p in locs], profile="driving")
    ref = spec.post("/matrix", json={"sources": [{"lon": p[0], "lat": p[1]} for p in locs],
                                     "targets": [{"lon": p[0], "lat": p[1]} for p in locs]}).json()
    for i, row in enumerate(ref["sources_to_targets"]):
        for j, cell in enumerate(row):
            assert abs(m.durations[i][j] - cell["time"]) <= max(0.01 * cell["time"], 0.5)
            assert abs(m.distances[i][j] - cell["distance"] * 1000) <= max(0.01 * cell["distance"] * 1000, 1.0)
    sub = osrm.matrix(locations=[list(p) for p in locs], profile="driving", sources=[0, 1], destinations=[2, 3])
    assert sub.durations == [row[2:] for row in m.durations[:2]]


def test_osrm_trace_through_the_client(osrm, andorra):
    """routingpy 1.3's OSRM router has no match method: its HTTP client sends the /match/v1 request."""
    pts = _trace(andorra, A, B)
    coords = ";".join(f"{lo:.6f},{la:.6f}" for lo, la in pts)
    body = osrm.client._request(f"/match/v1/driving/{coords}", get_params={"overview": "full", "geometries": "geojson"})
    assert body["code"] == "Ok" and len(body["matchings"]) >= 1
    assert len(body["tracepoints"]) == len(pts)
    assert sum(t is not None for t in body["tracepoints"]) >= 0.8 * len(pts)
    ref = andorra.map_match(shape=[{"lon": lo, "lat": la} for lo, la in pts])
    assert abs(sum(m["duration"] for m in body["matchings"]) - ref["trip"]["summary"]["time"]) <= \
        0.01 * ref["trip"]["summary"]["time"]
    assert 0 <= body["matchings"][0]["confidence"] <= 1
