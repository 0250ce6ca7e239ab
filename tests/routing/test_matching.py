"""Map matching on real extracts: traces made from real routes (resampled every 15 m, 10 m Gaussian
noise, fixed seeds) must come back on the route's own edges."""

from __future__ import annotations

import numpy as np
import pytest
from match_traces import route_trace

from geoengine.errors import InvalidRequest, Unprocessable, Unsnappable
from geoengine.geo import encode_polyline
from geoengine.routing import matching as M

ANDORRA_TRIPS = [((1.5211, 42.5063), (1.5730, 42.5450)), ((1.4866, 42.5425), (1.5327, 42.5106)),
                 ((1.5979, 42.5359), (1.5180, 42.4970))]
LIECHTENSTEIN_TRIPS = [((9.5209, 47.1410), (9.5100, 47.2300)), ((9.5560, 47.1450), (9.5050, 47.0800))]


def _shape(lon, lat):
    return [{"lon": float(a), "lat": float(b)} for a, b in zip(lon, lat, strict=True)]


@pytest.fixture(scope="module")
def traces(andorra, liechtenstein):
    out = []
    for eng, trips in ((andorra, ANDORRA_TRIPS), (liechtenstein, LIECHTENSTEIN_TRIPS)):
        for a, b in trips:
            for seed in (0, 1):
                out.append((eng, route_trace(eng, a, b, seed=seed, noise_m=10.0)))
    return out


def test_noisy_traces_match_the_true_edges(traces):
    right = total = 0
    far_right = far_total = 0
    for eng, tr in traces:
        res = eng.match_trace(tr.lon, tr.lat)
        ok = res.edge == tr.true_edge
        right += int(ok.sum())
        total += len(ok)
        far = tr.junction_m > 20.0  # farther than two noise sigmas from an edge end: unambiguous
        far_right += int(ok[far].sum())
        far_total += int(far.sum())
        assert len(res.sections) == 1
        assert (res.type != M.UNMATCHED).all()
    assert total > 5000
    assert right / total >= 0.95, f"{right}/{total} points on the true edge"
    assert far_right / far_total >= 0.99, f"{far_right}/{far_total} points away from junctions on the true edge"


def test_matched_sections_are_connected_paths(traces):
    for eng, tr in traces[:4]:
        prof = eng.router.profile("auto")
        res = eng.match_trace(tr.lon, tr.lat)
        s = prof.search
        for sec in res.sections:
            e = sec.edges
            assert prof.usable[e].all()
            for u, v in zip(e[:-1].tolist(), e[1:].tolist(), strict=True):  # a few hundred edges
                assert v in s.targets[s.offsets[u]:s.offsets[u + 1]], f"no turn {u} -> {v}"
        # matched route length within 3 % of the route the trace was made from
        matched = eng.map_match(shape=_shape(tr.lon, tr.lat), directions_options={"directions_type": "none"})
        length_m = matched["trip"]["summary"]["length"] * 1000.0
        assert abs(length_m - tr.length_m) <= 0.03 * tr.length_m + 30.0


def test_matched_points_are_near_their_trace_points(traces):
    eng, tr = traces[0]
    res = eng.match_trace(tr.lon, tr.lat, search_radius=50.0)
    got = res.type != M.UNMATCHED
    assert np.nanmax(res.distance[got]) <= 50.0 + 1e-6
    # the matched position is on the matched edge at the reported fraction
    lon, lat = eng.matcher._point_at(res.edge[got], res.fraction[got])
    assert np.allclose(lon, res.lon[got], atol=2e-5) and np.allclose(lat, res.lat[got], atol=2e-5)


def test_encoded_polyline_input_equals_shape_input(andorra, traces):
    _, tr = traces[0]
    lon, lat = tr.lon[:150], tr.lat[:150]
    a = andorra.trace_attributes(shape=_shape(lon, lat))
    b = andorra.trace_attributes(encoded_polyline=encode_polyline(lat, lon, 6))
    assert [e["id"] for e in a["edges"]] == [e["id"] for e in b["edges"]]
    assert len(b["matched_points"]) == 150


def test_edge_walk_follows_an_exact_route_shape(andorra, traces):
    _, tr = traces[0]
    res = andorra.match_trace(tr.shape_lon, tr.shape_lat, mode="edge_walk")
    assert len(res.sections) == 1
    assert (res.type == M.MATCHED).all()
    assert res.sections[0].edges.tolist() == tr.edges.tolist()
    doc = andorra.trace_attributes(encoded_polyline=encode_polyline(tr.shape_lat, tr.shape_lon, 6),
                                   shape_match="edge_walk")
    assert [e["id"] for e in doc["edges"]] == tr.edges.tolist()


def test_edge_walk_refuses_a_noisy_trace_and_walk_or_snap_falls_back(andorra, traces):
    _, tr = traces[0]
    shape = _shape(tr.lon[:120], tr.lat[:120])
    with pytest.raises(Unprocessable) as exc:
        andorra.map_match(shape=shape, shape_match="edge_walk")
    assert exc.value.errors and exc.value.errors[0].field.startswith("shape[")
    snapped = andorra.trace_attributes(shape=shape, shape_match="map_snap")
    either = andorra.trace_attributes(shape=shape, shape_match="walk_or_snap")
    assert [e["id"] for e in either["edges"]] == [e["id"] for e in snapped["edges"]]


def test_walk_or_snap_walks_when_it_can(andorra, traces):
    _, tr = traces[1]
    shape = _shape(tr.shape_lon, tr.shape_lat)
    walk = andorra.trace_attributes(shape=shape, shape_match="edge_walk")
    either = andorra.trace_attributes(shape=shape, shape_match="walk_or_snap")
    assert either["edges"] == walk["edges"]


def test_gap_beyond_breakage_distance_splits_the_match(andorra, traces):
    _, tr = traces[0]
    lon = np.r_[tr.lon[:60], tr.lon[200:260]]
    lat = np.r_[tr.lat[:60], tr.lat[200:260]]
    gap = float(M.haversine_m(lat[59], lon[59], lat[60], lon[60]))
    assert gap > 500
    res = andorra.match_trace(lon, lat, breakage_distance=gap / 2)
    assert len(res.sections) == 2
    assert (res.section[:60] == 0).all() and (res.section[60:] == 1).all()
    doc = andorra.map_match(shape=_shape(lon, lat), trace_options={"breakage_distance": gap / 2})
    assert len(doc["trip"]["legs"]) == 2 and doc["matched"]["sections"] == 2
    # without the low breakage distance the gap is routed through
    assert len(andorra.match_trace(lon, lat).sections) == 1


def test_points_off_the_network_are_unmatched(andorra, traces):
    _, tr = traces[0]
    lon, lat = tr.lon[:80].copy(), tr.lat[:80].copy()
    lon[40], lat[40] = 1.30, 42.40  # far outside Andorra's roads
    res = andorra.match_trace(lon, lat)
    assert res.type[40] == M.UNMATCHED and res.edge[40] == -1
    assert (np.delete(res.type, 40) != M.UNMATCHED).all()
    with pytest.raises(Unsnappable):
        andorra.match_trace(np.array([1.30, 1.31]), np.array([42.40, 42.41]))


def test_interpolated_points_lie_on_the_matched_route(andorra, traces):
    _, tr = traces[2]
    res = andorra.match_trace(tr.lon, tr.lat, interpolation_distance=40.0)
    interp = res.type == M.INTERPOLATED
    assert interp.sum() > len(tr.lon) // 3
    on_route = np.isin(res.edge[interp], res.edges)
    assert on_route.all()
    # matched points follow the route in order; an interpolated point lies between its matched neighbours
    matched = np.flatnonzero(res.type == M.MATCHED)
    assert (np.diff(res.edge_index[matched]) >= 0).all()
    pos = np.searchsorted(matched, np.flatnonzero(interp))
    inner = (pos > 0) & (pos < len(matched))
    ii = np.flatnonzero(interp)[inner]
    lo = res.edge_index[matched[pos[inner] - 1]]
    hi = res.edge_index[matched[pos[inner]]]
    assert ((res.edge_index[ii] >= lo) & (res.edge_index[ii] <= hi)).all()
    assert (res.edge[interp] == tr.true_edge[interp]).mean() >= 0.9


def test_pedestrian_and_bicycle_traces(andorra):
    for costing in ("pedestrian", "bicycle"):
        tr = route_trace(andorra, (1.5300, 42.5050), (1.5420, 42.5110), costing=costing, step_m=10.0, noise_m=5.0,
                         seed=3)
        res = andorra.match_trace(tr.lon, tr.lat, costing=costing)
        ok = res.edge == tr.true_edge
        # the old town's edges are short: misses happen only within a few noise sigmas of a junction
        assert ok.mean() >= 0.85
        assert ok[tr.junction_m > 15.0].mean() >= 0.98


@pytest.mark.parametrize("fields, field", [
    ({}, "shape"),
    ({"shape": [{"lon": 1.52, "lat": 42.5}]}, "shape"),
    ({"shape": [{"lon": 1.52, "lat": 42.5}] * 2, "encoded_polyline": "_p~iF~ps|U_ulLnnqC"}, "shape"),
    ({"shape": [{"lon": 1.52, "lat": 42.5}] * 2, "costing": "truck"}, "costing"),
    ({"shape": [{"lon": 1.52, "lat": 42.5}] * 2, "trace_options": {"gps_accuracy": -1}}, "trace_options.gps_accuracy"),
    ({"shape": [{"lon": 1.52, "lat": 95.0}] * 2}, "shape[0].lat"),
    ({"encoded_polyline": "_p~iF"}, "encoded_polyline"),
])
def test_bad_requests(andorra, fields, field):
    with pytest.raises(InvalidRequest) as exc:
        andorra.map_match(**fields)
    assert any(e.field == field for e in exc.value.errors), exc.value.errors


def test_viterbi_breaks_where_no_transition_exists():
    # three points, one candidate each; the transition 1 -> 2 is impossible
    coff = np.array([0, 1, 2, 3])
    emis = np.zeros(3)
    kept = np.array([0, 1, 2])
    trans = np.array([10.0, np.inf])
    out_off = np.array([0, 1, 2])
    gc = np.array([10.0, 10.0])
    choice, section = M._viterbi(coff, emis, kept, trans, out_off, gc, 3.0, 2000.0)
    assert choice.tolist() == [0, 1, 2]
    assert section.tolist() == [0, 0, 1]
    # and where the gap exceeds the breakage distance
    choice, section = M._viterbi(coff, emis, kept, np.array([10.0, 10.0]), out_off, np.array([10.0, 3000.0]), 3.0,
                                 2000.0)
    assert section.tolist() == [0, 0, 1]


def test_viterbi_prefers_the_consistent_path():
    # point 0 has two candidates; the nearer one (emission) has a transition that disagrees with the
    # straight-line distance by 100 m, the farther one agrees: the farther one wins
    coff = np.array([0, 2, 3])
    emis = np.array([0.0, -2.0, 0.0])
    kept = np.array([0, 1])
    trans = np.array([120.0, 20.0])
    out_off = np.array([0, 2])
    choice, section = M._viterbi(coff, emis, kept, trans, out_off, np.array([20.0]), 3.0, 2000.0)
    assert choice.tolist() == [1, 2]


def test_matching_a_route_shape_gives_the_route_back(andorra):
    a, b = ANDORRA_TRIPS[0]
    route = andorra.route(locations=[{"lon": a[0], "lat": a[1]}, {"lon": b[0], "lat": b[1]}],
                          directions_options={"directions_type": "none"})["trip"]
    matched = andorra.map_match(encoded_polyline=route["legs"][0]["shape"], shape_match="edge_walk",
                                directions_options={"directions_type": "none"})["trip"]
    assert len(matched["legs"]) == 1
    assert abs(matched["summary"]["length"] - route["summary"]["length"]) <= 0.002  # km
    # times include the costing's turn delays, as /route's do
    assert abs(matched["summary"]["time"] - route["summary"]["time"]) <= 0.005 * route["summary"]["time"]


def test_transition_distances_agree_with_plain_dijkstra(andorra, traces):
    """Oracle: every route length of the transition kernel equals a one-to-all Dijkstra over the same
    edge-based graph with length weights (and unreachable within the bound means farther than it)."""
    from geoengine.routing.dijkstra import Graph, one_to_all

    _, tr = traces[0]
    m = andorra.matcher
    prof = andorra.router.profile("auto")
    lon, lat = tr.lon[:80].copy(), tr.lat[:80].copy()
    coff, cedge, cfrac, _, _, _ = m._candidates(prof, lon, lat, 50.0, M.MAX_CANDIDATES)
    kept = np.arange(len(lon))
    gc = M.haversine_m(lat[:-1], lon[:-1], lat[1:], lon[1:])
    limit = 2.0 * gc + 200.0
    nc = np.diff(coff)
    out_off = np.r_[0, np.cumsum(nc[:-1] * nc[1:])]
    w = m._ws()
    _, off, tgt, wlen, elen = m._length_graph(prof)
    trans = M._transitions(off, tgt, wlen, elen, cedge, cfrac, coff, kept, limit, 100.0, out_off, w.dist, w.stamp,
                           w.tstamp, w.hk, w.hv, w.hpos, w.ctr)
    g = Graph(len(elen), off, tgt, wlen)
    checked = 0
    for k in range(0, len(kept) - 1, 7):
        a0, a1, b0, b1 = coff[k], coff[k + 1], coff[k + 1], coff[k + 2]
        for i in range(a0, a1):
            d, _ = one_to_all(g, [int(cedge[i])], [(1.0 - cfrac[i]) * elen[cedge[i]]])
            for j in range(b0, b1):
                got = trans[out_off[k] + (i - a0) * (b1 - b0) + (j - b0)]
                if cedge[j] == cedge[i]:
                    if cfrac[j] >= cfrac[i]:
                        assert got == pytest.approx((cfrac[j] - cfrac[i]) * elen[cedge[i]])
                    continue
                want = d[cedge[j]] - (1.0 - cfrac[j]) * elen[cedge[j]]
                if want <= limit[k]:
                    assert got == pytest.approx(want, abs=1e-6)
                    checked += 1
                else:
                    assert got == np.inf
    assert checked > 50
