"""Time-of-day speed profiles on the real Liechtenstein bundle: two named profiles (rush hour and night)
given to every car road; a route's and a matrix's times with date_time equal hand computation from the
profile speeds and edge lengths (the clock walking the route edge by edge), routes with a bucket's
metric equal Dijkstra on that bucket's weights, the profiles survive a restart and show in /health,
the rows' own 672 speeds are stored as DCT-II coefficients and every kind of bad input is refused
naming its line with nothing applied."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import numpy as np
import pytest

import geoengine
from geoengine.costing import edge_costs, turn_penalty
from geoengine.costing.common import motor_obstacles
from geoengine.graph.turns import turn_base
from geoengine.services.route_options import selection
from geoengine.traffic import SpeedFileError
from geoengine.traffic.profiles import BUCKETS, decode, encode, read_profile_table
from geoengine.traffic.timeofday import Selection, bucket_of
from tests.traffic.oracle import routes_equal_exact

A = (9.5209, 47.1410)  # Vaduz
B = (9.5100, 47.2200)  # Eschen / Nendeln
C = (9.5550, 47.2400)  # Ruggell / Schellenberg


def rush_speeds():
    """Weekdays 07:00-09:00 at 20 km/h, 50 km/h otherwise."""
    v = np.full(BUCKETS, 50.0)
    for day in range(5):
        v[day * 96 + 28: day * 96 + 36] = 20.0
    return v


def night_speeds():
    """Every day 22:00-06:00 at 90 km/h, 50 km/h otherwise."""
    v = np.full(BUCKETS, 50.0)
    for day in range(7):
        v[day * 96: day * 96 + 24] = 90.0
        v[day * 96 + 88: day * 96 + 96] = 90.0
    return v


def profile_row(name, v):
    return f"profile,{name}," + ",".join(f"{x:g}" for x in v) + "\n"


@pytest.fixture(scope="module")
def li(build_region, settings, tmp_path_factory):
    root = tmp_path_factory.mktemp("profiles")
    s = dataclasses.replace(settings, speeds_dir=root)
    return geoengine.open(build_region("liechtenstein"), settings=s)


def car_ways(graph):
    acc = np.asarray(graph.edge_access)
    car = ((acc[0::2] | acc[1::2]) & 1) != 0
    return np.unique(np.asarray(graph.seg_way)[car])


@pytest.fixture(scope="module")
def applied(li, tmp_path_factory):
    """Even car ways take `rush`, odd ones `night`: the file, its info and per way the profile."""
    ways = car_ways(li.graph)
    path = tmp_path_factory.mktemp("pf") / "profiles.csv"
    text = "# two named profiles\n" + profile_row("rush", rush_speeds()) + profile_row("night", night_speeds())
    text += "".join(f"{w},{'rush' if w % 2 == 0 else 'night'}\n" for w in ways.tolist())
    path.write_text(text)
    info = li.apply_profiles(path)
    return path, info


def edge_speed(graph, e, bucket):
    """The profile speed (km/h) of directed edges `e` in `bucket`, from the file's rule."""
    way = np.asarray(graph.seg_way)[np.asarray(e) >> 1]
    return np.where(way % 2 == 0, rush_speeds()[bucket], night_speeds()[bucket])


def hand_edge_seconds(graph, e, bucket):
    """Seconds of whole directed edges `e` in `bucket`: length at the profile speed plus the signal delay."""
    e = np.asarray(e)
    length = np.asarray(graph.seg_length, dtype=np.float64)[e >> 1]
    sig = motor_obstacles(graph)[e]
    return length / (edge_speed(graph, e, bucket) / 3.6) + sig


def hand_turn_delay(prof, a, b):
    """The car's delay for the turn from edge a to edge b (the car's turn model for that turn of the
    graph's turn table)."""
    off, tgt, _w, _packed = prof.turn_csr()
    for x in range(off[a], off[a + 1]):
        if tgt[x] == b:
            return float(turn_base(prof.graph).penalty(turn_penalty("auto"), [prof.base_index[x]], "auto")[0])
    return 0.0


def hand_eta(li, prof, leg, depart: datetime):
    """Walk the leg: each edge's covered share at the bucket the clock is in when it is entered."""
    g = li.graph
    t = depart
    total = 0.0
    for k, (e, c) in enumerate(zip(leg.edges.tolist(), leg.covered.tolist(), strict=True)):
        if k:
            d = hand_turn_delay(prof, leg.edges[k - 1], e)
            t += timedelta(seconds=d)
            total += d
        s = float(hand_edge_seconds(g, [e], bucket_of(t))[0]) * c
        t += timedelta(seconds=s)
        total += s
    return total


def test_hand_computation_of_the_bucket_metric(li, applied):
    g = li.graph
    _path, info = applied
    assert info["profiles"] == ["rush", "night"] and info["own_profiles"] == 0
    for when in (datetime(2026, 11, 24, 7, 30), datetime(2026, 11, 24, 2, 0)):
        sel = selection({"type": 1, "value": when.strftime("%Y-%m-%dT%H:%M")})
        prof = li.router.profile("auto", bucket=sel)
        assert prof.speeds is not None
        e = np.flatnonzero(np.isfinite(prof.time) & prof.usable)
        np.testing.assert_allclose(prof.time[e], hand_edge_seconds(g, e, sel.bucket), rtol=1e-9)
        np.testing.assert_array_equal(prof.time, edge_costs(g, "auto", speeds=prof.speeds)[1])
    # without a date_time: the profile speeds
    assert li.router.profile("auto").speeds is None


@pytest.mark.parametrize("when", ["2026-11-24T07:30", "2026-11-24T02:00", "2026-11-24T06:50"])
def test_route_eta_equals_hand_computation(li, applied, when):
    depart = datetime.strptime(when, "%Y-%m-%dT%H:%M")
    locs = [{"lon": A[0], "lat": A[1]}, {"lon": B[0], "lat": B[1]}]
    res = li.compute_route(locations=locs, costing="auto", date_time={"type": 1, "value": when})
    route = res.routes[0]
    prof = li.router.profile("auto", bucket=selection({"type": 1, "value": when}))
    expect = hand_eta(li, prof, route.legs[0], depart)
    assert route.time_s == pytest.approx(expect, abs=1e-6)
    assert route.arrival == depart + timedelta(seconds=route.time_s)
    # the maneuvers' times add up to the leg's edges' seconds (turn delays are not in them)
    leg = route.legs[0]
    assert sum(m.time_s for m in leg.maneuvers) == pytest.approx(leg.edge_time_s.sum(), abs=1e-6)

    doc = li.route(locations=locs, costing="auto", date_time={"type": 1, "value": when})
    assert doc["trip"]["summary"]["time"] == pytest.approx(route.time_s, abs=0.01)


def test_rush_and_night_differ_and_the_clock_crosses_buckets(li, applied):
    locs = [{"lon": A[0], "lat": A[1]}, {"lon": B[0], "lat": B[1]}]

    def t(value):
        return li.compute_route(locations=locs, costing="auto", date_time={"type": 1, "value": value}).routes[0].time_s

    rush, night, plain = t("2026-11-24T07:30"), t("2026-11-24T02:00"), li.compute_route(locations=locs).routes[0].time_s
    assert rush > night * 1.5
    assert len({round(rush), round(night), round(plain)}) == 3
    # 06:50 on a Tuesday: the route enters rush hour (07:00) on the way, so it takes longer than at
    # 06:50 with the 06:45 bucket's speeds throughout and less than in rush hour throughout
    crossing = t("2026-11-24T06:50")
    sel = selection({"type": 1, "value": "2026-11-24T06:50"})
    route = li.compute_route(locations=locs, costing="auto", date_time={"type": 1, "value": "2026-11-24T06:50"})
    static = sum(route.routes[0].legs[0].pieces[i].time_s for i in range(len(route.routes[0].legs[0].pieces)))
    assert sel.bucket == 1 * 96 + 27
    assert static < crossing < rush + 1
    # Saturday 07:30: no rush hour at the weekend
    assert t("2026-11-28T07:30") < rush - 60


def test_arrive_by_walks_back_from_the_arrival(li, applied):
    locs = [{"lon": A[0], "lat": A[1]}, {"lon": B[0], "lat": B[1]}]
    arrive = datetime(2026, 11, 24, 7, 10)
    res = li.compute_route(locations=locs, costing="auto", date_time={"type": 2, "value": "2026-11-24T07:10"})
    route = res.routes[0]
    assert route.arrival == arrive
    assert route.departure == arrive - timedelta(seconds=route.time_s)
    # hand: the edges walked back from the arrival, each at the bucket of the moment it is left
    prof = li.router.profile("auto", bucket=selection({"type": 2, "value": "2026-11-24T07:10"}))
    leg = route.legs[0]
    t, total = arrive, 0.0
    g = li.graph
    for k in range(len(leg.edges) - 1, -1, -1):
        e, c = int(leg.edges[k]), float(leg.covered[k])
        s = float(hand_edge_seconds(g, [e], bucket_of(t - timedelta(microseconds=1)))[0]) * c
        t -= timedelta(seconds=s)
        total += s
        if k:
            d = hand_turn_delay(prof, leg.edges[k - 1], e)
            t -= timedelta(seconds=d)
            total += d
    assert route.time_s == pytest.approx(total, abs=1e-6)


@pytest.mark.parametrize("value", ["2026-11-24T08:00", "2026-11-24T23:30"])
def test_bucket_routes_equal_dijkstra_on_the_bucket_weights(li, applied, value):
    router = li.router
    prof = router.profile("auto", bucket=selection({"type": 1, "value": value}))
    assert prof.ch is not None
    rng = np.random.default_rng(7)
    g = li.graph
    segs = np.flatnonzero(prof.usable[0::2] | prof.usable[1::2])
    so = np.asarray(g.shape_offsets)
    pick = rng.choice(segs, 16)
    pts = np.column_stack([np.asarray(g.shape_lon)[so[pick]], np.asarray(g.shape_lat)[so[pick]]])
    assert routes_equal_exact(router, prof, pts) >= 4


def test_matrix_uses_the_departure_bucket(li, applied, api_client):
    client = api_client(li)
    pts = np.array([A, B, C])
    rush = li.matrix(pts, pts, date_time={"type": 1, "value": "2026-11-24T07:30"})
    night = li.matrix(pts, pts, date_time={"type": 1, "value": "2026-11-24T02:00"})
    plain = li.matrix(pts, pts)
    off = ~np.eye(3, dtype=bool)
    assert (rush.time_s[off] > night.time_s[off]).all()
    assert not np.allclose(plain.time_s[off], night.time_s[off])
    # each cell: the route searched with the same bucket's metric (hand: its edges at that bucket's
    # speeds and the turn delays; the same clock-free sum, as the matrix takes one bucket)
    for i, j in ((0, 1), (1, 2), (2, 0)):
        value = "2026-11-24T07:30"
        sel = selection({"type": 1, "value": value})
        prof = li.router.profile("auto", bucket=sel)
        leg = li.compute_route(locations=[{"lon": pts[i][0], "lat": pts[i][1]}, {"lon": pts[j][0], "lat": pts[j][1]}],
                               costing="auto", date_time={"type": 1, "value": "2026-11-24T07:30"}).routes[0].legs[0]
        cov = leg.covered
        hand = float((hand_edge_seconds(li.graph, leg.edges, sel.bucket) * cov).sum())
        hand += sum(hand_turn_delay(prof, leg.edges[k - 1], leg.edges[k]) for k in range(1, len(leg.edges)))
        # a matrix adds the search's packed times: each turn-graph arc's rounded to 0.1 s
        assert rush.time_s[i, j] == pytest.approx(hand, abs=0.05 * len(leg.edges))
        assert abs(rush.time_s[i, j] - hand) < 0.02 * abs(rush.time_s[i, j] - night.time_s[i, j])
    # over HTTP: date_time in costing_options
    body = {"sources": [{"lon": A[0], "lat": A[1]}], "targets": [{"lon": B[0], "lat": B[1]}], "costing": "auto",
            "costing_options": {"auto": {"date_time": {"type": 1, "value": "2026-11-24T07:30"}}}}
    r = client.post("/matrix", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["sources_to_targets"][0][0]["time"] == round(rush.time_s[0, 1])
    # Valhalla's dialect: the same departure in its matrix body
    r = client.post("/sources_to_targets", json={**body, "costing_options": {}, "date_time": body["costing_options"]["auto"]["date_time"]})
    assert r.status_code == 200, r.text
    assert r.json()["sources_to_targets"][0][0]["time"] == pytest.approx(round(rush.time_s[0, 1]), abs=1)


def test_route_http_and_isochrone(li, applied, api_client):
    client = api_client(li)
    body = {"locations": [{"lon": A[0], "lat": A[1]}, {"lon": B[0], "lat": B[1]}], "costing": "auto"}
    t = {}
    for v in ("2026-11-24T07:30", "2026-11-24T02:00"):
        r = client.post("/route", json={**body, "date_time": {"type": 1, "value": v}})
        assert r.status_code == 200, r.text
        t[v] = r.json()["trip"]["summary"]["time"]
        local = li.route(**body, date_time={"type": 1, "value": v})["trip"]["summary"]["time"]
        assert t[v] == pytest.approx(local, abs=0.01)
    assert t["2026-11-24T07:30"] > t["2026-11-24T02:00"] * 1.5
    # the spec's directions take the same date_time
    wp = {"waypoints": [{"lon": A[0], "lat": A[1]}, {"lon": B[0], "lat": B[1]}], "profile": "driving", "steps": False}
    for v in ("2026-11-24T07:30", "2026-11-24T02:00"):
        r = client.post("/v1/routing/directions", json={**wp, "date_time": {"type": 1, "value": v}})
        assert r.status_code == 200, r.text
        assert r.json()["routes"][0]["duration_s"] == pytest.approx(t[v], abs=0.5)
    r = client.post("/v1/routing/directions", json={**wp, "date_time": {"type": 7, "value": "2026-11-24T07:30"}})
    assert r.status_code == 400 and "date_time" in r.text
    iso = {}
    for v in ("2026-11-24T07:30", "2026-11-24T02:00"):
        reach = li.isochrone(locations=[{"lon": A[0], "lat": A[1]}], costing="auto", contours=[{"time": 5}],
                             date_time={"type": 1, "value": v}, show_locations=False)
        import shapely

        iso[v] = shapely.geometry.shape(reach["features"][0]["geometry"]).area
    assert iso["2026-11-24T02:00"] > iso["2026-11-24T07:30"] * 1.5
    r = client.post("/isochrone", json={"locations": [{"lon": A[0], "lat": A[1]}], "contours": [{"time": 5}],
                                           "date_time": {"type": 1, "value": "2026-11-24T07:3O"}})
    assert r.status_code == 400 and "date_time.value" in r.text


def test_survive_a_restart_show_in_health_and_reset(li, applied, build_region, settings):
    s = dataclasses.replace(settings, speeds_dir=li.settings.speeds_dir)
    again = geoengine.open(build_region("liechtenstein"), settings=s)
    info = again.info()["profiles"]
    assert info["generation"] == applied[1]["generation"] and info["file"] and info["profiles"] == ["rush", "night"]
    locs = [{"lon": A[0], "lat": A[1]}, {"lon": B[0], "lat": B[1]}]
    dt = {"type": 1, "value": "2026-11-24T07:30"}
    assert again.route(locations=locs, date_time=dt)["trip"]["summary"]["time"] == \
        li.route(locations=locs, date_time=dt)["trip"]["summary"]["time"]
    from geoengine.server.routes.system import health_doc

    assert health_doc(again)["profiles"]["generation"] == info["generation"]
    again.reset_profiles()
    assert again.route(locations=locs, date_time=dt)["trip"]["summary"]["time"] == \
        again.route(locations=locs)["trip"]["summary"]["time"]
    # the other engine switches on its next request, then the profiles come back
    assert li.route(locations=locs, date_time=dt)["trip"]["summary"]["time"] == \
        li.route(locations=locs)["trip"]["summary"]["time"]
    li.apply_profiles(applied[0])


# ------------------------------------------------------------------------------ own speeds: DCT-II
def test_own_speeds_are_stored_as_dct_coefficients(li, tmp_path):
    w = np.arange(BUCKETS)
    smooth = 45 + 15 * np.sin(2 * np.pi * w / 96) + 5 * np.cos(2 * np.pi * w / BUCKETS)
    coef = encode(smooth)
    assert coef.dtype == np.int16 and coef.shape == (200,)
    assert np.abs(decode(coef) - smooth).max() < 1.0
    assert decode(coef, 100) == pytest.approx(decode(coef)[100])
    ways = car_ways(li.graph)[:3]
    text = "".join(f"{x}," + ",".join(f"{v:.2f}" for v in smooth) + "\n" for x in ways.tolist())
    t = read_profile_table(text)
    assert t.coef.shape == (1, 200) and len(t.exact) == 0  # identical rows once
    np.testing.assert_array_equal(t.profile, [0, 0, 0])


# ------------------------------------------------------------------------------ bad input
def _bad_cases(g):
    way = int(car_ways(g)[0])
    sid, off = np.asarray(g.shape_osm_id), np.asarray(g.shape_offsets)
    k = int(np.flatnonzero(np.diff(off) >= 2)[0])
    a, b = int(sid[off[k]]), int(sid[off[k] + 1])
    good = profile_row("rush", rush_speeds())
    short = "profile,short," + ",".join(["50"] * 671) + "\n"
    nan = good.replace("profile,rush,50,", "profile,rush,nan,", 1)
    neg = good.replace("profile,rush,50,", "profile,rush,-5,", 1)
    zero = good.replace("profile,rush,50,", "profile,rush,0,", 1)
    return {
        "unknown way": (good + f"{way},rush\n999999999999,rush\n", 3, "no routable road of OSM way 999999999999"),
        "unknown node pair": (good + f"{a},{b},rush\n1,2,rush\n", 3, "no road segment from OSM node 1"),
        "unknown profile": (good + f"{way},evening\n", 2, "unknown profile 'evening'"),
        "wrong column count": (good + short + f"{way},rush\n", 2, "671 speeds; a profile row is profile,<name>,<672"),
        "wrong columns of a row": (good + f"{way},rush,both,4\n", 2, "4 column(s)"),
        "own speeds wrong count": (good + f"{way}," + ",".join(["50"] * 600) + "\n", 2, "601 column(s)"),
        "NaN speed": (nan + f"{way},rush\n", 1, "speed 0 (column 3) must be a finite number above 0"),
        "negative speed": (neg + f"{way},rush\n", 1, "got '-5'"),
        "zero speed": (zero + f"{way},rush\n", 1, "got '0'"),
        "bad way id": (good + "12x,rush\n", 2, "way_id must be a positive integer"),
        "bad direction": (good + f"{way},rush,sideways\n", 2, "direction must be one of"),
        "twice defined": (good + good + f"{way},rush\n", 2, "defined twice (first on line 1)"),
        "ways and node pairs": (good + f"{way},rush\n{a},{b},rush\n", 3, "not both"),
        "empty file": ("\n\n", 1, "empty"),
        "profiles only": (good, None, "gives no way or node pair a profile"),
    }


@pytest.mark.parametrize("case", ["unknown way", "unknown node pair", "unknown profile", "wrong column count",
                                  "wrong columns of a row", "own speeds wrong count", "NaN speed", "negative speed",
                                  "zero speed", "bad way id", "bad direction", "twice defined",
                                  "ways and node pairs", "empty file", "profiles only"])
def test_bad_input_names_the_line_and_applies_nothing(li, applied, tmp_path, case):
    text, line, words = _bad_cases(li.graph)[case]
    before = li.profiles_info()
    files = sorted(p.name for p in li.time_of_day.store.dir.iterdir())
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(SpeedFileError) as err:
        li.apply_profiles(path)
    assert words in str(err.value)
    if line is not None:
        assert err.value.line == line and str(err.value).startswith(f"line {line}:")
    assert li.profiles_info() == before
    assert sorted(p.name for p in li.time_of_day.store.dir.iterdir()) == files


def test_bad_date_time_and_the_cli(li, applied, tmp_path, capsys, monkeypatch):
    with pytest.raises(Exception) as err:
        li.matrix(np.array([A]), np.array([B]), date_time={"type": 2, "value": "2026-11-24T07:30"})
    assert "arrive_by" in str(err.value)
    with pytest.raises(Exception) as err:
        li.route(locations=[{"lon": A[0], "lat": A[1]}, {"lon": B[0], "lat": B[1]}],
                 date_time={"type": 1, "value": "24.11.2026 07:30"})
    assert "date_time.value" in str(getattr(err.value, "errors", "")) or "date_time" in str(err.value)
    assert Selection(bucket_of(datetime(2026, 11, 30, 0, 0)), False, datetime(2026, 11, 30), 1).bucket == 0  # Monday
    assert bucket_of(datetime(2026, 11, 29, 23, 59)) == BUCKETS - 1  # Sunday
    from geoengine.cli import main

    monkeypatch.setenv("GEOENGINE_SPEEDS_DIR", str(li.settings.speeds_dir))
    rc = main(["speeds", "profiles", str(li.bundle.path), "--json"])
    out = capsys.readouterr().out
    assert rc == 0 and '"profiles"' in out


def test_measured_speeds_and_profiles_together(li, applied):
    """depart_at: an edge's profile speed first, its measured speed where it has no profile; current:
    the measured speed first."""
    g = li.graph
    ways = car_ways(g)
    seg_way = np.asarray(g.seg_way)
    w_both = int(ways[0])
    li.apply_speeds(f"{w_both},7\n".encode())
    try:
        e = np.flatnonzero(np.repeat(seg_way == w_both, 2))
        when = datetime(2026, 11, 24, 7, 30)
        dep = li.router.profile("auto", bucket=Selection(bucket_of(when), False, when, 1))
        cur = li.router.profile("auto", bucket=Selection(bucket_of(when), True, when, 0))
        ok = np.isfinite(dep.time[e])
        assert ok.any()
        e = e[ok]
        np.testing.assert_allclose(dep.time[e], hand_edge_seconds(g, e, bucket_of(when)), rtol=1e-9)
        length = np.asarray(g.seg_length, dtype=np.float64)[e >> 1]
        sig = motor_obstacles(g)[e]
        np.testing.assert_allclose(cur.time[e], length / (7 / 3.6) + sig, rtol=1e-9)
    finally:
        li.reset_speeds()


def test_own_speeds_reach_the_metric(li, applied, tmp_path):
    """A way's own 672 speeds: the bucket's metric reads the decoded DCT speeds."""
    g = li.graph
    way = int(car_ways(g)[5])
    w = np.arange(BUCKETS)
    own = 40 + 10 * np.sin(2 * np.pi * w / 96)
    path = tmp_path / "own.csv"
    path.write_text(f"{way}," + ",".join(f"{v:.3f}" for v in own) + "\n")
    try:
        info = li.apply_profiles(path)
        assert info["own_profiles"] == 1 and info["profiles"] == []
        e = np.flatnonzero(np.repeat(np.asarray(g.seg_way) == way, 2))
        for b in (0, 30, 500):
            when = datetime(2026, 11, 23) + timedelta(minutes=15 * b)  # Monday 00:00 + b quarter hours
            prof = li.router.profile("auto", bucket=Selection(bucket_of(when), False, when, 1))
            assert bucket_of(when) == b
            ee = e[np.isfinite(prof.time[e])]
            v = decode(encode(own), b)
            assert abs(v - own[b]) < 1.0
            length = np.asarray(g.seg_length, dtype=np.float64)[ee >> 1]
            sig = motor_obstacles(g)[ee]
            np.testing.assert_allclose(prof.time[ee], length / (v / 3.6) + sig, rtol=1e-6)
    finally:
        li.apply_profiles(applied[0])
