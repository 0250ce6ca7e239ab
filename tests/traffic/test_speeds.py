"""Measured speeds on the real Liechtenstein bundle: OSRM's segment speed file and the per-way form are
mapped onto the graph's edges as hand computation says (top speeds capping them), routes on the CCH
with them equal the exact Dijkstra search on the updated weights (hypothesis), one apply reaches every
service and both dialects, they survive a restart and show in /health, --reset returns to the profile
speeds, and every kind of bad input is refused naming its line with nothing applied."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import geoengine
from geoengine.costing import edge_costs, parse_costing_options
from geoengine.costing.common import motor_obstacles
from geoengine.geo import haversine_m
from geoengine.services.models import Location
from geoengine.traffic import SpeedFileError, read_speed_table
from tests.traffic.oracle import exact, routes_equal_exact

A = (9.5209, 47.1410)  # Vaduz
B = (9.5100, 47.2200)  # Eschen / Nendeln


@pytest.fixture(scope="module")
def li(build_region, settings, tmp_path_factory):
    """An engine of the session's Liechtenstein bundle with its own speeds folder (the session's other
    engines never see these speeds)."""
    root = tmp_path_factory.mktemp("speeds")
    s = dataclasses.replace(settings, speeds_dir=root)
    return geoengine.open(build_region("liechtenstein"), settings=s)


@pytest.fixture(autouse=True)
def _profile_speeds(li):
    li.reset_speeds()
    yield
    li.reset_speeds()


def route_time(engine, a=A, b=B, costing="auto"):
    return engine.route(locations=[{"lon": a[0], "lat": a[1]}, {"lon": b[0], "lat": b[1]}],
                        costing=costing)["trip"]["summary"]["time"]


def segment_rows(graph, segs, forward=True):
    """OSRM segment rows (from, to) of every OSM segment of graph segments `segs`, in one direction."""
    sid, off = np.asarray(graph.shape_osm_id), np.asarray(graph.shape_offsets)
    rows = []
    for k in segs:
        ids = sid[off[k]:off[k + 1]]
        if not forward:
            ids = ids[::-1]
        rows += list(zip(ids[:-1].tolist(), ids[1:].tolist(), strict=True))
    return rows


def drivable_segments(graph, n, seed, min_points=3):
    """`n` random segments cars may drive forward, with at least `min_points` shape points."""
    off = np.asarray(graph.shape_offsets)
    ok = ((np.asarray(graph.edge_access)[0::2] & 1) != 0) & (np.diff(off) >= min_points)
    ok &= np.asarray(graph.seg_length) > 20
    return np.random.default_rng(seed).choice(np.flatnonzero(ok), n, replace=False)


def points_on_roads(graph, usable, n, rng):
    """`n` shape points of random segments the profile may use."""
    segs = np.flatnonzero(usable[0::2] | usable[1::2])
    so = np.asarray(graph.shape_offsets)
    pick = rng.choice(segs, n)
    idx = np.minimum(so[pick] + (rng.random(n) * (so[pick + 1] - so[pick])).astype(np.int64), so[pick + 1] - 1)
    return np.column_stack([np.asarray(graph.shape_lon)[idx], np.asarray(graph.shape_lat)[idx]])


def write_csv(path, rows):
    path.write_text("".join(",".join(str(x) for x in r) + "\n" for r in rows))
    return path


# ------------------------------------------------------------------------------ hand computation
def test_segment_file_times_equal_hand_computation(li, tmp_path):
    g = li.graph
    segs = drivable_segments(g, 30, seed=1)
    base_cost, base_time, length = edge_costs(g, "auto")
    rows = [(a, b, 23) for a, b in segment_rows(g, segs)]
    # a partly covered edge: only its first OSM segment, at 11 km/h
    part = drivable_segments(g, 1, seed=2, min_points=4)[0]
    first = segment_rows(g, [part])[0]
    rows.append((*first, 11, 1.5))  # with OSRM's optional rate column
    info = li.apply_speeds(write_csv(tmp_path / "s.csv", rows))
    assert info["form"] == "segment" and info["rows"] == len(rows) and info["edges"] == 31
    prof = li.router.profile("auto")
    sig = motor_obstacles(g)
    e = 2 * segs
    want = length[e] / (23 / 3.6) + sig[e]
    np.testing.assert_allclose(prof.time[e], want, rtol=1e-9)
    # the reverse direction keeps its profile time
    np.testing.assert_allclose(prof.time[e + 1], base_time[e + 1], rtol=1e-12)
    # the partly covered edge: its first piece at 11 km/h, the rest at its profile speed
    off = np.asarray(g.shape_offsets)
    p = off[part]
    piece = haversine_m(np.asarray(g.shape_lat[p:p + 1]), np.asarray(g.shape_lon[p:p + 1]),
                        np.asarray(g.shape_lat[p + 1:p + 2]), np.asarray(g.shape_lon[p + 1:p + 2]))[0]
    e = 2 * part
    profile_rate = (base_time[e] - sig[e]) / length[e]  # s per m at the profile speed
    want = piece / (11 / 3.6) + (length[e] - piece) * profile_rate + sig[e]
    assert prof.time[e] == pytest.approx(want, rel=1e-9)
    # untouched edges are unchanged
    touched = np.zeros(g.n_edges, bool)
    touched[2 * segs] = touched[2 * part] = True
    np.testing.assert_array_equal(prof.time[~touched], base_time[~touched])


def _osm_piece_seconds(graph, csv_rows, seg, backward):
    """Per OSM segment of graph segment `seg` in travel order (backward: against the way): (metres, the
    seconds at the speed the file gives that direction), read from the file's rows and the shape's
    coordinates, independently of the engine's overlay."""
    sid, off = np.asarray(graph.shape_osm_id), np.asarray(graph.shape_offsets)
    lon, lat = np.asarray(graph.shape_lon), np.asarray(graph.shape_lat)
    idx = np.arange(off[seg], off[seg + 1])
    if backward:
        idx = idx[::-1]
    speed = {(a, b): v for a, b, v in csv_rows}
    m = haversine_m(lat[idx[:-1]], lon[idx[:-1]], lat[idx[1:]], lon[idx[1:]])
    v = np.array([speed[(int(sid[x]), int(sid[y]))] for x, y in zip(idx[:-1], idx[1:], strict=True)], float)
    return m, m / (v / 3.6)


def test_partial_edges_are_timed_over_the_osm_segments_they_cover(li, tmp_path):
    """A route starting or ending inside an edge takes, for that edge's part, the sum of the OSM
    segments it covers at each one's own speed from the file (plus the located fraction of the segment
    it starts or ends in), as OSRM sums its segments: offsets, a route along one edge, a route across
    edges and the matrix agree with the file's speeds over the shape's own metres."""
    g = li.graph
    rng = np.random.default_rng(28)
    segs = drivable_segments(g, 40, seed=28, min_points=5)
    sig = motor_obstacles(g)
    segs = segs[(sig[2 * segs] == 0) & (sig[2 * segs + 1] == 0)][:25]  # no obstacle delay spread over them
    rows = segment_rows(g, segs) + segment_rows(g, segs, forward=False)
    csv_rows = [(a, b, int(v)) for (a, b), v in zip(rows, rng.integers(10, 111, len(rows)), strict=True)]
    li.apply_speeds(write_csv(tmp_path / "p.csv", csv_rows))
    prof = li.router.profile("auto")
    from geoengine.routing.profile import unpack

    checked = 0
    for seg in segs.tolist():
        for d in (0, 1):
            e = 2 * seg + d
            if not np.isfinite(prof.time[e]):
                continue
            m, sec = _osm_piece_seconds(g, csv_rows, seg, bool(d))
            cum = np.r_[0.0, np.cumsum(m)]
            for f in rng.random(6):
                x = f * cum[-1]
                j = min(int(np.searchsorted(cum, x, side="right")) - 1, len(m) - 1)
                # still to travel: the rest of piece j at its speed, then the whole pieces after it
                want = (cum[j + 1] - x) / m[j] * sec[j] + sec[j + 1:].sum()
                c, s2 = prof.source_offsets(np.array([e]), np.array([f]))
                t, _ = unpack(s2)
                assert t[0] == pytest.approx(want, abs=0.051), (e, f)
                # the cost follows the time (auto's cost: the time scaled by the edge's preferences)
                assert c[0] == pytest.approx(want * prof.cost[e] / prof.time[e], rel=1e-6, abs=1e-6)
                tc, t2 = prof.target_offsets(np.array([e]), np.array([f]))
                assert unpack(-t2)[0][0] == pytest.approx(want, abs=0.051)
                checked += 1
            # the spread-evenly time differs from the pieces' (the speeds differ piece to piece)
            assert prof.time[e] == pytest.approx(sec.sum(), rel=1e-9)
    assert checked >= 100
    # a route along one edge: the pieces between the two positions at their speeds, through the library
    seg = int(segs[0])
    m, sec = _osm_piece_seconds(g, csv_rows, seg, False)
    off = np.asarray(g.shape_offsets)
    lon, lat = np.asarray(g.shape_lon), np.asarray(g.shape_lat)
    p0, p1 = off[seg] + 1, off[seg + 1] - 2  # two interior shape points, p0 before p1 along the way
    if p1 > p0:
        doc = li.route(locations=[{"lon": float(lon[p0]), "lat": float(lat[p0])},
                                  {"lon": float(lon[p1]), "lat": float(lat[p1])}], costing="auto")
        k0, k1 = p0 - off[seg], p1 - off[seg]
        assert doc["trip"]["summary"]["time"] == pytest.approx(sec[k0:k1].sum(), abs=0.15)
    # across edges: a route from inside a covered edge equals its offset plus the rest of the path,
    # and the matrix gives the same time as the route
    e = 2 * int(segs[1])
    mid = off[e >> 1] + 2
    a = {"lon": float(lon[mid]), "lat": float(lat[mid])}
    b = {"lon": B[0], "lat": B[1]}
    r = li.compute_route(locations=[a, b], costing="auto")
    leg = r.routes[0].pieces[0]
    route_s = li.route(locations=[a, b], costing="auto")["trip"]["summary"]["time"]
    mat = li.router.matrix(np.array([[a["lon"], a["lat"]]]), np.array([[b["lon"], b["lat"]]]), "auto")
    assert mat.time_s[0, 0] == pytest.approx(route_s, abs=0.11)
    first = int(leg.edges[0])
    share = prof.time_share(first, leg.f_first)
    if first >> 1 == e >> 1:  # it starts on the covered edge: its part is the pieces after the position
        m, sec = _osm_piece_seconds(g, csv_rows, first >> 1, bool(first & 1))
        cum = np.r_[0.0, np.cumsum(m)]
        x = leg.f_first * cum[-1]
        j = min(int(np.searchsorted(cum, x, side="right")) - 1, len(m) - 1)
        assert share * prof.time[first] == pytest.approx((cum[j + 1] - x) / m[j] * sec[j] + sec[j + 1:].sum(),
                                                         abs=1e-6)


def test_way_form_and_top_speed_caps(li, tmp_path):
    g = li.graph
    seg_way = np.asarray(g.seg_way)
    cls = np.asarray(g.seg_class)
    from geoengine.graph import tags as T

    way = int(seg_way[np.flatnonzero(cls == T.CLASS["primary"])[0]])
    segs = np.flatnonzero(seg_way == way)
    li.apply_speeds(write_csv(tmp_path / "w.csv", [("way_id", "speed_kmh", "direction"), (way, 200, "forward")]))
    _, base_time, length = edge_costs(g, "auto")
    sig = motor_obstacles(g)
    for costing, opts, cap in (("auto", {}, 140.0), ("auto", {"top_speed": 60}, 60.0), ("truck", {}, 90.0),
                               ("motor_scooter", {}, 45.0), ("bus", {}, None), ("taxi", {"top_speed": 77}, 77.0)):
        prof = li.router.profile(costing, parse_costing_options(costing, opts) if opts else None)
        cap = cap or prof.options["top_speed"]
        assert cap < 200
        e = 2 * segs
        ok = np.isfinite(prof.time[e])
        assert ok.any()
        want = length[e] / (cap / 3.6) + sig[e]
        np.testing.assert_allclose(prof.time[e][ok], want[ok], rtol=1e-9, err_msg=costing)
    # forward only: the backward edges keep the profile time; pedestrians and bicycles ignore the speeds
    np.testing.assert_allclose(li.router.profile("auto").time[2 * segs + 1], base_time[2 * segs + 1])
    np.testing.assert_array_equal(li.router.profile("pedestrian").time, edge_costs(g, "pedestrian")[1])


def test_dataframe_and_last_row_wins(li):
    g = li.graph
    segs = drivable_segments(g, 5, seed=3)
    rows = segment_rows(g, segs)
    df = pd.DataFrame({"from_osm_node_id": [a for a, _ in rows] * 2, "to_osm_node_id": [b for _, b in rows] * 2,
                       "speed_kmh": [80.0] * len(rows) + [17.0] * len(rows)})
    info = li.apply_speeds(df)
    assert info["source"] == "<DataFrame>" and info["rows"] == 2 * len(rows)
    _, _, length = edge_costs(g, "auto")
    sig = motor_obstacles(g)
    e = 2 * segs
    np.testing.assert_allclose(li.router.profile("auto").time[e], length[e] / (17 / 3.6) + sig[e],
                               rtol=1e-9)


# ------------------------------------------------------------------------------ oracle
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 400), lo=st.floats(3, 60), hi=st.floats(60, 250))
def test_routes_equal_dijkstra_on_the_updated_weights(li, tmp_path, seed, n, lo, hi):
    g = li.graph
    rng = np.random.default_rng(seed)
    segs = drivable_segments(g, n, seed)
    fw = rng.random(n) < 0.5
    rows = segment_rows(g, segs[fw]) + segment_rows(g, segs[~fw], forward=False)
    speeds = rng.uniform(lo, hi, len(rows)).round(1)
    li.apply_speeds(write_csv(tmp_path / f"h{seed}.csv", [(a, b, v) for (a, b), v in zip(rows, speeds,
                                                                                          strict=True)]))
    router = li.router
    prof = router.profile("auto")
    assert prof.speeds is not None and prof.ch is not None
    # the weights are the updated ones
    np.testing.assert_array_equal(prof.time, edge_costs(g, "auto", speeds=router.speeds)[1])
    plain = exact(prof)
    pts = points_on_roads(g, prof.usable, 12, rng)
    assert routes_equal_exact(router, prof, pts, times=True) >= 3
    m = router.matrix(pts[:4], pts[4:8], "auto")
    for i in range(4):
        for j in range(4):
            ci = router.candidates(prof, Location(lon=float(pts[i, 0]), lat=float(pts[i, 1])), 0)
            cj = router.candidates(prof, Location(lon=float(pts[4 + j, 0]), lat=float(pts[4 + j, 1])), 1)
            leg = router.shortest(plain, ci, cj)
            if leg is not None and leg.edges.size > 1:
                assert m.time_s[i, j] == pytest.approx(leg.time_s, rel=1e-6, abs=0.2)


def test_new_speeds_take_over_the_turn_structure_and_equal_a_fresh_profile(li, tmp_path):
    """New speeds change times, never which edges are usable: the new default profile takes over the
    arcs (and the largest component) of the one before instead of remaking them, and its turn graph
    equals, array for array, one made from nothing with the same speeds."""
    from geoengine.routing.profile import Profile

    g, router = li.graph, li.router
    route_time(li)  # the profile-speed car profile, its turn graph and component made
    before = router.profile("auto").structure
    assert before is not None and before.component is not None
    segs = drivable_segments(g, 300, 7)
    rows = segment_rows(g, segs)
    li.apply_speeds(write_csv(tmp_path / "s.csv", [(a, b, 23.0 + (i % 50)) for i, (a, b) in enumerate(rows)]))
    prof = router.profile("auto")
    route_time(li)
    assert prof.structure is before  # taken over: the same arrays
    fresh = Profile(g, "auto", speeds=router.speeds)
    for got, want in zip(prof.turn_csr(), fresh.turn_csr(), strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(prof.base_index, fresh.base_index)
    np.testing.assert_array_equal(prof.component, fresh.component)
    assert not np.array_equal(prof.turn_csr()[2], before_weights(g))  # the weights are the new ones
    # a profile whose usable edges differ (a blocked edge) does not take it over
    blocked = np.zeros(g.n_edges, bool)
    blocked[np.flatnonzero(prof.usable)[0]] = True
    other = Profile(g, "auto", speeds=router.speeds, blocked=blocked, structure=before)
    np.testing.assert_array_equal(other.turn_csr()[1], Profile(g, "auto", speeds=router.speeds,
                                                                blocked=blocked).turn_csr()[1])
    assert other.structure is not before


def before_weights(g):
    from geoengine.routing.profile import Profile

    return Profile(g, "auto").turn_csr()[2]


# ------------------------------------------------------------------------------ one switch, everywhere
def test_one_apply_reaches_every_service_and_dialect(li, api_client, tmp_path):
    client = api_client(li)
    locs = [{"lon": A[0], "lat": A[1]}, {"lon": B[0], "lat": B[1]}]
    mid = {"lon": 9.53, "lat": 47.17}

    def answers():
        out = {"route": li.route(locations=locs)["trip"]["summary"]["time"],
               "matrix": float(li.matrix([A], [B]).time_s[0, 0]),
               "route_many": float(li.route_many([A], [B]).time_s[0])}
        r = client.post("/route", json={"locations": locs, "costing": "auto"})
        assert r.status_code == 200, r.text
        out["http_route"] = r.json()["trip"]["summary"]["time"]
        r = client.post("/matrix", json={"sources": [locs[0]], "targets": [locs[1]], "costing": "auto"})
        assert r.status_code == 200, r.text
        out["http_matrix"] = r.json()["sources_to_targets"][0][0]["time"]
        r = client.post("/optimised_route", json={"locations": [locs[0], mid, locs[1]], "costing": "auto"})
        assert r.status_code == 200, r.text
        out["optimised"] = r.json()["trip"]["summary"]["time"]
        r = client.post("/optimized_route", json={"locations": [locs[0], mid, locs[1]], "costing": "auto"})
        assert r.status_code == 200, r.text
        out["valhalla_optimized"] = r.json()["trip"]["summary"]["time"]
        r = client.get(f"/route/v1/driving/{A[0]},{A[1]};{B[0]},{B[1]}")
        assert r.status_code == 200, r.text
        out["osrm"] = r.json()["routes"][0]["duration"]
        r = client.post("/sources_to_targets", json={"sources": [locs[0]], "targets": [locs[1]], "costing": "auto"})
        assert r.status_code == 200, r.text
        out["valhalla_matrix"] = r.json()["sources_to_targets"][0][0]["time"]
        r = client.post("/isochrone", json={"locations": [locs[0]], "costing": "auto", "contours": [{"time": 5}]})
        assert r.status_code == 200, r.text
        out["isochrone"] = r.text
        return out

    before = answers()
    ways = np.unique(np.asarray(li.graph.seg_way))
    li.apply_speeds(pd.DataFrame({"way_id": ways, "speed_kmh": 12.0}))
    after = answers()
    for k, v in before.items():
        assert after[k] != v, k
    # every road at 12 km/h: the route takes at least its length at 12 km/h
    doc = li.route(locations=locs)["trip"]["summary"]
    assert doc["time"] >= doc["length"] * 1000 / (12 / 3.6)
    assert after["route"] == pytest.approx(after["http_route"], abs=0.1)
    li.reset_speeds()
    assert answers()["route"] == before["route"]


def test_speeds_survive_a_restart_and_show_in_health(li, api_client, tmp_path):
    g = li.graph
    segs = drivable_segments(g, 10, seed=4)
    path = write_csv(tmp_path / "r.csv", [(a, b, 9) for a, b in segment_rows(g, segs)])
    info = li.apply_speeds(path)
    assert info["source"] == str(path.resolve()) and info["sha256"]
    health = api_client(li).get("/health").json()
    assert health["speeds"]["generation"] == info["generation"] and health["speeds"]["edges"] == 10
    again = geoengine.open(li.path, settings=li.settings)  # a new process would do the same
    assert again.info()["speeds"] == info
    np.testing.assert_array_equal(again.router.profile("auto").time, li.router.profile("auto").time)
    assert (li.speed_store.dir / "current.json").exists() and not (li.path / "current.json").exists()
    li.reset_speeds()
    assert again.info()["speeds"]["file"] is None
    np.testing.assert_array_equal(again.router.profile("auto").time, edge_costs(g, "auto")[1])


# ------------------------------------------------------------------------------ bad input
def _rows_ok(g):
    return [(a, b, 30) for a, b in segment_rows(g, drivable_segments(g, 3, seed=5))][:3]  # 3 good rows


BAD = {
    "unknown node pair": (lambda g: _rows_ok(g) + [(1, 2, 30)], 4, "no road segment"),
    "non-adjacent nodes": (lambda g: _rows_ok(g)[:2] + [(_rows_ok(g)[0][0], _rows_ok(g)[-1][1], 30)], 3,
                           "no road segment"),
    "unknown way": (lambda g: [(int(g.seg_way[0]), 30), (1, 40)], 2, "OSM way 1"),
    "negative speed": (lambda g: _rows_ok(g)[:1] + [(*_rows_ok(g)[1][:2], -5)], 2, "above 0"),
    "zero speed": (lambda g: [(*_rows_ok(g)[0][:2], 0)], 1, "above 0"),
    "nan speed": (lambda g: _rows_ok(g)[:2] + [(*_rows_ok(g)[2][:2], "nan")], 3, "above 0"),
    "text id": (lambda g: _rows_ok(g)[:1] + [("abc", 3, 30)], 2, "positive integer"),
    "too few columns": (lambda g: _rows_ok(g)[:1] + [(5,)], 2, "column"),
    "too many columns": (lambda g: _rows_ok(g)[:2] + [(1, 2, 3, 4, 5)], 3, "column"),
    "unknown header": (lambda g: [("a", "b", "c")] + _rows_ok(g), 1, "unknown columns"),
    "bad direction": (lambda g: [(int(g.seg_way[0]), 30, "sideways")], 1, "direction"),
    "header only": (lambda g: [("way_id", "speed_kmh")], 2, "no rows"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_names_the_line_and_applies_nothing(li, tmp_path, case):
    make, line, text = BAD[case]
    g = li.graph
    good = segment_rows(g, drivable_segments(g, 3, seed=6))
    li.apply_speeds(write_csv(tmp_path / "good.csv", [(a, b, 7) for a, b in good]))
    before_info = li.info()["speeds"]
    before = li.router.profile("auto").time.copy()
    before_route = route_time(li)
    with pytest.raises(SpeedFileError) as exc:
        li.apply_speeds(write_csv(tmp_path / "bad.csv", make(g)))
    assert exc.value.line == line, exc.value.detail
    assert f"line {line}" in exc.value.detail and text in exc.value.detail, exc.value.detail
    assert exc.value.status == 400 and exc.value.errors[0].field == f"line {line}"
    assert li.info()["speeds"] == before_info  # nothing applied
    np.testing.assert_array_equal(li.router.profile("auto").time, before)
    assert route_time(li) == before_route
    assert sorted(p.name for p in li.speed_store.dir.glob("speeds-*.npz")) == [before_info["file"]]


def test_empty_files_and_frames(li, tmp_path):
    for data in ("", "\n\n  \n"):
        (tmp_path / "e.csv").write_text(data)
        with pytest.raises(SpeedFileError, match="line 1: the speed file is empty"):
            li.apply_speeds(tmp_path / "e.csv")
    with pytest.raises(SpeedFileError, match="not a speed table"):
        li.apply_speeds(pd.DataFrame({"node": [1], "kmh": [3]}))
    with pytest.raises(SpeedFileError, match="empty"):
        li.apply_speeds(pd.DataFrame({"way_id": [], "speed_kmh": []}))
    with pytest.raises(SpeedFileError, match="does not exist"):
        li.apply_speeds(tmp_path / "missing.csv")
    g = li.graph
    df = pd.DataFrame({"way_id": [int(g.seg_way[0]), int(g.seg_way[2])], "speed_kmh": [30.0, float("nan")]})
    with pytest.raises(SpeedFileError, match="line 2:"):
        li.apply_speeds(df)
    assert li.info()["speeds"]["file"] is None


def test_a_graph_without_osm_node_ids_says_so(li, tmp_path):
    from geoengine.traffic import map_speeds, read_speed_table

    g = copy.copy(li.graph)
    g.shape_osm_id = None
    with pytest.raises(SpeedFileError, match="rebuild the bundle"):
        map_speeds(g, read_speed_table(b"1,2,30\n"))


# ------------------------------------------------------------------------------ the two readers agree
def _both_readers(data: bytes, reader="_fast_table"):
    from geoengine.traffic import speeds as S

    fast = getattr(S, reader)(data, None)
    origs = S._fast_table, S._numeric_table
    S._fast_table = S._numeric_table = lambda d, f: None
    try:
        slow = read_speed_table(data)
    finally:
        S._fast_table, S._numeric_table = origs
    return fast, slow


@pytest.mark.parametrize("text, numeric", [
    ("1,2,30\n3,4,5.5\n", True),
    ("1,2,30,1.5\n3,4,5.5\n", False),  # 3 and 4 columns: pandas' reader
    ("1,2,30,1.5\n3,4,5.5,2\n", True),
    ("from_osm_node_id,to_osm_node_id,speed_kmh,rate\n1,2,30,2\n3,4,5.5,1\n", True),
    ("7,30\n8,40\n", True),
    ("7,30,forward\n8,40,backward\n9,50\n", False),
    ("way_id,speed_kmh,direction\n7,30,both\n8,40,Forward\n", False),
])
def test_fast_readers_equal_checked_reader(text, numeric):
    fast, slow = _both_readers(text.encode())
    num, _ = _both_readers(text.encode(), "_numeric_table")
    assert fast is not None and (num is not None) == numeric
    for got in (fast, num):
        if got is not None:
            assert got.form == slow.form
            for k in ("lines", "a", "b", "speed"):
                np.testing.assert_array_equal(getattr(got, k), getattr(slow, k), err_msg=k)


@pytest.mark.parametrize("case", sorted(BAD))
def test_fast_reader_leaves_every_bad_file_to_the_checked_one(li, case, tmp_path):
    from geoengine.traffic import speeds as S

    data = write_csv(tmp_path / "b.csv", BAD[case][0](li.graph)).read_bytes()
    for fast in (S._fast_table(data, None), S._numeric_table(data, None)):
        if fast is None:
            continue  # only ids the graph lacks pass the reading: the mapping refuses them
        from geoengine.traffic import map_speeds

        with pytest.raises(SpeedFileError):
            map_speeds(li.graph, fast)


def test_shape_point_screen_equals_isin(li):
    """The one-pass screen of the graph's shape points (`_ids_in`: a bitmap of the ids' low bits, then a
    binary search) marks exactly the points `np.isin` marks: ids in the graph, ids beside them, ids
    that share their low 22 bits with one of the table's (the bitmap's collisions), none."""
    from geoengine.traffic.speeds import _ID_BITS_MASK, _ids_in

    sid = np.asarray(li.graph.shape_osm_id)
    rng = np.random.default_rng(7)
    picked = rng.choice(sid, 500, replace=False).astype(np.int64)
    table = np.unique(np.concatenate([picked, picked + 1, picked + (_ID_BITS_MASK + 1), [1, 2**40]]))
    got = _ids_in(sid, table)
    assert np.array_equal(got, np.isin(sid, table))
    assert got.sum() >= 500
    assert not _ids_in(sid, np.array([], np.int64)).any()


# ------------------------------------------------------------------------------ the spare customisation arrays
def test_spare_arrays_kept_only_where_speeds_are_expected(li, tmp_path):
    """Settings.speeds_spare: "auto" keeps the CCH's spare working arrays once the bundle has measured
    speeds (not before: a server without traffic feeds holds no extra memory), "on" from the start,
    "off" never; another value is a clear error."""
    def opened(mode, folder):
        s = dataclasses.replace(li.settings, speeds_dir=tmp_path / folder, speeds_spare=mode)
        engine = geoengine.open(li.path, settings=s)
        return engine, engine.router.customiser.topology

    auto, topo = opened("auto", "a")
    assert topo.keep_spare is False
    segs = drivable_segments(auto.graph, 5, seed=9)
    auto.apply_speeds(write_csv(tmp_path / "s.csv", [(a, b, 30) for a, b in segment_rows(auto.graph, segs)]))
    assert topo.keep_spare is True
    assert opened("auto", "a")[1].keep_spare is True  # a restart finds the stored speeds
    assert opened("on", "b")[1].keep_spare is True
    assert opened("off", "a")[1].keep_spare is False
    with pytest.raises(ValueError, match="GEOENGINE_SPEEDS_SPARE"):
        geoengine.config.Settings.from_env({"GEOENGINE_SPEEDS_SPARE": "always"})
