"""The simplification floor (geoengine.tiles.simplify): below it GEOS's topology-preserving
simplification returns a feature unchanged, so the tiler keeps the feature without asking GEOS. The
oracle is GEOS itself, on every feature of real extracts at every zoom's tolerance."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from geoengine.bundler.source import describe_extract
from geoengine.tiles import simplify
from geoengine.tiles import tiler as T
from geoengine.tiles.features import collect

from ..conftest import data_file


@pytest.mark.parametrize("rel", ["andorra/andorra.osm.pbf", "monaco/monaco.osm.gz"])
def test_below_the_floor_geos_changes_nothing(rel):
    path = data_file(rel)
    fs = collect(path, describe_extract(path)["bbox"])
    geoms = np.array(fs.geoms, dtype=object)
    floor = simplify.floors(geoms, shapely.get_dimensions(geoms))
    assert np.isinf(floor[shapely.get_dimensions(geoms) == 0]).all()
    # stopping at the smallest tolerance the cut asks (z14's) answers every zoom the same
    smallest = T.WORLD / (1 << T.MAXZOOM) / T.EXTENT * 0.5
    stopped = simplify.floors(geoms, shapely.get_dimensions(geoms), stop=smallest)
    found = truly = 0
    for z in range(T.MINZOOM, T.MAXZOOM + 1):
        tol = T.WORLD / (1 << z) / T.EXTENT * (1.0 if z < T.MAXZOOM else 0.5)
        same = simplify.unchanged(floor, tol)
        assert (simplify.unchanged(stopped, tol) == same).all()
        simplified = shapely.simplify(geoms, tol, preserve_topology=True)
        equal = shapely.to_wkb(simplified) == shapely.to_wkb(geoms)
        assert not (same & ~equal).any(), f"z{z}: the floor kept a feature GEOS simplifies"
        found += int(same.sum())
        truly += int(equal.sum())
    # and it finds nearly every unchanged feature (the rest go to GEOS, which is only slower)
    assert found >= 0.97 * truly, (found, truly)


def test_a_vertex_within_the_tolerance_is_below_the_floor():
    line = shapely.LineString([(0, 0), (5, 1.0), (10, 0), (20, 0.5), (30, 0)])
    ring = shapely.Polygon([(0, 0), (10, 0), (10, 10), (0, 10), (0, 0)])
    floor = simplify.floors(np.array([line, ring, shapely.Point(1, 1)], dtype=object), np.array([1, 2, 0]))
    assert floor[0] == pytest.approx(0.5)  # (20, 0.5) from the segment (10, 0)-(30, 0)
    assert floor[1] == pytest.approx(np.hypot(5, 5))  # (0, 0) from the segment (0, 10)-(10, 0)
    assert floor[2] == np.inf
    for g, f in zip((line, ring), floor[:2], strict=True):
        assert shapely.simplify(g, f * 0.99, preserve_topology=True).equals_exact(g, 0)
        assert shapely.get_num_coordinates(shapely.simplify(g, f * 1.01, preserve_topology=True)) < \
            shapely.get_num_coordinates(g)
