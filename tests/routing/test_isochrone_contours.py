"""Property tests of the contour tracer on small hand-made grids (marching squares, ring orientation,
saddles, holes): every inside cell centre is covered exactly once (outer rings minus holes), no outside
centre is covered, and the rings' signed areas add up to the covered area."""

from __future__ import annotations

import numpy as np
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from geoengine.routing.isochrone import _contour_rings, _simplify_rings, contour_polygons


def _padded(values):
    g = np.full((values.shape[0] + 2, values.shape[1] + 2), np.inf)
    g[1:-1, 1:-1] = values
    return g


grids = arrays(np.float64, st.tuples(st.integers(1, 10), st.integers(1, 10)),
               elements=st.sampled_from([0.0, 3.0, 7.0, np.inf]))


@settings(max_examples=200, deadline=None)
@given(grids, st.sampled_from([1.0, 5.0]))
def test_rings_cover_exactly_the_inside_cells(values, level):
    grid = _padded(values)
    cell = 10.0
    xs, ys, offs = _contour_rings(grid, level, 0.0, 0.0, cell)
    inside = grid <= level
    cy, cx = np.mgrid[0:grid.shape[0], 0:grid.shape[1]]
    px, py = (cx + 0.5) * cell, (cy + 0.5) * cell
    depth = np.zeros(grid.shape, dtype=int)
    total = 0.0
    for r in range(len(offs) - 1):
        ring = np.column_stack([xs[offs[r]:offs[r + 1]], ys[offs[r]:offs[r + 1]]])
        assert np.array_equal(ring[0], ring[-1]) and len(ring) >= 4
        poly = shapely.Polygon(ring)
        a = 0.5 * np.sum(ring[:-1, 0] * ring[1:, 1] - ring[1:, 0] * ring[:-1, 1])
        total += a
        depth += np.where(shapely.contains_xy(poly, px, py), 1 if a > 0 else -1, 0)
    assert np.array_equal(depth, inside.astype(int))
    if not inside.any():
        assert len(offs) == 1
    else:
        assert total > 0


@settings(max_examples=100, deadline=None)
@given(grids)
def test_polygons_are_valid_and_contain_inside_cells(values):
    grid = _padded(values)
    cell = 10.0
    geom = contour_polygons(grid, 5.0, 0.0, 0.0, cell, 0.0, cell / 2)
    inside = grid <= 5.0
    if not inside.any():
        assert geom is None
        return
    assert geom is not None and geom.is_valid
    cy, cx = np.nonzero(inside)
    px, py = (cx + 0.5) * cell, (cy + 0.5) * cell
    # unsimplified, every cell centre inside the region is covered
    exact = contour_polygons(grid, 5.0, 0.0, 0.0, cell, 0.0, 0.0)
    assert exact is not None and exact.is_valid
    assert shapely.intersects_xy(exact.buffer(1e-6), px, py).all()
    # simplified by half a cell (Douglas-Peucker), no inside centre ends farther than that from the shape
    assert shapely.intersects_xy(geom.buffer(cell / 2 + 1e-6), px, py).all()


def test_simplify_keeps_corners_and_closes_rings():
    # a square with many collinear points: simplification keeps the 4 corners (+ closing point)
    t = np.linspace(0, 1, 11)[:-1]
    sq = np.concatenate([np.column_stack([t, 0 * t]), np.column_stack([1 + 0 * t, t]),
                         np.column_stack([1 - t, 1 + 0 * t]), np.column_stack([0 * t, 1 - t])])
    sq = np.vstack([sq, sq[:1]]) * 100
    xs, ys, offs = _simplify_rings(sq[:, 0].copy(), sq[:, 1].copy(), np.array([0, len(sq)]), 1.0)
    assert offs[-1] == 5 and xs[0] == xs[-1] and ys[0] == ys[-1]
    assert shapely.Polygon(np.column_stack([xs, ys])).area == 100 * 100


def test_denoise_drops_parts_smaller_than_the_share_of_the_largest():
    values = np.full((12, 20), np.inf)
    values[1:9, 1:9] = 0.0      # big blob: 64 cells
    values[2:5, 14:17] = 0.0    # small blob: 9 cells (about 1/6 of the big one)
    grid = _padded(values)

    def parts(g):
        return len(g.geoms) if g.geom_type == "MultiPolygon" else 1

    assert parts(contour_polygons(grid, 1.0, 0.0, 0.0, 10.0, 0.0, 0.0)) == 2
    assert parts(contour_polygons(grid, 1.0, 0.0, 0.0, 10.0, 0.1, 0.0)) == 2
    assert parts(contour_polygons(grid, 1.0, 0.0, 0.0, 10.0, 0.3, 0.0)) == 1
    big = contour_polygons(grid, 1.0, 0.0, 0.0, 10.0, 1.0, 0.0)
    assert parts(big) == 1 and shapely.contains_xy(big, 50.0, 50.0)


def test_small_holes_are_filled_large_holes_kept():
    values = np.zeros((12, 12))
    values[5, 5] = np.inf          # one-cell hole: filled
    grid = _padded(values)
    g = contour_polygons(grid, 1.0, 0.0, 0.0, 10.0, 1.0, 0.0)
    assert g.geom_type == "Polygon" and len(g.interiors) == 0
    values[2:6, 7:11] = np.inf     # 4 x 4 hole: kept
    g = contour_polygons(_padded(values), 1.0, 0.0, 0.0, 10.0, 1.0, 0.0)
    assert len(g.interiors) == 1 and not shapely.contains_xy(g, 95.0, 45.0)
