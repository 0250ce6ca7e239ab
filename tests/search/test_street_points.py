"""The street points' nearest search (streetpoints.py) on real streets: the points are the one-shot numpy
formula's bit for bit, and every query answers as measuring every point does, equal distances ordered by
segment, then point."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import data_file


def _formula_points(seg, lat0, km, densify):
    """The numpy formula street_points used before (one shot): each segment's first vertex, then the extra
    points of each segment in turn."""
    def xy(lat, lon):
        return np.column_stack([np.asarray(lon) * km * np.cos(np.radians(lat0)), np.asarray(lat) * km])

    a, b = xy(seg[:, 1], seg[:, 0]), xy(seg[:, 3], seg[:, 2])
    extra = np.floor(np.hypot(*(b - a).T) / densify).astype(np.int64)
    rep = np.repeat(np.arange(len(seg)), extra)
    t = (np.arange(int(extra.sum())) - np.repeat(np.cumsum(extra) - extra, extra) + 1) / np.repeat(extra + 1, extra)
    pts = np.concatenate([a, a[rep] + t[:, None] * (b[rep] - a[rep])])
    return pts, np.concatenate([np.arange(len(seg), dtype=np.int32), rep.astype(np.int32)])


@pytest.fixture(scope="module")
def streets():
    """(segments of the named street ways of Liechtenstein as DocSet.set_polylines makes them, lat0, the
    document points)."""
    from geoengine.search import docset
    from geoengine.search.osm import read_osm

    ds, ways, _, _ = read_osm(data_file("liechtenstein/valhalla-liechtenstein-latest.osm.pbf"))
    ends = np.asarray(ways.ends, np.int64)
    ranges = np.column_stack([ends[:-1], ends[1:]])
    xy = ways.vertices()
    lat0 = float(np.mean(xy[:, 1]))
    one = docset.DocSet()
    one.set_polylines(xy, ranges, np.arange(len(ranges)))
    # the segments made a few at a time equal those made at once
    k = ranges[:, 1] - ranges[:, 0]
    nseg = np.maximum(k - 1, 1)
    first = np.repeat(ranges[:, 0] - np.cumsum(nseg) + nseg, nseg) + np.arange(int(nseg.sum()))
    second = first + (np.repeat(k, nseg) > 1)
    assert np.array_equal(one.seg, np.hstack([xy[first], xy[second]]))
    assert np.array_equal(one.seg_doc, np.repeat(np.arange(len(ranges), dtype=np.int32), nseg))
    return one.seg, lat0, np.column_stack([np.asarray(ds.lon), np.asarray(ds.lat)])


def test_set_polylines_in_chunks(monkeypatch):
    from geoengine.search import docset

    sizes = np.random.default_rng(4).integers(1, 40, 400)
    ends = np.concatenate([[0], np.cumsum(sizes)])
    xy = np.random.default_rng(3).random((int(ends[-1]), 2))
    ranges = np.column_stack([ends[:-1], ends[1:]])
    whole = docset.DocSet()
    whole.set_polylines(xy, ranges, np.arange(len(ranges)))
    monkeypatch.setattr(docset, "SEG_CHUNK", 7)
    parts = docset.DocSet()
    parts.set_polylines(xy, ranges, np.arange(len(ranges)))
    assert len(whole.seg) == int(np.maximum(sizes - 1, 1).sum())
    assert np.array_equal(whole.seg, parts.seg) and np.array_equal(whole.seg_doc, parts.seg_doc)


def test_points_are_the_formulas_bit_for_bit(streets, monkeypatch):
    from geoengine.search import streetpoints
    from geoengine.search.addresses import DENSIFY_KM, KM_PER_DEG

    seg, lat0, _ = streets
    pts, pseg = _formula_points(seg, lat0, KM_PER_DEG, DENSIFY_KM)
    assert len(pts) > len(seg) + 1000  # extra points along the longer segments
    monkeypatch.setattr(streetpoints, "CHUNK", 999)  # several chunks
    got = streetpoints.build_points(seg, lat0, KM_PER_DEG, DENSIFY_KM)
    assert np.array_equal(got.xy, pts)
    assert np.array_equal(got.seg, pseg)


def _brute(pts, pseg, q, k, bound):
    """k nearest by measuring every point: (distance, segment) sorted by distance, segment, point."""
    dist = np.full((len(q), k), np.inf)
    seg = np.full((len(q), k), -1, np.int64)
    for i, (x, y) in enumerate(q):
        dx, dy = x - pts[:, 0], y - pts[:, 1]
        d = np.sqrt(dx * dx + dy * dy)
        inside = np.flatnonzero(d < bound)
        o = inside[np.lexsort((inside, pseg[inside], d[inside]))][:k]
        dist[i, :len(o)] = d[o]
        seg[i, :len(o)] = pseg[o]
    return dist, seg


@pytest.mark.parametrize("k,bound", [(1, 0.1 * 111.2), (32, 0.1 * 111.2), (5, 0.3)])
def test_nearest_equals_measuring_every_point(streets, k, bound):
    """Query points: documents, street vertices themselves (junctions: equal distances to the points of
    two streets) and points beside them; the answers are the brute force's, ties by segment."""
    from geoengine.search.addresses import DENSIFY_KM, KM_PER_DEG, _xy
    from geoengine.search.streetpoints import build_points

    seg, lat0, docs = streets
    points = build_points(seg, lat0, KM_PER_DEG, DENSIFY_KM)
    rng = np.random.default_rng(26)
    verts = points.xy[rng.choice(len(seg), 400, replace=False)]  # first vertices: shared at junctions
    q = np.concatenate([_xy(docs[:, 1], docs[:, 0], lat0)[rng.choice(len(docs), 400, replace=False)], verts,
                        verts + rng.normal(0, 0.02, verts.shape),
                        [[points.xy[:, 0].min() - 30.0, points.xy[:, 1].min() - 30.0]]])  # nothing near
    dist, idx = points.query(q, k=k, distance_upper_bound=bound)
    dist, idx = dist.reshape(len(q), k), idx.reshape(len(q), k)
    want_d, want_s = _brute(points.xy, points.seg.astype(np.int64), q, k, bound)
    got_s = np.where(np.isfinite(dist), points.seg[np.minimum(idx, len(points) - 1)], -1)
    assert np.array_equal(dist, want_d)
    assert np.array_equal(got_s, want_s)
    assert not np.isfinite(dist[-1]).any()
    # the rule was needed: some answers hold equal distances of different segments
    tied = (want_d[:, 1:] == want_d[:, :-1]) & np.isfinite(want_d[:, 1:]) & (want_s[:, 1:] != want_s[:, :-1])
    if k > 1:
        assert tied.any()
    else:  # a street vertex shared by two ways: the lower segment comes first
        d_all, s_all = _brute(points.xy, points.seg.astype(np.int64), verts, 2, bound)
        shared = (d_all[:, 0] == 0) & (d_all[:, 1] == 0)
        assert shared.any()
        assert np.array_equal(got_s[400:800][shared, 0], np.minimum(s_all[shared, 0], s_all[shared, 1]))
