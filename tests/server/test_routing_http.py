"""POST /route, POST /matrix, GET /costings, GET /costing/options/{costing} over in-process HTTP on the
Liechtenstein bundle: response shapes, every 400/404/422 with its field path, and agreement between
the façade and the library."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import numpy as np
import pytest

from geoengine.geo import decode_polyline

PROBLEM_KEYS = {"type", "title", "status", "detail"}
# Vaduz (Adlerkreisel, Äulestrasse) and Schaan: all on streets of the main car network
A = {"lon": 9.5209, "lat": 47.1410}
B = {"lon": 9.5100, "lat": 47.1660}
C = {"lon": 9.5215, "lat": 47.1395}
SPEC_COSTINGS = ["auto", "truck", "bicycle", "pedestrian", "motorcycle", "motor_scooter"]


@pytest.fixture(scope="module")
def engine(liechtenstein):
    return liechtenstein


@pytest.fixture(scope="module")
def client(api_client, engine):
    return api_client(engine)


def problem(resp, status):
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    body = resp.json()
    assert PROBLEM_KEYS <= set(body) and body["status"] == status
    return body


def fields(body):
    return [e["field"] for e in body.get("errors", [])]


def metres(lon1, lat1, lon2, lat2):
    p1, p2 = math.radians(lat1), math.radians(lat2)
    a = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(lon2 - lon1) / 2) ** 2
    return 2 * 6_371_008.8 * math.asin(math.sqrt(a))


# -- /route ----------------------------------------------------------------------------------------------
def test_route_shape_and_library_agree(client, engine):
    r = client.post("/route", json={"locations": [A, B], "id": "r1"})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["id"] == "r1"
    trip = doc["trip"]
    assert trip["status"] == 0 and trip["units"] == "kilometers" and trip["costing"] == "auto"
    assert len(trip["legs"]) == 1 and len(trip["locations"]) == 2
    s = trip["summary"]
    assert 2.0 < s["length"] < 6.0 and 120 < s["time"] < 900
    assert s["min_lat"] <= min(A["lat"], B["lat"]) + 1e-3 and s["max_lat"] >= max(A["lat"], B["lat"]) - 1e-3
    man = trip["legs"][0]["maneuvers"]
    # Valhalla's maneuver fields: integer type (1-3 start, 4-6 destination), travel mode/type, cost
    assert man[0]["type"] in (1, 2, 3) and man[-1]["type"] in (4, 5, 6)
    assert man[0]["type_name"].startswith("start") and man[-1]["type_name"].startswith("destination")
    assert all(m["travel_mode"] == "drive" and m["travel_type"] == "car" and m["cost"] >= 0 for m in man)
    # maneuvers cost their edges; the summary adds the turn costs of the search
    assert s["cost"] >= s["time"] * 0.5 and 0.5 * s["cost"] <= sum(m["cost"] for m in man) <= s["cost"] + 1e-3
    assert any(m["street_names"] for m in man)
    lib = engine.route(locations=[A, B])["trip"]
    assert lib["summary"] == s


def test_route_as_valhalla_clients_send_it(client):
    """alternates 0, and options for other costings in the same body (ignored, as Valhalla does)."""
    plain = client.post("/route", json={"locations": [A, B]}).json()["trip"]["summary"]
    body = {"locations": [A, B], "alternates": 0,
            "costing_options": {"auto": {}, "bicycle": {"bicycle_type": "Road"}, "pedestrian": {"walking_speed": 4}}}
    r = client.post("/route", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["trip"]["summary"] == plain and "alternates" not in r.json()
    # the request's own costing's options are still validated
    r = client.post("/route", json={**body, "costing_options": {"bicycle": {}, "auto": {"use_tolls": 3}}})
    assert r.status_code == 400 and "costing_options.auto.use_tolls" in fields(r.json())


@pytest.mark.parametrize("fmt,precision", [("polyline6", 6), ("polyline5", 5), (None, 6)])
def test_shape_polyline(client, fmt, precision):
    body = {"locations": [A, B]}
    if fmt:
        body["shape_format"] = fmt
    trip = client.post("/route", json=body).json()["trip"]
    lats, lons = decode_polyline(trip["legs"][0]["shape"], precision)
    for loc, (la, lo) in ((trip["locations"][0], (lats[0], lons[0])), (trip["locations"][1], (lats[-1], lons[-1]))):
        snapped = loc["snapped"]
        assert metres(lo, la, snapped["lon"], snapped["lat"]) < (2.0 if precision == 6 else 3.0)
        assert metres(lo, la, loc["lon"], loc["lat"]) < 50
    assert len(lats) > 10


def test_shape_geojson(client):
    trip = client.post("/route", json={"locations": [A, B], "shape_format": "geojson"}).json()["trip"]
    shape = trip["legs"][0]["shape"]
    assert shape["type"] == "LineString"
    lon0, lat0 = shape["coordinates"][0]
    lon1, lat1 = shape["coordinates"][-1]
    assert metres(lon0, lat0, A["lon"], A["lat"]) < 50 and metres(lon1, lat1, B["lon"], B["lat"]) < 50


@pytest.mark.parametrize("body,field", [
    ({}, "locations"),
    ({"locations": [A]}, "locations"),
    ({"locations": "Vaduz"}, "locations"),
    ({"locations": [A, {"lon": 9.5, "lat": 91}]}, "locations[1].lat"),
    ({"locations": [{"lon": 181, "lat": 47.1}, B]}, "locations[0].lon"),
    ({"locations": [{"lat": 47.1}, B]}, "locations[0].lon"),
    ({"locations": [A, {**B, "type": "stop"}]}, "locations[1].type"),
    ({"locations": [A, {**B, "heading": 400}]}, "locations[1].heading"),
    ({"locations": [A, {**B, "search_radius": 0}]}, "locations[1].search_radius"),
    ({"locations": [A, {**B, "search_radius": 101}]}, "locations[1].search_radius"),
    ({"locations": [A, {**B, "waiting_secs": -1}]}, "locations[1].waiting_secs"),
    ({"locations": [A, {**B, "preferred_side": "left"}]}, "locations[1].preferred_side"),
    ({"locations": [A, B], "shape_format": "wkt"}, "shape_format"),
    ({"locations": [A, B], "alternates": 4}, "alternates"),
    ({"locations": [A, B], "directions_options": {"units": "furlongs"}}, "directions_options.units"),
    ({"locations": [A, B], "avoid_locations": [{**A, "radius": 201}]}, "avoid_locations[0].radius"),
    ({"locations": [A, B], "costing_options": {"use_highways": 2}}, "costing_options.use_highways"),
    ({"locations": [A, B], "costing_options": {"auto": {"use_highways": -1}}}, "costing_options.auto.use_highways"),
    ({"locations": [A, B], "costing_options": {"use_highways": "lots"}}, "costing_options.use_highways"),
    ({"locations": [A, B], "costing_options": "fast"}, "costing_options"),
])
def test_route_400_field_paths(client, body, field):
    p = problem(client.post("/route", json=body), 400)
    assert field in fields(p), p


def test_route_bad_costing_lists_costings(client):
    p = problem(client.post("/route", json={"locations": [A, B], "costing": "hovercraft"}), 400)
    assert fields(p) == ["costing"]
    msg = p["errors"][0]["message"]
    for c in ("auto", "auto_shorter", "bicycle", "bus", "pedestrian", "truck", "motorcycle", "motor_scooter", "taxi"):
        assert c in msg


def test_route_unknown_option_lists_allowed(client):
    p = problem(client.post("/route", json={"locations": [A, B], "costing_options": {"use_rockets": 1}}), 400)
    assert fields(p) == ["costing_options.use_rockets"]
    msg = p["errors"][0]["message"]
    assert "use_highways" in msg and "top_speed" in msg
    # unknown names under the request's own costing key are refused too
    p = problem(client.post("/route", json={"locations": [A, B], "costing_options": {"auto": {"height_m": 3}}}), 400)
    assert fields(p) == ["costing_options.auto.height_m"]


def test_malformed_json_and_missing_body(client):
    r = client.post("/route", content=b"{locations: [", headers={"Content-Type": "application/json"})
    problem(r, 400)
    problem(client.post("/route"), 400)


def test_flat_and_nested_options_agree(client):
    flat = client.post("/route", json={"locations": [A, B], "costing_options": {"use_highways": 0.2, "top_speed": 80}})
    nested = client.post("/route", json={"locations": [A, B],
                                         "costing_options": {"auto": {"use_highways": 0.2, "top_speed": 80}}})
    plain = client.post("/route", json={"locations": [A, B]})
    assert flat.status_code == nested.status_code == 200
    assert flat.json()["trip"]["summary"] == nested.json()["trip"]["summary"]
    # top_speed 80 cannot make the route faster
    assert flat.json()["trip"]["summary"]["time"] >= plain.json()["trip"]["summary"]["time"] - 1e-3


def test_unsnappable_location_422(client, engine):
    from tests.services.test_route import far_from_roads

    lon, lat = far_from_roads(engine)
    p = problem(client.post("/route", json={"locations": [A, {"lon": lon, "lat": lat, "search_radius": 100}]}), 422)
    assert fields(p) == ["locations[1]"]
    # far outside the extract (the Atlantic)
    p = problem(client.post("/route", json={"locations": [{"lon": -30.0, "lat": 40.0}, B]}), 422)
    assert fields(p) == ["locations[0]"]


def test_unreachable_pair_422(client, engine):
    """A pedestrian-only island for cars? Use a costing whose network does not reach: truck options
    that exclude every road (height 10 m under maxheight-free roads is fine, so use weight on a
    weight-limited fragment) are rare; instead route a car to a location snapped strictly onto a
    fragment outside the main network."""
    from geoengine.graph.turns import largest_component

    prof = engine.router.profile("auto")
    off, tgt, _w, _p = prof.turn_csr()
    main = largest_component(off, tgt, prof.usable)
    g = engine.graph
    frag = np.flatnonzero(prof.usable & ~main & (np.asarray(g.edge_length) > 40))
    assert len(frag), "Liechtenstein has car-network fragments"
    from geoengine.graph.store import cut_polyline

    for e in frag[:20]:
        seg = int(e) >> 1
        so = np.asarray(g.shape_offsets)
        lon, lat = cut_polyline(np.asarray(g.shape_lon)[so[seg]:so[seg + 1]], np.asarray(g.shape_lat)[so[seg]:so[seg + 1]],
                                0.5, 0.5)
        loc = {"lon": float(lon[0]), "lat": float(lat[0]), "search_radius": 2}
        try:
            c = engine.router.candidates(prof, type("L", (), {**{k: None for k in (
                "heading", "heading_tolerance", "preferred_side", "rank_candidates", "street")}, **loc})(), 1)
        except Exception:
            continue
        if main[c["edge"]].any():
            continue
        r = client.post("/route", json={"locations": [A, loc]})
        if r.status_code == 200:
            continue  # the fragment is reachable one way (only its return is cut off)
        p = problem(r, 422)
        assert fields(p) == ["locations[1]"] and "no route" in p["detail"]
        # and the matrix gives null for that cell
        m = client.post("/matrix", json={"sources": [A], "targets": [loc, B]})
        assert m.status_code == 200, m.text
        row = m.json()["sources_to_targets"][0]
        assert row[0] is None and row[1]["to_index"] == 1
        return
    pytest.skip("every car fragment near the main network is reachable from it")


def test_route_types_legs_and_waiting(client):
    body = {"locations": [A, {**C, "type": "via", "waiting_secs": 0}, B]}
    via = client.post("/route", json=body).json()["trip"]
    assert len(via["legs"]) == 1
    brk = client.post("/route", json={"locations": [A, {**C, "waiting_secs": 120}, B]}).json()["trip"]
    assert len(brk["legs"]) == 2
    assert brk["summary"]["time"] == pytest.approx(via["summary"]["time"] + 120, abs=2e-3)


def test_route_costings(client):
    times = {}
    for c in ("auto", "auto_shorter", "bicycle", "bus", "pedestrian", "truck", "motorcycle", "motor_scooter", "taxi"):
        r = client.post("/route", json={"locations": [A, B], "costing": c})
        assert r.status_code == 200, (c, r.text)
        times[c] = r.json()["trip"]["summary"]["time"]
    assert times["pedestrian"] > 3 * times["auto"]
    assert times["auto"] < times["bicycle"] < times["pedestrian"]


def test_route_avoid_locations_http(client):
    base = client.post("/route", json={"locations": [A, B], "shape_format": "geojson"}).json()["trip"]
    coords = base["legs"][0]["shape"]["coordinates"]
    mid = coords[len(coords) // 2]
    r = client.post("/route", json={"locations": [A, B], "avoid_locations": [{"lon": mid[0], "lat": mid[1], "radius": 20}]})
    assert r.status_code == 200, r.text
    assert r.json()["trip"]["summary"]["time"] > base["summary"]["time"]
    p = problem(client.post("/route", json={"locations": [A, B], "avoid_polygons": [[[9.5, 47.1], [9.51, 47.1]]]}), 400)
    assert fields(p) == ["avoid_polygons[0]"]


# -- /matrix ---------------------------------------------------------------------------------------------
def test_matrix_shape_and_values(client, engine):
    body = {"sources": [A, B], "targets": [B, C, A], "id": "m1"}
    r = client.post("/matrix", json=body)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["units"] == "kilometers" and doc["id"] == "m1"
    rows = doc["sources_to_targets"]
    assert len(rows) == 2 and all(len(row) == 3 for row in rows)
    for i, row in enumerate(rows):
        for j, cell in enumerate(row):
            assert cell["to_index"] == j and cell["from_index"] == i
            assert isinstance(cell["time"], int)
    assert rows[0][2]["time"] == 0 and rows[1][0]["time"] == 0
    for key, locs in (("sources", body["sources"]), ("targets", body["targets"])):
        assert len(doc[key]) == len(locs)
        for snapped, loc in zip(doc[key], locs, strict=True):
            assert metres(snapped["lon"], snapped["lat"], loc["lon"], loc["lat"]) < 50
    # the cell A -> B is the route A -> B
    trip = client.post("/route", json={"locations": [A, B]}).json()["trip"]
    assert rows[0][0]["time"] == round(trip["summary"]["time"])
    assert rows[0][0]["distance"] == pytest.approx(trip["summary"]["length"], abs=1.5e-3)
    miles = client.post("/matrix", json={**body, "units": "miles"}).json()
    assert miles["units"] == "miles"
    assert rows[0][0]["distance"] / miles["sources_to_targets"][0][0]["distance"] == pytest.approx(1.609344, rel=2e-3)
    # library: numpy arrays
    m = engine.matrix(np.array([[A["lon"], A["lat"]]]), np.array([[B["lon"], B["lat"]]]))
    assert round(float(m.time_s[0, 0])) == rows[0][0]["time"]


@pytest.mark.parametrize("body,field", [
    ({"targets": [A]}, "sources"),
    ({"sources": [A]}, "targets"),
    ({"sources": [], "targets": [A]}, "sources"),
    ({"sources": [A], "targets": [{"lon": 9.5}]}, "targets[0].lat"),
    ({"sources": [{"lon": 9.5, "lat": -95}], "targets": [A]}, "sources[0].lat"),
    ({"sources": [A], "targets": [B], "units": "parsecs"}, "units"),
    ({"sources": [A], "targets": [B], "costing_options": {"walking_speed": 4}}, "costing_options.walking_speed"),
])
def test_matrix_400(client, body, field):
    p = problem(client.post("/matrix", json=body), 400)
    assert field in fields(p), p


@pytest.mark.parametrize("costing", ["taxi", "bus", "auto_shorter", "motor_scooter", "boat"])
def test_matrix_costing_not_in_list(client, costing):
    p = problem(client.post("/matrix", json={"sources": [A], "targets": [B], "costing": costing}), 400)
    assert fields(p) == ["costing"]
    assert "auto, bicycle, pedestrian, truck, motorcycle" in p["errors"][0]["message"]


@pytest.mark.parametrize("costing,options", [("pedestrian", {"walking_speed": 4}), ("bicycle", None),
                                             ("truck", {"height": 3.0}), ("motorcycle", None)])
def test_matrix_costings(client, costing, options):
    r = client.post("/matrix", json={"sources": [A, C], "targets": [B], "costing": costing, "costing_options": options})
    assert r.status_code == 200, r.text
    rows = r.json()["sources_to_targets"]
    assert rows[0][0]["time"] > 0 and rows[1][0]["distance"] > 0


def test_matrix_unsnappable_target_422(client):
    p = problem(client.post("/matrix", json={"sources": [A], "targets": [B, {"lon": -30.0, "lat": 40.0}, C]}), 422)
    assert fields(p) == ["targets[1]"]
    p = problem(client.post("/matrix", json={"sources": [{"lon": -30.0, "lat": 40.0}], "targets": [B]}), 422)
    assert fields(p) == ["sources[0]"]


# -- costings --------------------------------------------------------------------------------------------
def test_costings_list(client):
    r = client.get("/costings")
    assert r.status_code == 200
    names = [c["costing"] for c in r.json()["costings"]]
    assert names == ["auto", "auto_shorter", "bicycle", "bus", "pedestrian", "truck", "motorcycle", "motor_scooter", "taxi"]
    by = {c["costing"]: c for c in r.json()["costings"]}
    assert "/matrix" in by["auto"]["endpoints"] and "/matrix" not in by["taxi"]["endpoints"]


@pytest.mark.parametrize("costing", SPEC_COSTINGS)
def test_costing_options_schema(client, costing):
    r = client.get(f"/costing/options/{costing}")
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["costing"] == costing and doc["usage"]
    props = doc["options"]["properties"]
    assert props
    for name, p in props.items():
        assert {"type", "default", "description"} <= set(p), name
        if p["type"] == "number":
            assert "minimum" in p and "maximum" in p
            if p["default"] is None:  # derived from another option (cycling_speed from bicycle_type)
                assert "default" in p["description"].lower() or "by default" in p["description"].lower()
            else:
                assert p["minimum"] <= p["default"] <= p["maximum"]
    if costing == "auto":
        assert props["use_highways"]["minimum"] == 0 and props["use_highways"]["maximum"] == 1
        assert set(props) == {"use_highways", "use_tolls", "use_ferry", "use_living_streets", "use_tracks",
                              "service_penalty", "country_crossing_penalty", "shortest", "height", "width",
                              "exclude_unpaved", "top_speed"}


def test_costing_options_unknown_404(client):
    p = problem(client.get("/costing/options/hovercraft"), 404)
    assert "auto" in p["detail"]


def test_openapi_documents_routing(client):
    spec = client.get("/openapi.json").json()
    assert "/route" in spec["paths"] and "/matrix" in spec["paths"]
    schemas = spec["components"]["schemas"]
    assert "RouteRequest" in schemas and "MatrixResponse" in schemas and "Trip" in schemas


def test_directions_none_same_trip_without_maneuvers(client):
    full = client.post("/route", json={"locations": [A, C, B]}).json()["trip"]
    bare = client.post("/route", json={"locations": [A, C, B], "directions_options": {"directions_type": "none"}}).json()["trip"]
    assert bare["summary"] == full["summary"]
    for lf, lb in zip(full["legs"], bare["legs"], strict=True):
        assert "maneuvers" not in lb and lf["maneuvers"]
        assert lb["shape"] == lf["shape"] and lb["summary"] == lf["summary"]


def test_route_options_alternates_and_date_time_act(client):
    r = client.post("/route", json={"locations": [A, B], "alternates": 2,
                                    "date_time": {"type": 1, "value": "2026-01-01T08:00"}})
    assert r.status_code == 200, r.text
    doc = r.json()
    trip = doc["trip"]
    assert trip["departure"] == "2026-01-01T08:00"
    assert trip["arrival"] >= trip["departure"]
    for alt in doc.get("alternates", []):
        assert alt["trip"]["legs"][0]["shape"] != trip["legs"][0]["shape"]
    assert "warnings" not in trip or not any(w.startswith(("alternates", "date_time")) for w in trip["warnings"])


def test_matrix_arrival_times_when_a_departure_is_given(client):
    base = {"sources": [A], "targets": [B, A]}
    plain = client.post("/matrix", json=base).json()
    assert all("date_time" not in c for c in plain["sources_to_targets"][0])
    for body in ({**base, "costing_options": {"date_time": {"type": 1, "value": "2026-03-01T08:00"}}},
                 {**base, "costing_options": {"auto": {"date_time": {"type": 1, "value": "2026-03-01T08:00"}}}},
                 {**base, "date_time": {"type": 1, "value": "2026-03-01T08:00"}}):
        r = client.post("/matrix", json=body)
        assert r.status_code == 200, r.text
        cells = r.json()["sources_to_targets"][0]
        for cell, ref in zip(cells, plain["sources_to_targets"][0], strict=True):
            assert cell["time"] == ref["time"]
            arrival = datetime(2026, 3, 1, 8, 0) + timedelta(seconds=cell["time"])
            assert cell["date_time"] == arrival.strftime("%Y-%m-%dT%H:%M")
    r = client.post("/matrix", json={**base, "costing_options": {"date_time": {"type": 2, "value": "2026-03-01T08:00"}}})
    assert r.status_code == 400 and "arrive_by" in r.text
    r = client.post("/matrix", json={**base, "costing_options": {"date_time": {"type": 1, "value": "tomorrow"}}})
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "costing_options.date_time.value"
