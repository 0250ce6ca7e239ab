"""Grades of the road graph from the DEM: the build output, `attach_grades`, `climb_descent`, on the
real Andorra bundle (graph + SRTM3 tiles)."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import numpy as np
import pytest

from geoengine.bundle import is_mapped
from geoengine.elevation.grades import GRADE_FILES, attach_grades, climb_descent, segment_grades
from geoengine.errors import BundleError
from geoengine.geo import haversine_m
from geoengine.graph import Graph
from geoengine.graph import tags as T


@pytest.fixture(scope="module")
def graph(andorra):
    return andorra.graph


def test_stage_writes_grades_for_every_segment(andorra, graph):
    stage = andorra.bundle.stages["elevation"]
    for name in GRADE_FILES:
        assert f"elevation/{name}" in stage["outputs"]
        assert (andorra.path / "elevation" / name).exists()
    assert stage["counts"]["graded_segments"] == graph.n_segments  # the two tiles cover every road
    assert stage["counts"]["ungraded_segments"] == 0
    assert stage["info"]["grades"]["step_m"] == 30.0
    climb = np.load(andorra.path / "elevation/seg_climb.npy", mmap_mode="r")
    grade = np.load(andorra.path / "elevation/seg_grade.npy", mmap_mode="r")
    assert climb.dtype == np.float32 and climb.shape == (graph.n_segments,)
    assert grade.dtype == np.float32 and grade.shape == (graph.n_segments, 2)
    assert stage["info"]["grades"]["total_climb_m"] == pytest.approx(float(climb.sum(dtype=np.float64)), abs=0.1)


def test_engine_graph_carries_grades_per_edge(graph):
    assert graph.meta["grades"] is True
    assert is_mapped(graph.seg_climb)  # mapped, not read
    k = np.arange(graph.n_segments)
    np.testing.assert_array_equal(graph.edge_climb[2 * k], graph.seg_climb)
    np.testing.assert_array_equal(graph.edge_climb[2 * k + 1], graph.seg_descent)
    np.testing.assert_array_equal(graph.edge_descent[2 * k + 1], graph.seg_climb)
    np.testing.assert_array_equal(graph.edge_up_grade[2 * k], graph.seg_grade[:, 0])
    np.testing.assert_array_equal(graph.edge_up_grade[2 * k + 1], graph.seg_grade[:, 1])
    np.testing.assert_array_equal(graph.edge_down_grade[2 * k + 1], graph.seg_grade[:, 0])
    assert not graph.edge_climb.flags.writeable
    assert (graph.edge_climb >= 0).all() and (graph.edge_descent >= 0).all()
    assert ((graph.edge_up_grade > 0) == (graph.edge_climb > 0)).all()


def test_climb_minus_descent_is_the_height_difference_of_the_ends(andorra, graph):
    """End samples are not smoothed, so every segment's net rise is exactly the DEM difference of its
    end nodes (and along a path, climb - descent telescopes to the ends' difference)."""
    hu = andorra.elevation(lat=graph.node_lat[graph.seg_u], lon=graph.node_lon[graph.seg_u])
    hv = andorra.elevation(lat=graph.node_lat[graph.seg_v], lon=graph.node_lon[graph.seg_v])
    net = graph.seg_climb.astype(np.float64) - graph.seg_descent
    np.testing.assert_allclose(net, hv - hu, atol=0.01)
    assert (graph.seg_climb >= np.maximum(hv - hu, 0) - 0.01).all()
    # smoothing keeps SRTM noise from piling up: the ups and downs stay within 35 % of the net moves
    total = float(graph.seg_climb.sum(dtype=np.float64) + graph.seg_descent.sum(dtype=np.float64))
    assert total < 1.35 * float(np.abs(hv - hu).sum())


def test_known_climb_out_of_andorra_la_vella(graph, n42e001, bilinear):
    """CS-101 climbs from Andorra la Vella (about 1,050 m) towards La Comella: its longest segment
    gains over 100 m one way and loses the same the other way; heights read independently from the
    raw HGT."""
    segs = np.flatnonzero([graph.strings[r] == "CS-101" for r in np.asarray(graph.seg_ref)])
    k = int(segs[np.argmax(graph.seg_length[segs])])
    u, v = int(graph.seg_u[k]), int(graph.seg_v[k])
    hu = bilinear(n42e001, 42, 1, float(graph.node_lat[u]), float(graph.node_lon[u]))
    hv = bilinear(n42e001, 42, 1, float(graph.node_lat[v]), float(graph.node_lon[v]))
    up = 2 * k if hv > hu else 2 * k + 1  # the directed edge that climbs
    rise = abs(hv - hu)
    assert min(hu, hv) < 1150 and rise > 100
    assert graph.edge_climb[up] == pytest.approx(graph.edge_descent[up ^ 1], abs=1e-6)
    assert graph.edge_descent[up] == pytest.approx(graph.edge_climb[up ^ 1], abs=1e-6)
    assert graph.edge_climb[up] - graph.edge_descent[up] == pytest.approx(rise, abs=0.05)
    assert rise <= graph.edge_climb[up] < 1.3 * rise
    mean = rise / graph.seg_length[k]
    assert 0.5 * mean < graph.edge_up_grade[up] < 3 * mean  # a road's climbing grade, not noise
    assert 0.04 < graph.edge_up_grade[up] < 0.2


def test_tunnels_and_bridges_run_straight(graph):
    straight = (np.asarray(graph.seg_flags) & (T.F_TUNNEL | T.F_BRIDGE)) != 0
    assert straight.sum() > 10
    c, d = graph.seg_climb[straight], graph.seg_descent[straight]
    assert (np.minimum(c, d) < 1e-3).all()  # monotone: only up or only down


def _straight_segment_graph(lon0, lat0, lon1, lat1):
    """A one-segment graph-like object with a two-point shape (what segment_grades reads)."""
    return SimpleNamespace(
        n_segments=1, shape_offsets=np.array([0, 2]), shape_lon=np.array([lon0, lon1]),
        shape_lat=np.array([lat0, lat1]), seg_flags=np.array([0], dtype=np.uint32))


def test_long_straight_piece_is_resampled(andorra):
    """Two shape points across the Gran Valira valley at Andorra la Vella: one height difference would
    see almost nothing; resampled every 30 m the way down to the river and up again is seen."""
    model = andorra._elevation
    lon0, lat0, lon1, lat1 = 1.5080, 42.5063, 1.5370, 42.5063
    g = _straight_segment_graph(lon0, lat0, lon1, lat1)
    out = segment_grades(g, model)
    lons = np.linspace(lon0, lon1, 400)
    h = andorra.elevation(lat=np.full(400, lat0), lon=lons)
    net = h[-1] - h[0]
    low = h.min()
    assert out["climb"][0] - out["descent"][0] == pytest.approx(net, abs=0.01)
    # down to the valley floor and up the other side (smoothed, so a little less than the extremes)
    assert out["descent"][0] > 0.8 * (h[0] - low) and out["climb"][0] > 0.8 * (h[-1] - low)
    assert net < -100 and out["climb"][0] > 50  # one difference would have seen only a descent
    length = float(haversine_m(lat0, lon0, lat1, lon1))
    assert out["grade"][0, 0] >= out["climb"][0] / length


def test_segment_without_dem_has_no_grade(andorra):
    g = _straight_segment_graph(2.30, 48.85, 2.31, 48.86)  # Paris: outside the tiles
    out = segment_grades(g, andorra._elevation)
    assert not out["has_height"][0]
    assert out["climb"][0] == out["descent"][0] == 0 and (out["grade"][0] == 0).all()


def test_attach_grades_without_files_leaves_the_graph(liechtenstein):
    graph = liechtenstein.graph  # Liechtenstein builds without a DEM
    assert not graph.meta.get("grades")
    assert graph.edge_climb is None
    assert climb_descent(graph, [0, 2], 1.0) == (None, None)


def test_attach_grades_refuses_grades_of_another_graph(andorra, tmp_path):
    (tmp_path / "elevation").mkdir()
    for name in GRADE_FILES:
        shutil.copy(andorra.path / "elevation" / name, tmp_path / "elevation" / name)
    np.save(tmp_path / "elevation/seg_climb.npy", np.zeros(3, dtype=np.float32))
    g = Graph.open(andorra.path / "graph")
    with pytest.raises(BundleError, match="do not match the graph"):
        attach_grades(g, tmp_path)
    assert not g.meta.get("grades")
    g2 = Graph.open(andorra.path / "graph")
    assert attach_grades(g2, andorra.path) is True and g2.meta["grades"] is True


def test_climb_descent_along_a_path(graph):
    # the most-climbing segment that continues at its end, and a path of edges through it
    deg = np.diff(np.asarray(graph.node_out_offsets))[np.asarray(graph.seg_v)]
    k = int(np.argmax(np.where(deg >= 2, graph.seg_climb, -1.0)))
    e = np.array([2 * k])
    c, d = climb_descent(graph, e, 1.0)
    assert c == pytest.approx(float(graph.seg_climb[k])) and d == pytest.approx(float(graph.seg_descent[k]))
    # backwards: climb and descent swap
    assert climb_descent(graph, e ^ 1, 1.0) == pytest.approx((d, c))
    # a quarter of the edge counts for a quarter of its climb
    assert climb_descent(graph, e, [0.25])[0] == pytest.approx(0.25 * c)
    # consecutive edges: sums, weighted per edge
    out = np.asarray(graph.node_out_edges)[graph.node_out_offsets[graph.seg_v[k]]:graph.node_out_offsets[graph.seg_v[k] + 1]]
    nxt = int(out[out != (2 * k) ^ 1][0])
    c2, d2 = climb_descent(graph, [2 * k, nxt], [0.5, 1.0])
    assert c2 == pytest.approx(0.5 * c + float(graph.edge_climb[nxt]), rel=1e-6)
    assert d2 == pytest.approx(0.5 * d + float(graph.edge_descent[nxt]), rel=1e-6)
    assert climb_descent(graph, [], 1.0) == (0.0, 0.0)


def test_dem_build_without_graph_writes_no_grades(tmp_path, settings, shared_data_dir):
    """The elevation stage alone (no `graph` stage before it) stores the tiles and no grade files."""
    from geoengine.bundler.pipeline import BuildContext, BuildInputs
    from geoengine.elevation.stage import run
    from geoengine.progress import NullProgress

    inputs = BuildInputs(osm=shared_data_dir / "andorra/andorra.osm.pbf",
                         dem=[shared_data_dir / "andorra/N42E001.hgt.zip"])
    ctx = BuildContext(out=tmp_path, inputs=inputs, settings=settings, progress=NullProgress(),
                       results={"source": {"info": {"bbox": [1.4221, 42.4351, 1.7804, 42.6572]}}})
    result = run(ctx)
    assert result.outputs == ["elevation/index.json", "elevation/samples.npy"]
    assert "graded_segments" not in result.counts and "grades" not in result.info
    assert not any((tmp_path / "elevation" / name).exists() for name in GRADE_FILES)


def test_monaco_grades_with_voids(monaco):
    """Monaco's tile has 1,595 voids (sea edge); every segment still gets finite values."""
    g = monaco.graph
    counts = monaco.bundle.stages["elevation"]["counts"]
    assert counts["graded_segments"] + counts["ungraded_segments"] == g.n_segments
    assert counts["graded_segments"] > 0.95 * g.n_segments
    for arr in (g.seg_climb, g.seg_descent, g.seg_grade):
        assert np.isfinite(arr).all() and (np.asarray(arr) >= 0).all()
    # Monaco climbs from the sea to about 160 m at its border: plenty of climbing segments, none absurd
    assert (g.seg_climb > 20).sum() > 10 and float(g.seg_climb.max()) < 400


def test_fill_gaps_within_segments_only():
    from geoengine.elevation.grades import _fill_gaps

    nan = np.nan
    h = np.array([nan, 10.0, nan, 30.0, nan, nan, nan, 5.0, nan], dtype=float)
    seg = np.array([0, 0, 0, 0, 1, 1, 2, 2, 2])
    first, last = np.array([0, 4, 6]), np.array([3, 5, 8])
    out = _fill_gaps(h, seg, first, last)
    np.testing.assert_allclose(out[:4], [10.0, 10.0, 20.0, 30.0])  # ends take the nearest, gaps interpolate
    assert np.isnan(out[4:6]).all()  # segment 1 has no height at all: nothing borrowed from neighbours
    np.testing.assert_allclose(out[6:], [5.0, 5.0, 5.0])


def test_zero_length_and_single_point_segments(andorra):
    g = SimpleNamespace(n_segments=2, shape_offsets=np.array([0, 2, 3]), shape_lon=np.array([1.52, 1.52, 1.53]),
                        shape_lat=np.array([42.50, 42.50, 42.51]), seg_flags=np.zeros(2, dtype=np.uint32))
    with np.errstate(all="raise"):
        out = segment_grades(g, andorra._elevation)
    assert (out["climb"] == 0).all() and (out["descent"] == 0).all() and out["has_height"].all()
