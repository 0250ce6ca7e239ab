"""GEOS's topology-preserving simplification computed in a kernel (geoengine.tiles.simplify.preserve_topology):
wherever the kernel claims a result, it is GEOS's own (`shapely.simplify(g, tol, preserve_topology=True)`),
coordinate for coordinate (WKB equal). The oracle is GEOS itself, on every feature of real extracts at every
zoom's tolerance, and on random lines, polygons with holes and multi-geometries (hypothesis), including
the degenerate ones (repeated points, collinear runs, touching rings)."""

from __future__ import annotations

import numpy as np
import pytest
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geoengine.bundler.source import describe_extract
from geoengine.tiles import simplify
from geoengine.tiles import tiler as T
from geoengine.tiles.features import collect

from ..conftest import data_file


def _check(geoms: np.ndarray, tol: float) -> np.ndarray:
    """Assert the kernel's results equal GEOS's; return which it proved."""
    res, done = simplify.preserve_topology(geoms, tol)
    ref = shapely.simplify(geoms, tol, preserve_topology=True)
    assert (res[~done] == None).all()  # noqa: E711 (an object array)
    if done.any():
        ours, theirs = shapely.to_wkb(res[done]), shapely.to_wkb(ref[done])
        wrong = np.flatnonzero(ours != theirs)
        assert len(wrong) == 0, (f"tol {tol}: {geoms[done][wrong[0]].wkt[:400]} -> ours "
                                 f"{res[done][wrong[0]].wkt[:400]}, GEOS {ref[done][wrong[0]].wkt[:400]}")
    return done


@pytest.mark.parametrize(("rel", "zooms"), [
    ("andorra/andorra.osm.pbf", range(T.MINZOOM, T.MAXZOOM + 1)),
    ("monaco/monaco.osm.gz", range(T.MINZOOM, T.MAXZOOM + 1)),
    ("liechtenstein/nominatim-apidb-test-data.osm.pbf", (5, 9, 12, 14)),  # larger: some zooms
])
def test_real_features_at_every_zoom_equal_geos(rel, zooms):
    path = data_file(rel)
    fs = collect(path, describe_extract(path)["bbox"])
    geoms = np.array(fs.geoms, dtype=object)
    dims = shapely.get_dimensions(geoms)
    geoms = geoms[dims >= 1]
    tid = shapely.get_type_id(geoms)
    changed = proven = 0
    kinds = set()
    for z in zooms:
        tol = T.WORLD / (1 << z) / T.EXTENT * (1.0 if z < T.MAXZOOM else 0.5)
        done = _check(geoms, tol)
        ref = shapely.simplify(geoms, tol, preserve_topology=True)
        moved = shapely.to_wkb(ref) != shapely.to_wkb(geoms)
        changed += int(moved.sum())
        proven += int((done & moved).sum())
        kinds |= set(tid[done & moved].tolist())
    # the kernel takes nearly all the features GEOS changes (the rest go to GEOS, which is only slower)
    assert proven >= 0.9 * changed, (proven, changed)
    assert {1, 3} <= kinds, kinds


def test_polygons_with_holes_and_multipolygons_of_real_extract():
    path = data_file("andorra/andorra.osm.pbf")
    fs = collect(path, describe_extract(path)["bbox"])
    geoms = np.array(fs.geoms, dtype=object)
    tid = shapely.get_type_id(geoms)
    holes = (tid == 3) & (shapely.get_num_interior_rings(geoms) > 0)
    multi = (tid == 6) | (tid == 5)
    assert holes.sum() >= 3 and multi.sum() >= 3, (holes.sum(), multi.sum())
    for pick in (holes, multi):
        proven = 0
        for tol in (0.3, 2.4, 9.6, 38.0, 150.0):
            proven += int(_check(geoms[pick], tol).sum())
        assert proven > 0


def _star(cx, cy, radii, angle0=0.0):
    a = angle0 + np.linspace(0, 2 * np.pi, len(radii), endpoint=False)
    pts = np.column_stack([cx + radii * np.cos(a), cy + radii * np.sin(a)])
    return np.vstack([pts, pts[:1]])


@st.composite
def _geometry(draw):
    kind = draw(st.sampled_from(["line", "grid_line", "closed_line", "polygon", "holes", "holes_near_shell",
                                 "multipolygon",
                                 "multiline"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(2, 60))
    if kind == "grid_line":  # small integers: repeated points, collinear runs, exact touches
        return shapely.LineString(rng.integers(0, 6, size=(n, 2)).astype(float))
    if kind == "line":
        return shapely.LineString(np.cumsum(rng.normal(size=(n, 2)), axis=0) * 10)
    if kind == "closed_line":
        p = np.cumsum(rng.normal(size=(max(n, 3), 2)), axis=0)
        return shapely.LineString(np.vstack([p, p[:1]]))
    if kind == "multiline":
        k = draw(st.integers(1, 4))
        return shapely.MultiLineString([np.cumsum(rng.integers(-3, 4, size=(n, 2)), axis=0).astype(float)
                                        for _ in range(k)])
    shell = _star(0, 0, rng.uniform(50, 100, size=max(n, 3)))
    if kind == "polygon":
        return shapely.Polygon(shell)
    if kind in ("holes", "holes_near_shell"):
        holes = []
        for _ in range(draw(st.integers(1, 3))):
            c = rng.uniform(-25, 25, size=2)
            if kind == "holes_near_shell":  # in the shell's bumps: flattening them may jump the hole
                a = rng.uniform(0, 2 * np.pi)
                c = np.array([np.cos(a), np.sin(a)]) * rng.uniform(40, 55)
            holes.append(_star(c[0], c[1], rng.uniform(1, 20 if kind == "holes" else 4,
                                                        size=draw(st.integers(3, 20))))[::-1])
        return shapely.Polygon(shell, holes)
    polys = [shapely.Polygon(_star(i * 150 + rng.uniform(-30, 30), 0, rng.uniform(40, 100, size=draw(
        st.integers(3, 40))))) for i in range(draw(st.integers(1, 3)))]
    return shapely.MultiPolygon(polys)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(geoms=st.lists(_geometry(), min_size=1, max_size=8), tol=st.sampled_from([0.0, 0.5, 1.0, 2.0, 5.0, 20.0, 80.0]))
def test_random_geometries_equal_geos(geoms, tol):
    _check(np.array(geoms, dtype=object), tol)


def test_the_checks_refuse_what_geos_would_refuse():
    # DP alone flattens the shell's bump (5, 1) at tolerance 2, jumping over the hole's vertex at (5, 0.5)
    # and crossing it: GEOS keeps the bump; the kernel must not claim the plain DP result
    shell = [(0, 0), (5, 1), (10, 0), (10, -10), (0, -10), (0, 0)]
    hole = [(4, 0.2), (6, 0.2), (5, -2), (4, 0.2)][::-1]
    poly = shapely.Polygon(shell, [hole])
    res, done = simplify.preserve_topology(np.array([poly], dtype=object), 2.0)
    geos = shapely.simplify(poly, 2.0, preserve_topology=True)
    assert shapely.get_num_coordinates(geos) == shapely.get_num_coordinates(poly)  # GEOS refused
    assert not done[0] or res[0].equals_exact(geos, 0)
    # a hole inside the bump, touching nothing: flattening the bump would leave it outside the shell (only
    # GEOS's jump check refuses it)
    bump = shapely.Polygon([(0, 0), (5, 3), (10, 0), (10, -10), (0, -10), (0, 0)],
                           [[(5, 1), (5.1, 1.2), (5.2, 1), (5, 1)]])
    jumped = shapely.LineString([(0, 0), (10, 0)])
    geos = shapely.simplify(bump, 4.0, preserve_topology=True)
    assert shapely.covers(geos, bump.interiors[0]) and not shapely.covers(geos.exterior, jumped)
    res, done = simplify.preserve_topology(np.array([bump], dtype=object), 4.0)
    assert not done[0] or res[0].equals_exact(geos, 0)
    lines = shapely.MultiLineString([[(0, 0), (5, 3), (10, 0)], [(5, 1), (5.2, 1.1)]])
    res, done = simplify.preserve_topology(np.array([lines], dtype=object), 4.0)
    assert not done[0] or res[0].equals_exact(shapely.simplify(lines, 4.0, preserve_topology=True), 0)
    # two lines of one geometry: flattening the first would cross the second
    ml = shapely.MultiLineString([[(0, 0), (5, 1), (10, 0)], [(5, 0.5), (5, 3)]])
    res, done = simplify.preserve_topology(np.array([ml], dtype=object), 2.0)
    assert not done[0] or res[0].equals_exact(shapely.simplify(ml, 2.0, preserve_topology=True), 0)


def test_ring_start_vertex_orientation_and_small_shapes():
    # a ring whose start vertex lies within the tolerance of its neighbours' segment: GEOS drops it and the
    # ring starts at the last kept vertex
    ring = shapely.Polygon([(5, 0.3), (10, 0), (10, 10), (5, 10.05), (0, 10), (0, 0), (5, 0.3)])
    geoms = np.array([
        ring,
        shapely.Polygon(list(ring.exterior.coords)[::-1]),  # the other orientation
        shapely.Polygon([(0, 0), (10, 0), (5, 0.1), (0, 0)]),  # a sliver: the minimum size keeps it
        shapely.LineString([(0, 0), (1, 0)]),
        shapely.LineString([(0, 0), (0, 0)]),  # zero length
        shapely.LineString([(0, 0), (0, 0), (0, 0)]),
        shapely.LineString([(0, 0), (5, 0.1), (10, 0), (5, -0.1), (0, 0)]),  # closed: 4 points at least
    ], dtype=object)
    done = _check(geoms, 1.0)
    assert done.all()
    res, _ = simplify.preserve_topology(geoms, 1.0)
    assert shapely.get_num_coordinates(res[0]) < shapely.get_num_coordinates(ring)
    assert [5.0, 0.3] not in shapely.get_coordinates(res[0]).tolist()  # the start vertex is gone
    assert shapely.is_ccw(res[0].exterior) == shapely.is_ccw(ring.exterior)
    assert shapely.is_ccw(res[1].exterior) != shapely.is_ccw(ring.exterior)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_what_the_kernel_leaves_to_geos():
    geoms = np.array([
        shapely.Point(1, 2),
        shapely.LineString(),
        shapely.Polygon(),
        shapely.LineString([(0, 0, 1), (5, 0.1, 2), (10, 0, 3)]),  # 3D
        shapely.GeometryCollection([shapely.LineString([(0, 0), (5, 0.1), (10, 0)])]),
        shapely.LineString([(0, 0), (np.nan, 0.1), (10, 0)]),
    ], dtype=object)
    res, done = simplify.preserve_topology(geoms, 1.0)
    assert not done.any()
    assert (res == None).all()  # noqa: E711
    res, done = simplify.preserve_topology(np.array([], dtype=object), 1.0)
    assert len(res) == 0 and len(done) == 0


def test_long_shapes_with_a_long_edge():
    # 20,000 vertices along a 100 km edge: the overlap scan's window spans the whole shape (its widest
    # input segment); fine zigzags are proven, coarse teeth exceed the proof's budget and go to GEOS
    n = 20000
    x = np.linspace(0, 100000, n)
    zigzag = 50 + np.where(np.arange(n) % 2, 0.3, -0.3)
    teeth = 50 + 5 * (np.arange(n) % 10 == 5) + np.where(np.arange(n) % 2, 0.05, -0.05)
    shapes = [shapely.Polygon(np.vstack([np.column_stack([x, y]), [[100000, 0], [0, 0], [x[0], y[0]]]]))
              for y in (zigzag, teeth)]
    done = _check(np.array(shapes, dtype=object), 1.0)
    assert done[0] and not done[1]
