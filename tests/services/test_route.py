"""The router on the real session bundles (Andorra, Liechtenstein): answers against an independent
oracle (scipy.sparse.csgraph over the same Profile's turn graph and the same location offsets), CH vs
the exact fallback, matrix vs route, and named real cases (oneway, turn restriction, mode access,
units, options, truck limits, location types)."""

from __future__ import annotations

import numpy as np
import osmium
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra as scipy_dijkstra

from geoengine.costing import parse_costing_options
from geoengine.errors import InvalidRequest, NoRoute, Unsnappable
from geoengine.graph import tags as T
from geoengine.routing.profile import unpack
from geoengine.services.models import Location

REGIONS = ["andorra", "liechtenstein"]


@pytest.fixture(scope="module", params=REGIONS)
def engine(request):
    return request.getfixturevalue(request.param)


# -- helpers -------------------------------------------------------------------------------------------
def random_points(graph, usable, n, seed, jitter_m=6.0):
    """n (lon, lat) points next to random interior shape points of segments that `usable` allows in at
    least one direction (so they snap onto real roads)."""
    rng = np.random.default_rng(seed)
    segs = np.flatnonzero(usable[0::2] | usable[1::2])
    so = np.asarray(graph.shape_offsets)
    pick = rng.choice(segs, n)
    a, b = so[pick], so[pick + 1]
    idx = a + (rng.random(n) * (b - a)).astype(np.int64)
    idx = np.minimum(idx, b - 1)
    lon = np.asarray(graph.shape_lon)[idx] + rng.normal(0, jitter_m / 75_000, n)
    lat = np.asarray(graph.shape_lat)[idx] + rng.normal(0, jitter_m / 111_000, n)
    return np.column_stack([lon, lat])


class Oracle:
    """Plain Dijkstra (scipy) over a Profile's turn graph: every arc charges its target edge, a
    location's candidates start with the rest of their edge and end by giving back the unused rest."""

    def __init__(self, prof):
        off, tgt, w, packed = prof.turn_csr()
        n = prof.graph.n_edges
        self.prof = prof
        self.n = n
        self.m = sp.csr_matrix((w, tgt.astype(np.int64), off), shape=(n, n))
        self.arc = {}
        src = np.repeat(np.arange(n), np.diff(off))
        for k, (x, y) in enumerate(zip(src.tolist(), tgt.tolist(), strict=True)):
            self.arc[(x, y)] = k
        self.w, self.packed, self.tgt, self.src = w, packed, tgt, src

    def _path_packed(self, pred, s, v):
        total, cur = 0.0, v
        while cur != s:
            p = int(pred[cur])
            assert p >= 0
            total += self.packed[self.arc[(p, cur)]]
            cur = p
        return total

    def best(self, src, dst):
        """(cost, time_s, length_m) of the cheapest path between candidate dicts, or None."""
        prof = self.prof
        se, sf, te, tf = src["edge"], src["fraction"], dst["edge"], dst["fraction"]
        so, so2 = prof.source_offsets(se, sf)
        to, to2 = prof.target_offsets(te, tf)
        D, P = scipy_dijkstra(self.m, indices=se, return_predecessors=True)
        best = None
        for i in range(len(se)):
            for j in range(len(te)):
                t = int(te[j])
                opts = []
                if se[i] == t and sf[i] <= tf[j]:  # along the same edge, ahead
                    frac = tf[j] - sf[i]
                    e = t
                    opts.append((frac * prof.cost[e], frac * prof.time[e], frac * prof.length[e]))
                # paths with at least one arc ending at t: via every in-arc u -> t
                ins = np.flatnonzero(self.tgt == t)
                if len(ins):
                    u = self.src[ins]
                    c = D[i, u] + self.w[ins]
                    k = int(np.argmin(c))
                    if np.isfinite(c[k]):
                        uu = int(u[k])
                        packed = so2[i] + self._path_packed(P[i], int(se[i]), uu) + self.packed[ins[k]] + to2[j]
                        tt, ll = unpack(packed)
                        opts.append((so[i] + c[k] + to[j], float(tt), float(ll)))
                for o in opts:
                    if best is None or o[0] < best[0]:
                        best = o
        return best


def locs(points, **kw):
    return [Location(lon=float(p[0]), lat=float(p[1]), **kw) for p in points]


# -- oracle ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("options", [None, {"use_living_streets": 0.9, "top_speed": 90}],
                         ids=["defaults", "options"])
def test_route_equals_plain_dijkstra(engine, options):
    router = engine.router
    prof = router.profile("auto", parse_costing_options("auto", options))
    assert prof.ch is not None  # the CCH customised for these options (docs/routing-algorithms.md)
    oracle = Oracle(prof)
    pts = random_points(engine.graph, prof.usable, 60, seed=3)
    checked = 0
    for a, b in zip(pts[0::2], pts[1::2], strict=True):
        cands, pieces = None, None
        try:
            cands, pieces = router.route_legs(prof, locs([a, b]))
        except NoRoute:
            pass
        if cands is None:
            c0 = router.candidates(prof, locs([a])[0], 0)
            c1 = router.candidates(prof, locs([b])[0], 1)
            assert oracle.best(c0, c1) is None
            continue
        want = oracle.best(cands[0], cands[1])
        assert want is not None
        leg = pieces[0]
        assert leg.cost == pytest.approx(want[0], rel=1e-9, abs=1e-6)
        assert leg.time_s == pytest.approx(want[1], abs=0.11)
        assert leg.length_m == pytest.approx(want[2], abs=0.11)
        checked += 1
    assert checked >= 20


def test_ch_equals_exact_fallback(engine):
    """The bundle's hierarchy and the fallback (the same Profile without ch) agree on every pair."""
    router = engine.router
    prof = router.profile("auto")
    assert prof.ch is not None
    from geoengine.routing.profile import Profile

    plain = Profile(engine.graph, "auto")
    pts = random_points(engine.graph, prof.usable, 80, seed=5)
    n = 0
    for a, b in zip(pts[0::2], pts[1::2], strict=True):
        la = locs([a, b])
        c0, c1 = router.candidates(prof, la[0], 0), router.candidates(prof, la[1], 1)
        x = router.shortest(prof, c0, c1)
        y = router.shortest(plain, c0, c1)
        assert (x is None) == (y is None)
        if x is not None:
            n += 1
            assert x.cost == pytest.approx(y.cost, rel=1e-9, abs=1e-6)
            assert x.time_s == pytest.approx(y.time_s, abs=1e-6)
            assert x.length_m == pytest.approx(y.length_m, abs=1e-6)
    assert n >= 20


@pytest.mark.parametrize("costing,options", [("auto", None), ("auto", {"use_tracks": 0.8}),
                                             ("pedestrian", None), ("bicycle", {"cycling_speed": 22})])
def test_matrix_equals_routes(engine, costing, options):
    prof = engine.router.profile(costing, parse_costing_options(costing, options))
    pts = random_points(engine.graph, prof.usable, 14, seed=11)
    src, dst = pts[:6], pts[6:]
    m = engine.matrix(src, dst, costing, options)
    assert m.time_s.shape == (6, 8)
    found = 0
    for i in range(6):
        for j in range(8):
            try:
                trip = engine.route(locations=[{"lon": src[i][0], "lat": src[i][1]},
                                               {"lon": dst[j][0], "lat": dst[j][1]}],
                                    costing=costing, costing_options=options)["trip"]
            except NoRoute:
                assert not np.isfinite(m.time_s[i, j])
                continue
            found += 1
            assert m.time_s[i, j] == pytest.approx(trip["summary"]["time"], abs=1e-3)
            assert m.distance_m[i, j] / 1000 == pytest.approx(trip["summary"]["length"], abs=1.5e-3)
    assert found >= 24
    # snapped positions lie on the network, within the default search reach
    assert np.all(np.abs(m.sources - src) < 0.01)


@pytest.mark.parametrize("options", [None, {"top_speed": 100}], ids=["ch", "fallback"])
def test_matrix_same_edge_behind_and_ahead(liechtenstein, options):
    """A target behind the source on the same road: the matrix answers like the route (a loop or the
    other direction), never the trivial negative/zero meeting."""
    g = liechtenstein.graph
    prof = liechtenstein.router.profile("auto")
    # a long two-way residential segment
    seg = np.flatnonzero(prof.usable[0::2] & prof.usable[1::2] & (np.asarray(g.seg_length) > 300))[0]
    so = np.asarray(g.shape_offsets)
    lon = np.asarray(g.shape_lon)[so[seg]:so[seg + 1]]
    lat = np.asarray(g.shape_lat)[so[seg]:so[seg + 1]]
    from geoengine.graph.store import cut_polyline

    p1 = cut_polyline(lon, lat, 0.3, 0.3)
    p2 = cut_polyline(lon, lat, 0.7, 0.7)
    a = np.array([p1[0][0], p1[1][0]])
    b = np.array([p2[0][0], p2[1][0]])
    m = liechtenstein.matrix(np.array([a, b]), np.array([a, b]), "auto", options)
    for i, x in enumerate([a, b]):
        for j, y in enumerate([a, b]):
            trip = liechtenstein.route(locations=[{"lon": x[0], "lat": x[1]}, {"lon": y[0], "lat": y[1]}],
                                       costing_options=options)["trip"]
            assert m.time_s[i, j] == pytest.approx(trip["summary"]["time"], abs=1e-3)
    assert m.time_s[0, 0] == 0 and m.time_s[0, 1] > 0 and m.time_s[1, 0] > 0
    t, d = liechtenstein.route_many(np.array([a, b, a]), np.array([b, a, a]), "auto", options)
    assert np.allclose(t, [m.time_s[0, 1], m.time_s[1, 0], 0.0]) and np.allclose(d, [m.distance_m[0, 1],
                                                                                     m.distance_m[1, 0], 0.0])
    # 40% of the segment each way, about
    seg_len = float(g.seg_length[seg])
    assert m.distance_m[0, 1] == pytest.approx(0.4 * seg_len, rel=0.05)


def test_route_many_equals_route(liechtenstein):
    prof = liechtenstein.router.profile("auto")
    pts = random_points(liechtenstein.graph, prof.usable, 20, seed=21)
    t, d = liechtenstein.route_many(pts[:10], pts[10:])
    m = liechtenstein.matrix(pts[:10], pts[10:])
    assert np.allclose(t, np.diag(m.time_s)) and np.allclose(d, np.diag(m.distance_m))
    with pytest.raises(InvalidRequest):
        liechtenstein.route_many(pts[:3], pts[:4])


# -- named real cases ------------------------------------------------------------------------------------
def _segment_points(g, seg, fractions=(0.25, 0.75)):
    from geoengine.graph.store import cut_polyline

    so = np.asarray(g.shape_offsets)
    lon = np.asarray(g.shape_lon)[so[seg]:so[seg + 1]]
    lat = np.asarray(g.shape_lat)[so[seg]:so[seg + 1]]
    out = []
    for f in fractions:
        x, y = cut_polyline(lon, lat, f, f)
        out.append({"lon": float(x[0]), "lat": float(y[0])})
    return out


def test_oneway_honoured(liechtenstein):
    """On a long one-way street, going with the flow stays on it; against it goes round the block."""
    g = liechtenstein.graph
    prof = liechtenstein.router.profile("auto")
    ok = prof.usable
    oneway = np.flatnonzero(ok[0::2] & ~ok[1::2] & (np.asarray(g.seg_length) > 150)
                            & (np.asarray(g.seg_class) != T.CLASS["service"]))
    assert len(oneway) > 0
    checked = 0
    for seg in oneway[:10]:
        a, b = _segment_points(g, seg, (0.2, 0.8))
        try:
            fwd = liechtenstein.route(locations=[a, b])["trip"]["summary"]
            back = liechtenstein.route(locations=[b, a])["trip"]["summary"]
        except NoRoute:
            continue
        seg_len = float(g.seg_length[seg])
        assert fwd["length"] * 1000 == pytest.approx(0.6 * seg_len, rel=0.02, abs=2)
        assert back["length"] * 1000 > 0.6 * seg_len + 20
        checked += 1
    assert checked >= 3


def _restrictions(pbf):
    out = []
    for obj in osmium.FileProcessor(str(pbf)).with_filter(osmium.filter.KeyFilter("type")):
        if obj.is_relation() and obj.tags.get("type") == "restriction":
            m = {role: [] for role in ("from", "via", "to")}
            for mem in obj.members:
                if mem.role in m:
                    m[mem.role].append((mem.type, mem.ref))
            out.append({"restriction": obj.tags.get("restriction"), **m})
    return out


def test_turn_restriction_honoured(liechtenstein, shared_data_dir):
    """A real no_* relation: the route from the `from` way to the `to` way never takes the forbidden
    turn for cars, while pedestrians (who obey none) may."""
    g = liechtenstein.graph
    rels = [r for r in _restrictions(shared_data_dir / "liechtenstein/valhalla-liechtenstein-latest.osm.pbf")
            if (r["restriction"] or "").startswith("no_") and len(r["via"]) == 1 and r["via"][0][0] == "n"
            and g.node_of_osm(r["via"][0][1]) is not None]
    assert rels, "Liechtenstein carries a via-node no_* restriction"
    prof = liechtenstein.router.profile("auto")
    checked = 0
    for r in rels:
        v = g.node_of_osm(r["via"][0][1])
        ins = [int(e) for e in g.edges_of_way(r["from"][0][1]) if g.edge_dst[e] == v and prof.usable[e]]
        outs = [int(e) for e in g.edges_of_way(r["to"][0][1]) if g.edge_src[e] == v and prof.usable[e]]
        for a in ins:
            for b in outs:
                if b == a ^ 1:
                    continue
                pa = _segment_points(g, a >> 1, (0.5,))[0]
                pb = _segment_points(g, b >> 1, (0.5,))[0]
                # heading along edge a so the start is on the edge that enters the via node
                bearing = float(g.edge_bearing_end[a])
                req = {"locations": [{**pa, "heading": bearing, "heading_tolerance": 45}, pb]}
                cands, pieces = liechtenstein.router.route_legs(
                    prof, [Location(**x) for x in req["locations"]])
                edges = pieces[0].edges.tolist()
                assert cands[0]["edge"][0] == a
                pairs = set(zip(edges[:-1], edges[1:], strict=True))
                assert (a, b) not in pairs
                # the direct turn would be shorter: the restriction really forces a detour
                direct = (0.5 * g.seg_length[a >> 1] + 0.5 * g.seg_length[b >> 1])
                assert pieces[0].length_m > direct + 1
                walk = liechtenstein.route(costing="pedestrian", **req)["trip"]["summary"]
                assert walk["length"] * 1000 == pytest.approx(direct, rel=0.05, abs=3)
                checked += 1
    assert checked >= 1


def test_footway_for_pedestrians_not_cars(liechtenstein):
    g = liechtenstein.graph
    auto = liechtenstein.router.profile("auto").usable
    walk = liechtenstein.router.profile("pedestrian").usable
    foot = np.flatnonzero((np.asarray(g.seg_class) == T.CLASS["footway"]) & walk[0::2]
                          & (np.asarray(g.seg_length) > 80))
    assert len(foot)
    seg = int(foot[0])
    assert not auto[2 * seg] and not auto[2 * seg + 1]
    a, b = _segment_points(g, seg)
    w = liechtenstein.route(locations=[a, b], costing="pedestrian")["trip"]
    assert w["summary"]["length"] * 1000 == pytest.approx(0.5 * float(g.seg_length[seg]), rel=0.02, abs=2)
    # the car cannot snap onto the footway: its snapped points are elsewhere (or nowhere)
    try:
        c = liechtenstein.route(locations=[a, b], costing="auto")["trip"]
    except (NoRoute, Unsnappable):
        return
    assert c["locations"][0]["snapped"]["distance_m"] > 1.0


def test_miles_vs_kilometres(engine):
    prof = engine.router.profile("auto")
    pts = random_points(engine.graph, prof.usable, 2, seed=9)
    body = {"locations": [{"lon": p[0], "lat": p[1]} for p in pts]}
    km = engine.route(**body)["trip"]
    mi = engine.route(**body, directions_options={"units": "miles"})["trip"]
    assert mi["units"] == "miles"
    assert km["summary"]["length"] > 0.5
    assert km["summary"]["length"] / mi["summary"]["length"] == pytest.approx(1.609344, rel=2e-3)
    assert km["summary"]["time"] == mi["summary"]["time"]
    mk = engine.matrix_request(sources=body["locations"][:1], targets=body["locations"][1:])
    mm = engine.matrix_request(sources=body["locations"][:1], targets=body["locations"][1:], units="miles")
    assert mm["units"] == "miles"
    assert mk["sources_to_targets"][0][0]["distance"] / mm["sources_to_targets"][0][0]["distance"] == \
        pytest.approx(1.609344, rel=2e-3)


def _trip(engine, a, b, **kw):
    return engine.route(locations=[{"lon": a[0], "lat": a[1]}, {"lon": b[0], "lat": b[1]}], **kw)["trip"]


def test_use_highways_said_when_no_highways(engine):
    """Neither extract has a motorway or trunk road: use_highways is accepted, the route is the same,
    and the trip says the option cannot act here instead of ignoring it silently."""
    prof = engine.router.profile("auto")
    a, b = random_points(engine.graph, prof.component, 2, seed=61)
    hi = _trip(engine, a, b, costing_options={"use_highways": 1.0})
    lo = _trip(engine, a, b, costing_options={"use_highways": 0.0})
    assert lo["summary"] == hi["summary"]
    assert any("use_highways" in w for w in lo["warnings"])
    assert "warnings" not in _trip(engine, a, b)


def test_use_tolls_prices_the_envalira_tunnel(andorra):
    """Andorra's Envalira tunnel is tolled: through it, use_tolls 0 costs several times use_tolls 1
    (the pass over the top is longer still, so the route keeps the tunnel) and the trip has_toll."""
    g = andorra.graph
    segs = np.flatnonzero(np.asarray(g.seg_flags) & T.F_TOLL)
    seg = int(segs[np.argmax(np.asarray(g.seg_length)[segs])])
    a, b = _segment_points(g, seg, (0.1, 0.9))
    costs = {}
    for u in (0.0, 1.0):
        prof = andorra.router.profile("auto", parse_costing_options("auto", {"use_tolls": u}))
        costs[u] = andorra.router.route_legs(prof, [Location(**a), Location(**b)])[1][0].cost
        trip = andorra.route(locations=[a, b], costing_options={"use_tolls": u})["trip"]
        assert trip["summary"]["has_toll"] and "warnings" not in trip
    assert costs[0.0] > 3 * costs[1.0]


def test_shortest_is_shorter_and_slower(engine):
    prof = engine.router.profile("auto")
    pts = random_points(engine.graph, prof.usable, 40, seed=13)
    differ = slower = 0
    for a, b in zip(pts[0::2], pts[1::2], strict=True):
        try:
            fast = _trip(engine, a, b)
            short = _trip(engine, a, b, costing_options={"shortest": True})
        except NoRoute:
            continue
        assert short["summary"]["length"] <= fast["summary"]["length"] + 1e-3
        differ += short["summary"]["length"] < fast["summary"]["length"] - 0.01
        slower += short["summary"]["time"] > fast["summary"]["time"]
    assert differ >= 2 and slower >= 2
    # auto_shorter is the same as auto with shortest
    a, b = pts[0], pts[1]
    assert _trip(engine, a, b, costing="auto_shorter")["summary"]["length"] == pytest.approx(
        _trip(engine, a, b, costing_options={"shortest": True})["summary"]["length"], abs=1e-3)


def test_truck_height_and_weight_limits(liechtenstein):
    """Liechtenstein has roads with maxheight 3.6/3.8 m and maxweight 7.5 t: a default truck (4.11 m,
    21.77 t) never drives them, a small one may."""
    g = liechtenstein.graph
    L = np.asarray(g.seg_limits)
    for col, small in ((0, {"height": 2.5}), (3, {"weight": 3.0})):
        segs = np.flatnonzero(np.isfinite(L[:, col]) & (L[:, col] > 0) & (L[:, col] < 10))
        assert len(segs)
        checked = 0
        for seg in segs:
            big_prof = liechtenstein.router.profile("truck")
            small_prof = liechtenstein.router.profile("truck", parse_costing_options("truck", small))
            assert not big_prof.usable[2 * seg] and not big_prof.usable[2 * seg + 1]
            assert small_prof.usable[2 * seg] or small_prof.usable[2 * seg + 1]
            if not small_prof.component[2 * seg] or g.seg_length[seg] < 30:
                continue
            a, b = _segment_points(g, seg, (0.3, 0.7))
            trip = liechtenstein.route(locations=[a, b], costing="truck", costing_options=small)["trip"]
            assert trip["summary"]["length"] * 1000 == pytest.approx(0.4 * float(g.seg_length[seg]), rel=0.03, abs=2)
            cands, pieces = liechtenstein.router.route_legs(big_prof, [Location(**a), Location(**b)])
            for p in pieces:
                assert seg not in (p.edges >> 1).tolist()
            checked += 1
        # the weight-limited roads of the extract are a private fragment off the main network: the
        # costing test above covers them; the height-limited road is on the main network and routed
        assert checked >= 1 or col == 3


def test_walking_speed_changes_time(engine):
    prof = engine.router.profile("pedestrian")
    a, b = random_points(engine.graph, prof.usable, 2, seed=17)
    slow = _trip(engine, a, b, costing="pedestrian", costing_options={"walking_speed": 3.0})["summary"]
    fast = _trip(engine, a, b, costing="pedestrian", costing_options={"walking_speed": 6.0})["summary"]
    assert slow["length"] == pytest.approx(fast["length"], abs=1e-3)
    assert slow["time"] == pytest.approx(2 * fast["time"], rel=0.01)


# -- location semantics ------------------------------------------------------------------------------------
def _three(engine, seed=23):
    prof = engine.router.profile("auto")
    return random_points(engine.graph, prof.usable, 3, seed=seed)


def test_location_types_and_legs(liechtenstein):
    p = _three(liechtenstein)
    base = [{"lon": x[0], "lat": x[1]} for x in p]
    legs = {}
    for kind in ("break", "through", "via", "break_through"):
        body = [base[0], {**base[1], "type": kind}, base[2]]
        trip = liechtenstein.route(locations=body)["trip"]
        legs[kind] = trip
        assert trip["locations"][1]["type"] == kind
    assert len(legs["break"]["legs"]) == 2 and len(legs["break_through"]["legs"]) == 2
    assert len(legs["through"]["legs"]) == 1 and len(legs["via"]["legs"]) == 1
    # break and via may U-turn at the middle location: they cost the same and no more than through
    assert legs["via"]["summary"]["time"] == pytest.approx(legs["break"]["summary"]["time"], abs=1e-3)
    assert legs["through"]["summary"]["time"] >= legs["via"]["summary"]["time"] - 1e-3
    assert legs["break_through"]["summary"]["time"] == pytest.approx(legs["through"]["summary"]["time"], abs=1e-3)
    # leg summaries add up to the trip's
    t = legs["break"]
    assert sum(x["summary"]["time"] for x in t["legs"]) == pytest.approx(t["summary"]["time"], abs=2e-3)
    assert sum(x["summary"]["length"] for x in t["legs"]) == pytest.approx(t["summary"]["length"], abs=2e-3)


def test_through_forbids_u_turn_at_the_location(liechtenstein):
    """Out along a dead-end-free two-way road and back: via allows turning round at the middle point,
    through has to continue and find another way back, so it is longer."""
    g = liechtenstein.graph
    prof = liechtenstein.router.profile("auto")
    segs = np.flatnonzero(prof.usable[0::2] & prof.usable[1::2] & (np.asarray(g.seg_length) > 200))
    checked = 0
    for seg in segs[:15]:
        a, b = _segment_points(g, int(seg), (0.2, 0.8))
        try:
            via = liechtenstein.route(locations=[a, {**b, "type": "via"}, a])["trip"]["summary"]
            thr = liechtenstein.route(locations=[a, {**b, "type": "through"}, a])["trip"]["summary"]
        except NoRoute:
            continue
        assert via["length"] * 1000 == pytest.approx(1.2 * float(g.seg_length[seg]), rel=0.03, abs=3)
        assert thr["length"] > via["length"] + 0.01
        checked += 1
    assert checked >= 3


def test_waiting_secs_added(liechtenstein):
    p = _three(liechtenstein)
    base = [{"lon": x[0], "lat": x[1]} for x in p]
    t0 = liechtenstein.route(locations=base)["trip"]
    t1 = liechtenstein.route(locations=[base[0], {**base[1], "waiting_secs": 600}, base[2]])["trip"]
    assert t1["summary"]["time"] == pytest.approx(t0["summary"]["time"] + 600, abs=1e-3)
    assert t1["legs"][0]["summary"]["time"] == pytest.approx(t0["legs"][0]["summary"]["time"] + 600, abs=1e-3)
    assert t1["legs"][1]["summary"]["time"] == pytest.approx(t0["legs"][1]["summary"]["time"], abs=1e-3)


def test_heading_picks_direction(liechtenstein):
    g = liechtenstein.graph
    prof = liechtenstein.router.profile("auto")
    seg = int(np.flatnonzero(prof.usable[0::2] & prof.usable[1::2] & (np.asarray(g.seg_length) > 300))[3])
    a, b = _segment_points(g, seg, (0.5, 0.9))
    fwd = float(g.edge_bearing_start[2 * seg])
    cands, _ = liechtenstein.router.route_legs(prof, [Location(**a, heading=fwd, heading_tolerance=30),
                                                      Location(**b)])
    assert cands[0]["edge"][0] == 2 * seg
    cands, pieces = liechtenstein.router.route_legs(prof, [Location(**a, heading=(fwd + 180) % 360,
                                                                    heading_tolerance=30), Location(**b)])
    assert cands[0]["edge"][0] == 2 * seg + 1
    # starting the wrong way round means a detour to reach b ahead on the road
    assert pieces[0].length_m > 0.4 * float(g.seg_length[seg]) + 10


def far_from_roads(engine, costing="auto", min_m=100.0):
    """A point inside the extract whose nearest road the costing may use is more than `min_m` away
    but within the default reach (500 m)."""
    prof = engine.router.profile(costing)
    x0, y0, x1, y1 = engine.bbox
    rng = np.random.default_rng(1)
    for lon, lat in zip(rng.uniform(x0, x1, 400), rng.uniform(y0, y1, 400), strict=True):
        try:
            engine.snapper.snap(lon, lat, prof.usable, search_radius=min_m)
            continue
        except Unsnappable:
            pass
        try:
            c = engine.snapper.snap(lon, lat, prof.usable, component_mask=prof.component)
        except Unsnappable:
            continue
        if prof.component[c.edge].all():
            return float(lon), float(lat)
    pytest.fail("no point between 100 and 500 m from a road")


def test_search_radius_and_unsnappable(liechtenstein):
    prof = liechtenstein.router.profile("auto")
    a = random_points(liechtenstein.graph, prof.component, 1, seed=31, jitter_m=0)[0]
    lon, lat = far_from_roads(liechtenstein)
    with pytest.raises(Unsnappable) as exc:
        liechtenstein.route(locations=[{"lon": a[0], "lat": a[1]}, {"lon": lon, "lat": lat, "search_radius": 100}])
    assert exc.value.errors[0].field == "locations[1]"
    # the default reach (growing to 500 m) finds a road of the main network: a route
    trip = liechtenstein.route(locations=[{"lon": a[0], "lat": a[1]}, {"lon": lon, "lat": lat}])["trip"]
    assert 100 < trip["locations"][1]["snapped"]["distance_m"] <= 500
    with pytest.raises(Unsnappable) as exc:
        liechtenstein.matrix_request(sources=[{"lon": a[0], "lat": a[1]}],
                                     targets=[{"lon": a[0], "lat": a[1]}, {"lon": lon, "lat": lat, "search_radius": 50}])
    assert [e.field for e in exc.value.errors] == ["targets[1]"]


def test_preferred_side_reaches_the_snapper(liechtenstein, monkeypatch):
    seen = {}
    snapper = liechtenstein.router.snapper
    orig = snapper.snap

    def spy(*args, **kw):
        seen.setdefault("sides", []).append(kw.get("preferred_side"))
        return orig(*args, **kw)

    monkeypatch.setattr(snapper, "snap", spy)
    p = _three(liechtenstein)
    liechtenstein.route(locations=[{"lon": p[0][0], "lat": p[0][1], "preferred_side": "opposite"},
                                   {"lon": p[1][0], "lat": p[1][1], "preferred_side": "same"}])
    assert seen["sides"] == ["opposite", "same"]


def test_unreachable_pair_is_no_route(liechtenstein):
    """An island of the network (a component the rest cannot reach) gives NoRoute naming the pair."""
    from geoengine.graph.turns import largest_component

    prof = liechtenstein.router.profile("auto")
    off, tgt, _w, _p = prof.turn_csr()
    main = largest_component(off, tgt, prof.usable)
    island = np.flatnonzero(prof.usable & ~main & (np.asarray(liechtenstein.graph.edge_length) > 30))
    if not len(island):
        pytest.skip("no island of the car network in this extract")
    g = liechtenstein.graph
    a = _segment_points(g, int(island[0]) >> 1, (0.5,))[0]
    b = random_points(g, main, 1, seed=41, jitter_m=0)[0]
    # an island location next to nothing else but the island: either snapped onto the main network
    # (component preference) or the pair has no route, never a crash
    try:
        liechtenstein.route(locations=[{"lon": b[0], "lat": b[1]}, {**a, "search_radius": 3}])
    except NoRoute as exc:
        assert exc.errors[0].field == "locations[1]"


def test_avoid_locations_and_polygons(liechtenstein):
    prof = liechtenstein.router.profile("auto")
    pts = random_points(liechtenstein.graph, prof.usable, 20, seed=43)
    for a, b in zip(pts[0::2], pts[1::2], strict=True):
        try:
            base = liechtenstein.router.route_legs(prof, locs([a, b]))[1][0]
        except NoRoute:
            continue
        if len(base.edges) < 6:
            continue
        mid = int(base.edges[len(base.edges) // 2])
        p = _segment_points(liechtenstein.graph, mid >> 1, (0.5,))[0]
        body = [{"lon": a[0], "lat": a[1]}, {"lon": b[0], "lat": b[1]}]
        t0 = liechtenstein.route(locations=body)["trip"]["summary"]
        try:
            t1 = liechtenstein.route(locations=body, avoid_locations=[{**p, "radius": 5}])["trip"]["summary"]
        except NoRoute:
            continue
        assert t1["time"] > t0["time"]
        d = 0.0003
        ring = [(p["lon"] - d, p["lat"] - d), (p["lon"] + d, p["lat"] - d), (p["lon"] + d, p["lat"] + d),
                (p["lon"] - d, p["lat"] + d)]
        try:
            t2 = liechtenstein.route(locations=body, avoid_polygons=[ring])["trip"]["summary"]
            assert t2["time"] > t0["time"]
        except NoRoute:
            pass
        return
    pytest.fail("no route long enough to test avoidance")


def test_grid_snapping_equals_snapper(engine):
    """The Numba grid fast path gives the candidates Snapper.snap_many gives (with the component
    preference), for random points near and off roads, strict radii included."""
    router = engine.router
    for costing in ("auto", "pedestrian"):
        prof = router.profile(costing)
        pts = random_points(engine.graph, prof.usable, 150, seed=51, jitter_m=40)
        for k, (lon, lat) in enumerate(pts):
            radius = None if k % 3 else 10.0
            try:
                cs = router.snapper.snap_many([lon], [lat], prof.usable, search_radius=radius,
                                              component_mask=prof.component)
                want = cs.of(0)
            except Unsnappable:
                with pytest.raises(Unsnappable):
                    router.grid.candidates(lon, lat, radius, prof.usable, prof.component, 0, "locations")
                continue
            e, f, _lo, _la, d = router.grid.candidates(lon, lat, radius, prof.usable, prof.component, 0, "locations")
            assert e.tolist() == want.edge.tolist()
            assert np.allclose(f, want.fraction, atol=1e-9) and np.allclose(d, want.distance, atol=1e-6)


def test_route_options_reuse_the_route_search(liechtenstein, monkeypatch):
    """alternates and linear_references are built from the search /route already made, not a second one."""
    router = liechtenstein.router
    calls = []
    real = router.route_legs

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(router, "route_legs", counting)
    a, b = {"lon": 9.5209, "lat": 47.1410}, {"lon": 9.5100, "lat": 47.1660}
    doc = liechtenstein.route(locations=[a, b], alternates=1, linear_references=True)
    assert doc["trip"]["linear_references"] and "alternates" in doc
    assert len(calls) == 1
