"""engine.accessibility and engine.nearest_pois against a scipy Dijkstra oracle on the same network."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from scipy.sparse.csgraph import dijkstra

from geoengine.errors import InvalidRequest


def _oracle_from(net, metric, nodes):
    """d(node, every junction) for each of `nodes` (forward)."""
    return dijkstra(net.to_scipy(metric), indices=nodes)


def _oracle_to(net, metric, nodes):
    """d(every junction, node) for each of `nodes`."""
    return dijkstra(net.to_scipy(metric).T.tocsr(), indices=nodes)


@pytest.mark.parametrize("limit", [180.0, 600.0])
def test_count_equals_oracle(andorra, real_pois, limit):
    net = andorra.network("auto")
    r = andorra.accessibility(real_pois, "auto", max_time_s=limit)
    poi_nodes, _ = net.nearest_nodes(real_pois[:, 0], real_pois[:, 1])
    d = _oracle_to(net, "time_s", poi_nodes)  # [POI, junction]
    expected = (d <= limit).sum(axis=0)
    assert np.array_equal(r.count, expected)
    assert np.array_equal(r.value, expected.astype(float))
    assert r.count.max() > 10 and (r.count == 0).any()  # real spread: dense centres, empty valleys


@pytest.mark.parametrize("aggregation", ["sum", "mean", "min", "max"])
def test_weighted_aggregations_equal_oracle(andorra, real_pois, aggregation):
    net = andorra.network("pedestrian")
    w = np.random.default_rng(1).uniform(1, 100, len(real_pois))
    r = andorra.accessibility(real_pois, "pedestrian", max_distance_m=1500, aggregation=aggregation, weights=w)
    poi_nodes, _ = net.nearest_nodes(real_pois[:, 0], real_pois[:, 1])
    reach = _oracle_to(net, "length_m", poi_nodes) <= 1500
    cnt = reach.sum(axis=0)
    with np.errstate(invalid="ignore"):
        expected = {
            "sum": (reach * w[:, None]).sum(axis=0),
            "mean": np.where(cnt > 0, (reach * w[:, None]).sum(axis=0) / np.maximum(cnt, 1), np.nan),
            "min": np.where(cnt > 0, np.where(reach, w[:, None], np.inf).min(axis=0), np.nan),
            "max": np.where(cnt > 0, np.where(reach, w[:, None], -np.inf).max(axis=0), np.nan),
        }[aggregation]
    np.testing.assert_allclose(r.value, expected, rtol=1e-12, equal_nan=True)
    assert np.array_equal(r.count, cnt)


def test_at_points_is_the_value_at_their_junction(andorra, real_pois, town_points):
    all_nodes = andorra.accessibility(real_pois, "auto", max_time_s=300)
    at = andorra.accessibility(real_pois, "auto", max_time_s=300, at=town_points)
    assert len(at.value) == len(town_points)
    assert np.array_equal(at.value, all_nodes.value[at.node])
    assert (at.snap_distance_m >= 0).all() and np.median(at.snap_distance_m) < 200
    df = at.to_pandas()
    assert list(df.columns) == ["lon", "lat", "node", "snap_distance_m", "count", "value"]
    gdf = at.to_geopandas()
    assert gdf.crs.to_epsg() == 4326 and gdf.geometry.iloc[0].x == town_points[0, 0]


def test_independent_of_thread_count(andorra, real_pois):
    w = np.random.default_rng(2).uniform(0, 1, len(real_pois))
    a = andorra.accessibility(real_pois, "auto", max_time_s=420, aggregation="sum", weights=w)
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        b = andorra.accessibility(real_pois, "auto", max_time_s=420, aggregation="sum", weights=w)
    finally:
        numba.set_num_threads(before)
    assert a.value.tobytes() == b.value.tobytes()


def test_chunk_grouping_and_lanes_do_not_change_the_result(andorra, real_pois, monkeypatch):
    """Chunks swept together (one bit matrix, 16 sources per sweep, 64 per thread task) give each chunk's own
    partials: equal to sweeping the chunks one by one and to a reach matrix of one source at a time."""
    from geoengine.routing import access

    monkeypatch.setattr(access, "CHUNK_MAX", 37)  # chunks that do not line up with the 64-bit words
    net = andorra.network("auto")
    w = np.random.default_rng(3).uniform(0, 5, len(real_pois))
    pj, out, _d, _x, _y = access.prepare(net, real_pois, w, "sum", "nodes")
    parts = pj.chunks(net.n_nodes)
    assert len(parts) > 3
    together = access.chunk_partials(net, pj, parts, "time_s", 480.0, out)
    one_by_one = [access.chunk_partials(net, pj, [p], "time_s", 480.0, out)[0] for p in parts]
    for a, b in zip(together, one_by_one, strict=True):
        for x, y in zip(a, b, strict=True):
            assert x.tobytes() == y.tobytes()
    # the bits of the lane kernel equal a plain one-source-at-a-time PHAST
    ch = access.hierarchy(net, "time_s")
    rank = np.asarray(ch.rank, dtype=np.int64)
    src = rank[pj.node]
    bits = access._reach_bits(ch.up_off, ch.up_tgt, ch.up_w, ch.dn_off, ch.dn_tgt, ch.dn_w, src, 480.0, net.n_nodes,
                              numba.get_num_threads())
    got = np.unpackbits(bits.view(np.uint8), axis=1, bitorder="little")[:, :len(src)]
    n = net.n_nodes
    up = [(ch.up_off[r], ch.up_off[r + 1]) for r in range(n)]
    for p in range(0, len(src), 7):
        d = np.full(n, np.inf)
        d[src[p]] = 0.0
        for r in range(src[p], n):
            if d[r] <= 480.0:
                for k in range(ch.dn_off[r], ch.dn_off[r + 1]):
                    d[ch.dn_tgt[k]] = min(d[ch.dn_tgt[k]], d[r] + ch.dn_w[k])
        for r in range(n - 1, -1, -1):
            a, b = up[r]
            if b > a:
                d[r] = min(d[r], np.min(ch.up_w[a:b] + d[ch.up_tgt[a:b]]))
        np.testing.assert_array_equal(got[:, p].astype(bool), d <= 480.0)


def test_nearest_pois_equal_oracle(andorra, real_pois, town_points):
    net = andorra.network("auto")
    k = 4
    r = andorra.nearest_pois(town_points, real_pois, k, "auto", max_time_s=400)
    poi_nodes, _ = net.nearest_nodes(real_pois[:, 0], real_pois[:, 1])
    pt_nodes, _ = net.nearest_nodes(town_points[:, 0], town_points[:, 1])
    d = _oracle_from(net, "time_s", pt_nodes)[:, poi_nodes]  # [point, POI]
    expected = np.sort(np.where(d <= 400, d, np.inf), axis=1)[:, :k]
    np.testing.assert_allclose(r.distance, expected, rtol=1e-12)
    assert r.distance.shape == (len(town_points), k) and r.poi.shape == (len(town_points), k)
    found = r.poi >= 0
    assert np.array_equal(found, np.isfinite(r.distance))
    rows = np.nonzero(found)
    np.testing.assert_allclose(d[rows[0], r.poi[rows]], r.distance[rows], rtol=1e-12)
    df = r.to_pandas()
    assert set(df.columns) == {"point", "rank", "poi", "time_s"} and len(df) == int(found.sum())


def test_bad_input_names_the_argument(andorra, real_pois):
    cases = [
        (dict(pois=np.empty((0, 2)), max_time_s=60), "pois"),
        (dict(pois=np.array([[1.5, np.nan]]), max_time_s=60), "pois[0]"),
        (dict(pois=np.array([[42.5, 1.5, 3.0]]), max_time_s=60), "pois"),
        (dict(pois=real_pois, max_time_s=60, weights=[1.0, 2.0]), "weights"),
        (dict(pois=real_pois, max_time_s=60, aggregation="median"), "aggregation"),
        (dict(pois=real_pois), "max_time_s"),
        (dict(pois=real_pois, max_time_s=60, max_distance_m=100), "max_time_s"),
        (dict(pois=real_pois, max_distance_m=-5), "max_distance_m"),
        (dict(pois=real_pois, max_time_s=60, at="edges"), "at"),
        (dict(pois=real_pois, max_time_s=60, at=np.array([[np.inf, 42.5]])), "at[0]"),
    ]
    for kwargs, field in cases:
        with pytest.raises(InvalidRequest) as exc:
            andorra.accessibility(costing="auto", **kwargs)
        assert exc.value.errors[0].field == field, kwargs
    with pytest.raises(InvalidRequest) as exc:
        andorra.nearest_pois(real_pois[:3], real_pois[:5], k=6, max_time_s=60)
    assert exc.value.errors[0].field == "k" and "only 5 POIs" in exc.value.errors[0].message
    with pytest.raises(InvalidRequest) as exc:
        andorra.nearest_pois(np.empty((0, 2)), real_pois, k=1, max_time_s=60)
    assert exc.value.errors[0].field == "points"
    with pytest.raises(InvalidRequest) as exc:
        andorra.nearest_pois(real_pois[:2], real_pois, k=0, max_time_s=60)
    assert exc.value.errors[0].field == "k"
    with pytest.raises(InvalidRequest) as exc:
        andorra.accessibility(real_pois, "spaceship", max_time_s=60)
    assert exc.value.errors[0].field == "costing"
