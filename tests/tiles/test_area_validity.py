"""`features.surely_valid` proves polygons valid without GEOS: it must never call an invalid polygon valid,
and it should prove most areas of real extracts (then GEOS's check is skipped for them)."""

from __future__ import annotations

import numpy as np
import osmium
import pytest
import shapely

from geoengine.bundler.locations import LOCATION_INDEX
from geoengine.tiles import features as F

from ..conftest import data_file


def _areas(path) -> np.ndarray:
    """Every area of an extract as osmium writes it, projected and unwrapped as the areas stream does."""
    factory = osmium.geom.WKBFactory()
    raw = []

    class Areas(osmium.SimpleHandler):
        def area(self, a):
            try:
                raw.append(bytes.fromhex(factory.create_multipolygon(a)))
            except (osmium.InvalidLocationError, RuntimeError):
                pass

    Areas().apply_file(str(path), locations=True, idx=LOCATION_INDEX)
    return shapely.from_wkb([w[9:] if w[:9] == F._ONE_POLYGON else w for w in F._merc_wkbs(raw)])


@pytest.mark.parametrize("rel", ["andorra/andorra.osm.pbf", "liechtenstein/nominatim-apidb-test-data.osm.pbf",
                                 "liechtenstein/valhalla-liechtenstein-latest.osm.pbf", "monaco/monaco.osm.gz"])
def test_surely_valid_agrees_with_geos_on_every_area(rel):
    geoms = _areas(data_file(rel))
    sure = F.surely_valid(geoms)
    valid = shapely.is_valid(geoms)
    assert not (sure & ~valid).any()  # never valid where GEOS says invalid
    assert sure.sum() > 0.8 * valid.sum()  # and it proves most of them


def _wiggled(rng, n: int) -> np.ndarray:
    """A ring of n random points around a circle, some of them pulled across (often self-intersecting),
    some repeated or put on a neighbour's line."""
    t = np.sort(rng.uniform(0, 2 * np.pi, n))
    r = rng.uniform(0.2, 1.0, n)
    pts = np.column_stack([r * np.cos(t), r * np.sin(t)]) * 100 + 1e6
    if rng.random() < 0.5:
        i, j = rng.integers(0, n, 2)
        pts[i] = pts[j] + rng.normal(0, 1e-9, 2) * (rng.random() < 0.5)  # a touch or a near touch
    if rng.random() < 0.3:
        i = rng.integers(1, n - 1)
        pts[i] = (pts[i - 1] + pts[i + 1]) / 2  # on its neighbours' line (floating point: nearly)
    if rng.random() < 0.3:
        pts = np.vstack([pts, pts[rng.integers(0, n)]])  # a spike back to an earlier vertex
    return np.vstack([pts, pts[:1]])


def test_surely_valid_never_claims_an_invalid_ring():
    rng = np.random.default_rng(29)
    rings = [_wiggled(rng, int(rng.integers(3, 40))) for _ in range(20000)]
    rings += [np.array(r, dtype=float) for r in (
        [(0, 0), (10, 10), (10, 0), (0, 10), (0, 0)],  # bow tie
        [(0, 0), (10, 0), (10, 10), (5, 10), (5, 15), (5, 10), (0, 10), (0, 0)],  # spike
        [(0, 0), (10, 0), (10, 10), (5, 0), (0, 10), (0, 0)],  # touches itself at a vertex
        [(0, 0), (10, 0), (10, 0), (10, 10), (0, 0)],  # repeated point (valid, not proven)
        [(0, 0), (5, 0), (10, 0), (0, 0)],  # flat
        [(0, 0), (10, 0), (10, 10), (0, 10), (0, 0)],  # a square
    )]
    geoms = np.array([shapely.Polygon(r) for r in rings], dtype=object)
    sure = F.surely_valid(geoms)
    valid = shapely.is_valid(geoms)
    assert not (sure & ~valid).any()
    assert (~valid).sum() > 2000 and sure.sum() > 2000  # both kinds are common in the sample
    assert sure[-1] and not sure[-4]


def test_surely_valid_leaves_holes_multipolygons_and_long_rings_to_geos():
    square = [(0, 0), (10, 0), (10, 10), (0, 10), (0, 0)]
    hole = [(2, 2), (2, 4), (4, 4), (4, 2), (2, 2)]
    circle = shapely.Point(0, 0).buffer(100, quad_segs=32)  # 128 segments
    geoms = np.array([shapely.Polygon(square, [hole]), shapely.MultiPolygon([shapely.Polygon(square)]),
                      circle, shapely.Polygon(square)], dtype=object)
    assert F.surely_valid(geoms).tolist() == [False, False, False, True]
