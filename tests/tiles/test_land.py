"""The land layer covers the extract's bounds at every zoom, and everything drawn stays on that land
(found by rendering Andorra with the Protomaps style: a notched z10 land and forest past its edge)."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from geoengine.tiles.features import collect, lonlat_to_merc
from geoengine.tiles.tiler import FULL_GRID_FACTOR, tasks_for, tile_range

from .tiles_helpers import decode


def _earth_tiles(andorra, z):
    x0, y0, x1, y1 = tile_range(andorra.bbox, z)
    missing, n = [], 0
    for x in range(x0, x1 + 1):
        for y in range(y0, y1 + 1):
            n += 1
            data = andorra.tiles.get("andorra", z, x, y)
            if data is None or "earth" not in decode(data):
                missing.append((x, y))
    return n, missing


@pytest.mark.parametrize("z", [8, 10, 12, 14])
def test_every_tile_inside_the_bounds_has_land(andorra, z):
    n, missing = _earth_tiles(andorra, z)
    assert n >= 1 and missing == [], f"z{z}: {len(missing)} of {n} tiles without earth: {missing[:10]}"


def test_the_z10_tile_that_answered_204_has_land_now(andorra):
    # 10/517/378 lies inside Andorra's bounds; it held no feature shown at z10 and was not stored.
    t = decode(andorra.tiles.get("andorra", 10, 517, 378))
    (earth,) = t["earth"]["features"]
    assert earth["properties"]["kind"] == "earth"


@pytest.fixture(scope="module")
def andorra_features(andorra, shared_data_dir):
    return collect(shared_data_dir / "andorra" / "andorra.osm.pbf", andorra.bbox)


def test_features_are_clipped_to_the_land(andorra_features, andorra):
    fs = andorra_features
    x0, y0 = lonlat_to_merc(andorra.bbox[0], andorra.bbox[1])
    x1, y1 = lonlat_to_merc(andorra.bbox[2], andorra.bbox[3])
    b = shapely.bounds(np.array(fs.geoms, dtype=object))
    eps = 1e-6
    assert (b[:, 0] >= x0 - eps).all() and (b[:, 2] <= x1 + eps).all()
    assert (b[:, 1] >= y0 - eps).all() and (b[:, 3] <= y1 + eps).all()
    # Clipping keeps what lies inside: the forests and the rivers (the Valira) are still there.
    kinds = {(p.get("kind"), fs.layer[i]) for i, p in enumerate(fs.props)}
    assert any(k == "river" for k, _ in kinds) and any(k == "forest" for k, _ in kinds)
    dims = shapely.get_dimensions(np.array(fs.geoms, dtype=object))
    water_lines = [g for g, p, d in zip(fs.geoms, fs.props, dims, strict=True) if p.get("kind") == "river" and d == 1]
    assert water_lines and all(not g.is_empty for g in water_lines)


def test_tiles_at_the_edge_draw_nothing_past_the_land(andorra):
    """In a z12 tile on the box's southern edge, landcover, landuse and water stay inside the earth
    polygon (up to the simplification tolerance of one tile unit)."""
    x0, y0, x1, y1 = tile_range(andorra.bbox, 12)
    checked = 0
    for x in range(x0, x1 + 1):
        t = decode(andorra.tiles.get("andorra", 12, x, y1))
        earth = shapely.union_all([shapely.geometry.shape(f["geometry"]) for f in t["earth"]["features"]])
        for layer in ("landcover", "landuse", "water"):
            for f in t.get(layer, {}).get("features", []):
                g = shapely.geometry.shape(f["geometry"])
                assert g.difference(earth.buffer(2.0)).area <= 1.0, (layer, f["properties"])
                checked += 1
    assert checked > 0


def test_far_apart_extracts_do_not_make_a_huge_grid():
    """A box spanning Europe and Alabama with features at one place gets feature tiles only; a box
    that features fill gets every tile."""
    bbox = (-88.0, 32.0, 9.7, 47.6)
    mx, my = lonlat_to_merc(9.52, 47.14)
    bounds = np.array([[float(mx), float(my), float(mx) + 10, float(my) + 10]])
    assert sum(len(t[1]) for t in tasks_for(bbox, 14, 14, bounds)) == 1
    small = (9.47, 47.05, 9.64, 47.27)
    sx0, sy0, sx1, sy1 = tile_range(small, 12)
    n = (sx1 - sx0 + 1) * (sy1 - sy0 + 1)
    assert sum(len(t[1]) for t in tasks_for(small, 12, 12, bounds)) == (n if n <= FULL_GRID_FACTOR else 1)
    # Features spread over a quarter of the box's tiles: the full grid.
    a, b = lonlat_to_merc(np.array([9.48, 9.62]), np.array([47.06, 47.26]))
    xs, ys = np.meshgrid(np.linspace(a[0], a[1], 8), np.linspace(b[0], b[1], 8))
    spread = np.column_stack([xs.ravel(), ys.ravel(), xs.ravel() + 10, ys.ravel() + 10])
    assert sum(len(t[1]) for t in tasks_for(small, 12, 12, spread)) == n

