"""The OSRM dialect over HTTP (in-process, gateway headers preset) on Andorra: route, table, match,
nearest and trip with OSRM's options and response shapes, durations within 1% of the spec endpoints,
OSRM's error codes (HTTP 400, `{code, message}`, never a 500), the gateway's counting, OpenAPI."""

from __future__ import annotations

import os

import numpy as np
import pytest

from geoengine.geo import decode_polyline, encode_polyline, haversine_m

A = (1.5218, 42.5063)
B = (1.5333, 42.5107)
C = (1.5341, 42.5555)
D = (1.4921, 42.4630)


def coords(*pts) -> str:
    return ";".join(f"{lo},{la}" for lo, la in pts)


@pytest.fixture(scope="module")
def client(api_client, andorra):
    andorra.warm()  # as the server does at start-up: compile the kernels before the timed requests
    return api_client(andorra)


def ok(r) -> dict:
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["code"] == "Ok"
    return body


def osrm_error(r, code) -> dict:
    assert r.status_code == 400, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert body["code"] == code and body["message"], body
    assert "Traceback" not in r.text
    return body


def _spec_summary(client, pts, costing="auto") -> dict:
    r = client.post("/route", json={"locations": [{"lon": lo, "lat": la} for lo, la in pts], "costing": costing})
    return r.json()["trip"]


# -- route ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("profile,costing", [("driving", "auto"), ("car", "auto"), ("foot", "pedestrian"),
                                             ("bike", "bicycle"), ("truck", "truck"), ("motor_scooter", "motor_scooter")])
def test_route_profiles_within_one_percent(client, profile, costing):
    body = ok(client.get(f"/route/v1/{profile}/{coords(A, C)}"))
    ref = _spec_summary(client, [A, C], costing)["summary"]
    route = body["routes"][0]
    assert abs(route["duration"] - ref["time"]) <= 0.01 * ref["time"]
    assert abs(route["distance"] - ref["length"] * 1000) <= 0.01 * ref["length"] * 1000 + 1
    assert route["weight_name"] == "duration" and len(route["legs"]) == 1
    assert route["legs"][0]["steps"] == []
    lat, lon = decode_polyline(route["geometry"], 5)  # default geometries=polyline (precision 5)
    assert haversine_m(lat[0], lon[0], A[1], A[0]) < 300 and haversine_m(lat[-1], lon[-1], C[1], C[0]) < 300
    for w, p in zip(body["waypoints"], (A, C), strict=True):
        assert set(w) >= {"hint", "distance", "name", "location"}
        assert abs(haversine_m(w["location"][1], w["location"][0], p[1], p[0]) - w["distance"]) < 1.0


def test_route_multi_leg_steps_and_options(client):
    pts = (A, B, C)
    body = ok(client.get(f"/route/v1/driving/{coords(*pts)}",
                         params={"steps": "true", "geometries": "polyline6", "overview": "full",
                                 "annotations": "duration,distance,speed", "alternatives": "false"}))
    route = body["routes"][0]
    ref = _spec_summary(client, pts)
    assert len(route["legs"]) == 2
    for leg, ref_leg in zip(route["legs"], ref["legs"], strict=True):
        assert abs(leg["duration"] - ref_leg["summary"]["time"]) <= 0.01 * ref_leg["summary"]["time"]
        steps = leg["steps"]
        assert steps[0]["maneuver"]["type"] == "depart" and steps[-1]["maneuver"]["type"] == "arrive"
        assert steps[-1]["distance"] == 0
        kinds = {s["maneuver"]["type"] for s in steps}
        assert kinds <= {"depart", "arrive", "turn", "new name", "continue", "on ramp", "off ramp", "fork", "merge",
                         "roundabout", "exit roundabout", "notification", "end of road", "rotary"}
        for s in steps:
            lat, lon = decode_polyline(s["geometry"], 6)
            assert np.allclose([lon[0], lat[0]], s["maneuver"]["location"], atol=2e-6)
            assert s["mode"] == "driving" and s["driving_side"] == "right"
        assert leg["summary"]
        ann = leg["annotation"]
        assert set(ann) == {"duration", "distance", "speed"}
        assert abs(sum(ann["duration"]) - leg["duration"]) <= 0.01 * leg["duration"] + 1
    assert len(body["waypoints"]) == 3
    full = decode_polyline(route["geometry"], 6)[0]
    simple = ok(client.get(f"/route/v1/driving/{coords(*pts)}"))["routes"][0]
    assert len(decode_polyline(simple["geometry"], 5)[0]) < len(full)  # simplified overview
    none = ok(client.get(f"/route/v1/driving/{coords(*pts)}", params={"overview": "false", "skip_waypoints": "true"}))
    assert "geometry" not in none["routes"][0] and "waypoints" not in none


def test_route_polyline_coordinates_bearings_radiuses_waypoints(client):
    poly = encode_polyline([A[1], B[1], C[1]], [A[0], B[0], C[0]], 5)
    body = ok(client.get(f"/route/v1/driving/polyline({poly})", params={"radiuses": "50;unlimited;",
                                                                         "bearings": ";;", "waypoints": "0;2",
                                                                         "approaches": "curb;;unrestricted"}))
    assert len(body["routes"][0]["legs"]) == 1 and len(body["waypoints"]) == 2
    poly6 = encode_polyline([A[1], C[1]], [A[0], C[0]], 6)
    assert ok(client.get(f"/route/v1/driving/polyline6({poly6}).json"))["routes"][0]["duration"] > 0


def test_route_alternatives(client):
    body = ok(client.get(f"/route/v1/driving/{coords(A, C)}", params={"alternatives": "2"}))
    assert 1 <= len(body["routes"]) <= 3
    durations = [r["duration"] for r in body["routes"]]
    assert durations[0] == min(durations)


# -- table ------------------------------------------------------------------------------------------------------
def test_table_within_one_percent_and_indices(client):
    pts = (A, B, C, D)
    body = ok(client.get(f"/table/v1/driving/{coords(*pts)}", params={"annotations": "duration,distance"}))
    ref = client.post("/matrix", json={"sources": [{"lon": lo, "lat": la} for lo, la in pts],
                                       "targets": [{"lon": lo, "lat": la} for lo, la in pts]}).json()
    for i, row in enumerate(ref["sources_to_targets"]):
        for j, cell in enumerate(row):
            assert abs(body["durations"][i][j] - cell["time"]) <= max(0.01 * cell["time"], 0.5)
            assert abs(body["distances"][i][j] - cell["distance"] * 1000) <= max(0.01 * cell["distance"] * 1000, 1)
    assert len(body["sources"]) == 4 and len(body["destinations"]) == 4
    # waypoint names: the street each point snapped to, as a route through the same points names it
    route_wps = ok(client.get(f"/route/v1/driving/{coords(*pts)}"))["waypoints"]
    for w, d, r in zip(body["sources"], body["destinations"], route_wps, strict=True):
        assert w["name"] == d["name"] == r["name"] and w["location"] == r["location"]
    assert any(w["name"] for w in body["sources"])
    sub = ok(client.get(f"/table/v1/driving/{coords(*pts)}", params={"sources": "3;0", "destinations": "1",
                                                                     "scale_factor": "2"}))
    assert "distances" not in sub
    assert sub["durations"] == [[round(2 * body["durations"][3][1], 1)], [round(2 * body["durations"][0][1], 1)]] or \
        np.allclose(sub["durations"], [[2 * body["durations"][3][1]], [2 * body["durations"][0][1]]], atol=0.2)
    walk = ok(client.get(f"/table/v1/walking/{coords(A, B)}"))
    assert walk["durations"][0][1] > body["durations"][0][1]


ISOLATED = (1.5282352, 42.5058251)  # a car street off the main car network (pinned with radius 2 m)


def test_table_unreachable_and_fallback_speed(client):
    path = f"/table/v1/driving/{coords(A, ISOLATED)}"
    body = ok(client.get(path, params={"radiuses": ";2", "sources": "0", "destinations": "1",
                                       "annotations": "duration,distance"}))
    assert body["durations"] == [[None]] and body["distances"] == [[None]]
    fb = ok(client.get(path, params={"radiuses": ";2", "sources": "0", "destinations": "1",
                                     "annotations": "duration,distance", "fallback_speed": "10"}))
    crow = float(haversine_m(A[1], A[0], ISOLATED[1], ISOLATED[0]))
    assert fb["fallback_speed_cells"] == [[0, 0]]
    assert abs(fb["distances"][0][0] - crow) < 1 and abs(fb["durations"][0][0] - crow / 10) < 0.2
    osrm_error(client.get(f"/route/v1/driving/{coords(A, ISOLATED)}", params={"radiuses": ";2"}), "NoRoute")


# -- nearest, trip, match ---------------------------------------------------------------------------------------------
def test_nearest(client):
    body = ok(client.get(f"/nearest/v1/driving/{coords(A)}", params={"number": "3"}))
    wps = body["waypoints"]
    assert 1 <= len(wps) <= 3
    d = [w["distance"] for w in wps]
    assert d == sorted(d) and d[0] < 200
    assert all(len(w["nodes"]) == 2 for w in wps)


def test_trip_roundtrip_and_fixed_ends(client):
    pts = (A, C, B, D)
    body = ok(client.get(f"/trip/v1/driving/{coords(*pts)}"))
    trip = body["trips"][0]
    assert len(trip["legs"]) == 4  # back to the start
    idx = sorted(w["waypoint_index"] for w in body["waypoints"])
    assert idx == [0, 1, 2, 3] and body["waypoints"][0]["waypoint_index"] == 0
    assert all(w["trips_index"] == 0 for w in body["waypoints"])
    fixed = ok(client.get(f"/trip/v1/driving/{coords(*pts)}",
                          params={"roundtrip": "false", "source": "first", "destination": "last"}))
    assert len(fixed["trips"][0]["legs"]) == 3 and fixed["waypoints"][3]["waypoint_index"] == 3
    spec = client.post("/optimised_route", json={"locations": [{"lon": lo, "lat": la} for lo, la in pts]}).json()
    assert abs(fixed["trips"][0]["duration"] - spec["trip"]["summary"]["time"]) <= 0.01 * spec["trip"]["summary"]["time"]
    osrm_error(client.get(f"/trip/v1/driving/{coords(*pts)}", params={"roundtrip": "false"}), "NotImplemented")


def test_match(client, andorra):
    doc = andorra.route(locations=[{"lon": A[0], "lat": A[1]}, {"lon": B[0], "lat": B[1]}],
                        directions_options={"directions_type": "none"})
    lat, lon = decode_polyline(doc["trip"]["legs"][0]["shape"], 6)
    idx = np.unique(np.r_[np.arange(0, len(lat), 5), len(lat) - 1])
    pts = list(zip(lon[idx].tolist(), lat[idx].tolist(), strict=True))
    ts = ";".join(str(1700000000 + 5 * i) for i in range(len(pts)))
    body = ok(client.get(f"/match/v1/driving/{coords(*pts)}", params={"timestamps": ts, "steps": "true",
                                                                      "radiuses": ";".join(["10"] * len(pts))}))
    assert body["matchings"] and len(body["tracepoints"]) == len(pts)
    tp = [t for t in body["tracepoints"] if t is not None]
    assert len(tp) >= 0.8 * len(pts) and all(t["matchings_index"] == 0 for t in tp)
    assert [t["waypoint_index"] for t in tp] == list(range(len(tp)))
    m = body["matchings"][0]
    assert m["legs"][0]["steps"][0]["maneuver"]["type"] == "depart"
    # as OSRM: one leg between each two consecutive matched trace points, adding up to the matching
    assert len(m["legs"]) == len(tp) - 1
    assert abs(sum(leg["duration"] for leg in m["legs"]) - m["duration"]) <= 0.1 * len(m["legs"])
    for leg, a, b in zip(m["legs"], tp[:-1], tp[1:], strict=True):
        straight = haversine_m(a["location"][1], a["location"][0], b["location"][1], b["location"][0])
        assert leg["distance"] >= straight - 1.0 and leg["steps"][-1]["maneuver"]["type"] == "arrive"
    spec = client.post("/trace_route", json={"shape": [{"lon": lo, "lat": la} for lo, la in pts], "costing": "auto",
                                             "shape_match": "map_snap"}).json()["trip"]["summary"]
    assert abs(m["duration"] - spec["time"]) <= 0.02 * spec["time"] + 1


# -- errors --------------------------------------------------------------------------------------------------------
ERRORS = [
    (f"/route/v1/driving/{coords(A)}", "InvalidValue"),
    ("/route/v1/driving/1.5,abc;1.6,42.5", "InvalidQuery"),  # osrm-routed 26.10's code (test_peer_answers.py)
    ("/route/v1/driving/1.5;1.6,42.5", "InvalidQuery"),
    ("/route/v1/driving/polyline(abc", "InvalidQuery"),
    ("/route/v1/driving/200,42.5;1.5,42.5", "InvalidValue"),
    (f"/route/v2/driving/{coords(A, B)}", "InvalidVersion"),
    (f"/route/v1/rocket/{coords(A, B)}", "InvalidOptions"),
    (f"/route/v1/driving/{coords(A, B)}?colour=red", "InvalidQuery"),
    (f"/route/v1/driving/{coords(A, B)}?steps=yes", "InvalidOptions"),
    (f"/route/v1/driving/{coords(A, B)}?geometries=kml", "InvalidOptions"),
    (f"/route/v1/driving/{coords(A, B)}?overview=some", "InvalidOptions"),
    (f"/route/v1/driving/{coords(A, B)}?radiuses=5", "InvalidOptions"),
    (f"/route/v1/driving/{coords(A, B)}?radiuses=5;-1", "InvalidOptions"),
    (f"/route/v1/driving/{coords(A, B)}?bearings=10,20;400,10", "InvalidOptions"),
    (f"/route/v1/driving/{coords(A, B)}?approaches=curb;sideways", "InvalidOptions"),
    (f"/route/v1/driving/{coords(A, B)}?alternatives=-1", "InvalidOptions"),
    (f"/route/v1/driving/{coords(A, B)}?annotations=nodez", "InvalidOptions"),
    (f"/route/v1/driving/{coords(A, B)}?waypoints=1", "InvalidValue"),
    (f"/route/v1/driving/{coords(A, B)}?exclude=bridges", "InvalidValue"),
    (f"/route/v1/driving/{coords(A, (1.6, 42.9))}", "NoSegment"),
    ("/route/v1/driving/" + ";".join([f"{A[0]},{A[1]}"] * 501), "TooBig"),
    (f"/table/v1/driving/{coords(A, B)}?sources=0;5", "InvalidOptions"),
    (f"/table/v1/driving/{coords(A, B)}?annotations=speed", "InvalidOptions"),
    (f"/table/v1/driving/{coords(A, B)}?fallback_speed=0", "InvalidOptions"),
    (f"/trip/v1/taxi/{coords(A, B)}", "InvalidValue"),
    (f"/match/v1/truck/{coords(A, B)}", "InvalidValue"),
    ("/table/v1/driving/" + ";".join([f"{A[0]},{A[1]}"] * 101), "TooBig"),
    (f"/nearest/v1/driving/{coords(A, B)}", "TooBig"),
    (f"/nearest/v1/driving/{coords(A)}?number=0", "InvalidOptions"),
    (f"/nearest/v1/driving/{coords((1.6, 42.9))}", "NoSegment"),
    (f"/match/v1/driving/{coords(A, B)}?timestamps=5;1", "InvalidValue"),
    (f"/match/v1/driving/{coords(A, B)}?timestamps=a;b", "InvalidOptions"),
    (f"/match/v1/driving/{coords((1.6, 42.9), (1.61, 42.91))}", "NoSegment"),
    (f"/trip/v1/driving/{coords(A, B)}?source=last", "InvalidOptions"),
    (f"/trip/v1/driving/{coords(A, B)}?roundtrip=maybe", "InvalidOptions"),
]


@pytest.mark.parametrize("path,code", ERRORS)
def test_errors(client, path, code):
    osrm_error(client.get(path), code)


def test_counted_in_the_routing_pool(andorra, tmp_path):
    from starlette.testclient import TestClient

    from geoengine.config import Settings
    from geoengine.gateway import KeyStore, load_plans
    from geoengine.server.app import create_app

    settings = Settings(home=tmp_path, gateway_host="h.test")
    store = KeyStore(settings.state, load_plans(None))
    c = TestClient(create_app(andorra, settings, store), raise_server_exceptions=False)
    key, rec = store.create("starter")
    h = {"X-Gateway-Key": key, "X-Gateway-Host": "h.test"}
    for service in ("route", "table", "match", "trip"):
        c.get(f"/{service}/v1/driving/x", headers=h)
    c.get(f"/nearest/v1/driving/{coords(A)}", headers=h)
    usage = store.usage(rec.id)
    assert sum(v for k, v in usage.items() if k.startswith("routing")) == 4
    r = c.get(f"/table/v1/driving/{coords(A, B)}")
    assert r.status_code == 401 and r.json()["status"] == 401
    assert c.get(f"/route/v1/driving/{coords(A, B)}").status_code == 403


def test_openapi(client):
    paths = client.get("/openapi.json").json()["paths"]
    for service in ("route", "table", "match", "nearest", "trip"):
        op = paths[f"/{service}/{{version}}/{{profile}}/{{coordinates}}"]["get"]
        names = {p["name"] for p in op["parameters"]}
        assert {"version", "profile", "coordinates", "radiuses"} <= names
        assert "NoSegment" in str(op["responses"]["400"])


def test_annotation_speeds_are_the_edges_speeds(client, andorra):
    """Per-segment durations come from the edge each segment lies on: speeds differ road by road, in
    the ratio of the edges' own speeds, and the durations still add up to the leg."""
    body = ok(client.get(f"/route/v1/driving/{coords(A, C)}",
                         params={"annotations": "duration,distance,speed", "overview": "full",
                                 "geometries": "polyline6"}))
    leg = body["routes"][0]["legs"][0]
    ann = leg["annotation"]
    assert abs(sum(ann["duration"]) - leg["duration"]) <= 0.01 * leg["duration"] + 1
    typed = andorra.compute_route(locations=[{"lon": A[0], "lat": A[1]}, {"lon": C[0], "lat": C[1]}]).best.legs[0]
    assert len(ann["distance"]) == len(typed.lon) - 1
    prof = andorra.router.profile("auto")
    counts = typed.shape_end - typed.shape_begin
    edge_of = np.repeat(typed.edges, counts)
    edge_speed = prof.length[edge_of] / prof.time[edge_of]  # m/s of the edge each segment lies on
    dist, speed = np.array(ann["distance"]), np.array(ann["speed"])
    long = dist >= 30.0  # rounding to 0.1 m/s and 0.1 m is negligible on these
    ratio = speed[long] / edge_speed[long]
    assert long.sum() >= 20 and np.ptp(edge_speed[long]) > 3.0  # several kinds of road
    # one factor for the whole leg: the turn delays the edges' times leave out
    assert 0.6 < np.median(ratio) <= 1.0 + 1e-6 and np.ptp(ratio) < 0.02 * np.median(ratio) + 0.01


def test_step_intersections_list_every_road_arm(client, andorra):
    """Each step's intersections: its maneuver point, then the junctions it passes, each with every road
    arm at the node (as many as the node's directed out-edges), sorted bearings, `entry` per arm, and
    the arms the route uses: in (never enterable: a U-turn) and out (enterable), the out arm at the
    maneuver's own bearing_after."""
    body = ok(client.get(f"/route/v1/driving/{coords(A, C)}", params={"steps": "true", "overview": "full"}))
    steps = body["routes"][0]["legs"][0]["steps"]
    g = andorra.graph
    degree = np.diff(np.asarray(g.node_out_offsets))
    node_at = {(round(float(lo), 6), round(float(la), 6)): d
               for lo, la, d in zip(np.asarray(g.node_lon), np.asarray(g.node_lat), degree, strict=True)}
    passed, junctions = 0, 0
    for s in steps:
        kind = s["maneuver"]["type"]
        for k, it in enumerate(s["intersections"]):
            assert len(it["bearings"]) == len(it["entry"]) and it["bearings"] == sorted(it["bearings"])
            if kind in ("depart", "arrive") and k == 0:
                continue
            assert it["entry"][it["out"]] and not it["entry"][it["in"]]
            assert len(it["bearings"]) == node_at[tuple(it["location"])]  # every arm of the node
            junctions += len(it["bearings"]) >= 3
            if k == 0:
                assert it["location"] == s["maneuver"]["location"]
                assert it["bearings"][it["out"]] == s["maneuver"]["bearing_after"]
            else:
                passed += 1
    assert junctions >= 5 and passed >= 5


def test_table_honours_bearings_as_route_does(client):
    """`bearings` on a table's source snaps it as a route's: the same durations as /route with them."""
    pts = ((1.5333, 42.5107), C, A)  # the first on a two-way street
    for bearing in ("270,90", "90,90"):
        table = ok(client.get(f"/table/v1/driving/{coords(*pts)}", params={"bearings": f"{bearing};;",
                                                                          "sources": "0"}))
        for j in (1, 2):
            route = ok(client.get(f"/route/v1/driving/{coords(pts[0], pts[j])}", params={"bearings": f"{bearing};"}))
            assert abs(table["durations"][0][j] - route["routes"][0]["duration"]) <= 0.1
    plain = ok(client.get(f"/table/v1/driving/{coords(*pts)}", params={"sources": "0"}))
    west = ok(client.get(f"/table/v1/driving/{coords(*pts)}", params={"bearings": "270,90;;", "sources": "0"}))
    assert plain["durations"] != west["durations"]


def _arms_numpy(g, usable, e_in, e_out, before, after):
    """A plain numpy reading of one intersection (what the junction kernel must give)."""
    v = int(g.edge_src[e_out])
    arms = np.asarray(g.node_out_edges[g.node_out_offsets[v]:g.node_out_offsets[v + 1]]).astype(np.int64)
    bearings = np.round(np.asarray(g.edge_bearing_start)[arms]).astype(np.int64) % 360
    back = e_in ^ 1
    if after >= 0:
        bearings[arms == e_out] = after
    if before >= 0:
        bearings[arms == back] = (before + 180) % 360
    order = np.argsort(bearings, kind="stable")
    arms, bearings = arms[order], bearings[order]
    i_in, i_out = np.flatnonzero(arms == back), np.flatnonzero(arms == e_out)
    entry = usable[arms] & (arms != back)
    return bearings.tolist(), entry.tolist(), int(i_in[0]) if len(i_in) else -1, int(i_out[0]) if len(i_out) else -1


def test_junction_kernel_equals_a_numpy_reading_on_the_real_graph(andorra):
    """Edge pairs meeting at 3,000 real Andorra nodes (U-turns included) and pairs that do not meet, with
    and without the maneuver's bearings on the route's arms: the kernel's bearings, entries and
    positions are numpy's (round half to even, stable sort)."""
    from geoengine.narrative.junctions import arms_table as _arms_table
    from geoengine.narrative.junctions import junction_arms as _junction_arms

    g = andorra.graph
    rng = np.random.default_rng(3)
    usable = andorra.router.profile("auto").usable
    offs, out = np.asarray(g.node_out_offsets), np.asarray(g.node_out_edges).astype(np.int64)
    nodes = rng.choice(np.flatnonzero(np.diff(offs) > 0), 3000)
    e_out = out[offs[nodes] + rng.integers(0, np.diff(offs)[nodes])]
    e_in = out[offs[nodes] + rng.integers(0, np.diff(offs)[nodes])] ^ 1  # arrives at the node
    stray = rng.choice(len(g.edge_src), 200)
    e_in = np.concatenate([e_in, stray])
    e_out = np.concatenate([e_out, rng.choice(len(g.edge_src), 200)])
    before = rng.integers(-1, 360, len(e_in))
    after = rng.integers(-1, 360, len(e_in))
    checked = met = 0
    for only in (False, True):
        start, bear, entry, i_in, i_out = (a.tolist() for a in _arms_table(g, usable, e_in, e_out, before, after, only))
        for q in range(len(e_in)):
            s, t = start[q], start[q + 1]
            v = int(g.edge_src[e_out[q]])
            if only and offs[v + 1] - offs[v] <= 2:
                assert s == t
                continue
            want = _arms_numpy(g, usable, int(e_in[q]), int(e_out[q]), int(before[q]), int(after[q]))
            assert (bear[s:t], entry[s:t], i_in[q], i_out[q]) == want
            checked += 1
            met += i_in[q] >= 0
    assert checked >= 4000 and met >= 3000
    # half-way bearings round to even, as numpy does
    bs = np.array([0.5, 1.5, 359.5, 2.5], np.float32)
    start, bear, entry, i_in, i_out = _junction_arms(
        np.array([0, 4]), np.array([0, 1, 2, 3]), bs, np.ones(4, bool), True, np.zeros(4, np.int32), np.array([1]),
        np.array([2]), np.array([-1]), np.array([-1]), False)
    assert bear.tolist() == sorted((np.round(bs).astype(np.int64) % 360).tolist()) == [0, 0, 2, 2]


@pytest.fixture(scope="module")
def andorra_ways():
    """(consecutive node pairs of every way, node locations) read from the extract with pyosmium."""
    import osmium

    from tests.conftest import data_file

    pairs, locs = set(), {}
    for obj in osmium.FileProcessor(str(data_file("andorra/andorra.osm.pbf"))).with_locations():
        if obj.is_way():
            refs = [(n.ref, n.lon, n.lat) for n in obj.nodes if n.location.valid()]
            for (u, *lu), (v, *lv) in zip(refs[:-1], refs[1:], strict=False):
                pairs.add((u, v))
                pairs.add((v, u))
                locs[u], locs[v] = tuple(lu), tuple(lv)
    return pairs, locs


def _off_segment_m(p, a, b) -> float:
    """Metres from point p to segment ab (lon, lat; local equirectangular)."""
    k = np.cos(np.radians(a[1]))
    px, py, ax, ay, bx, by = p[0] * k, p[1], a[0] * k, a[1], b[0] * k, b[1]
    dx, dy = bx - ax, by - ay
    t = 0.0 if dx == dy == 0 else min(max(((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy), 0.0), 1.0)
    return float(np.hypot(ax + t * dx - px, ay + t * dy - py) * 111_195.0)


@pytest.mark.parametrize("pts", [(A, B), (D, C), ((1.5200, 42.5328), (1.5090, 42.5469)), ((1.5297, 42.5104), (1.4958, 42.4916))])
def test_route_nodes_annotation_names_the_osm_segment_of_every_geometry_segment(client, andorra_ways, pts):
    """`annotations=nodes` (and `true`) gives, as OSRM does, one OSM node id per coordinate of the leg's
    geometry: each consecutive pair is a segment of an OSM way, and the geometry's segment lies on it
    (the snapped ends too: the first id is the start of the segment the origin snapped onto)."""
    pairs, locs = andorra_ways
    body = ok(client.get(f"/route/v1/driving/{coords(*pts)}", params={"annotations": "true", "overview": "full",
                                                                       "geometries": "geojson"}))
    route = body["routes"][0]
    ann = route["legs"][0]["annotation"]
    line = route["geometry"]["coordinates"]
    nodes = ann["nodes"]
    assert len(nodes) == len(line) == len(ann["distance"]) + 1
    assert {"duration", "distance", "speed", "weight", "datasources", "metadata"} <= set(ann)
    assert ann["metadata"]["datasource_names"] and len(ann["datasources"]) == len(ann["distance"])
    for k, (u, v) in enumerate(zip(nodes[:-1], nodes[1:], strict=True)):
        assert (u, v) in pairs or (u == v and line[k] == line[k + 1]), (k, u, v)
        for p in (line[k], line[k + 1]):
            assert _off_segment_m(p, locs[u], locs[v]) < 0.5, (k, u, v, p)
    only = ok(client.get(f"/route/v1/driving/{coords(*pts)}", params={"annotations": "nodes"}))
    assert only["routes"][0]["legs"][0]["annotation"] == {"nodes": nodes}


def test_route_nodes_annotation_per_leg(client, andorra_ways):
    pairs, _ = andorra_ways
    body = ok(client.get(f"/route/v1/driving/{coords(A, B, C)}", params={"annotations": "nodes,distance"}))
    legs = body["routes"][0]["legs"]
    assert len(legs) == 2
    for leg in legs:
        nodes = leg["annotation"]["nodes"]
        assert len(nodes) == len(leg["annotation"]["distance"]) + 1
        assert all(u == v or (u, v) in pairs for u, v in zip(nodes[:-1], nodes[1:], strict=True))


def test_which_of_several_bad_options_is_reported_does_not_depend_on_the_hash_seed():
    import subprocess
    import sys

    code = ("from geoengine.dialects.osrm import parse_query, OsrmError\n"
            "try:\n"
            "    parse_query('route', {'overview': 'maybe', 'steps': 'y', 'geometries': 'x', 'continue_straight': 'z'}, 2)\n"
            "except OsrmError as e:\n"
            "    print(e.args)\n")
    seen = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in (1, 2, 3, 4, 5, 6)}
    assert len(seen) == 1 and "must be" in seen.pop()
