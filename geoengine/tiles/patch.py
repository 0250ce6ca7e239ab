"""The tile stage's partial rebuild for `geoengine update` (`stage.patch`): which tiles a change touches,
at every zoom, from the old and new features of the objects it affects (geoengine.tiles.slim makes them
from the kept collection and the change).

A tile's bytes depend only on the features whose (simplified) bounds meet the tile grown by the clipping
buffer, in collection order, and where tiles exist only on the features' bounds. A feature comes from one
OSM object (a node's point, a way's line or area, a multipolygon's area, a named area's POI), so only the
features of the affected objects can differ between the old and the new extract (slim's module doc lists
them). What is not per object is declined by the caller: the extract's box (the `earth` polygon and the
tile grid) and coastlines (they split land and sea).
"""

from __future__ import annotations

import numpy as np

from geoengine.arrays import unique
from geoengine.tiles import tiler as T
from geoengine.tiles.features import WORLD


def touched_by_features(features: list[dict], bbox, minzoom: int = T.MINZOOM,
                        maxzoom: int = T.MAXZOOM) -> dict[int, np.ndarray]:
    """Per zoom, the tiles whose bytes or existence the features of the changed objects (old and new)
    can alter: the tiles their bounds meet once grown by the zoom's clipping buffer, of the features the
    cut draws at that zoom (min zoom, landcover up to its zoom, at least a pixel below the maximum zoom:
    tiler._encode_batch's filter); and the tiles the bounds of every feature shown from that zoom meet
    (they decide which tiles the cut visits: tiler.tasks_for)."""
    b = np.concatenate([f["bounds"] for f in features]) if features else np.zeros((0, 4))
    mz = np.minimum(np.concatenate([f["min_zoom"] for f in features]), maxzoom) if features else np.zeros(0)
    lay = np.concatenate([f["layer"] for f in features]) if features else np.zeros(0)
    size = np.concatenate([f["size"] for f in features]) if features else np.zeros(0)
    ok = ~np.isnan(b).any(axis=1)  # (an empty geometry meets nothing)
    b, mz, lay, size = b[ok], mz[ok], lay[ok], size[ok]
    out = {}
    for z in range(minzoom, maxzoom + 1):
        rng = T.tile_range(bbox, z)
        tile = WORLD / (1 << z)
        shown = mz <= z
        drawn = shown.copy()
        if z > T.LANDCOVER_MAXZOOM:
            drawn &= lay != T._LANDCOVER
        if z < maxzoom:
            drawn &= size >= tile / 256.0 * (1 - 1e-9)
        grow = tile * T.BUFFER / T.EXTENT + 0.01 + tile * 1e-9
        ids = [spans_ids(b[drawn] + np.array([-grow, -grow, grow, grow]), z, rng)]
        eps = 0.01 + tile * 1e-9
        ids.append(spans_ids(b[shown] + np.array([-eps, -eps, eps, eps]), z, rng))
        out[z] = unique(np.concatenate(ids))
    return out


def spans_ids(bounds: np.ndarray, z: int, rng) -> np.ndarray:
    """tiler._feature_tiles without its cap on a feature's tile count: every tile of `rng` the boxes meet."""
    return T._feature_tiles(bounds, z, rng, cap=None, drop_outside=True)


def planned_tiles(spool, plan, bbox) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """Per zoom, the sorted ids of every tile a full cut of `spool` visits, and of the tiles the features
    meet (tiler.tasks_for: the features shown at that zoom, earth aside; every tile of the box is visited
    where those are at least 1/FULL_GRID_FACTOR of them): `spool.plan_cut`'s low tasks below the
    partition zoom, what `_cut_partition` visits above. A tile visited may come out empty (no row)."""
    low: dict[int, list] = {}
    for z, tiles in plan.low_tasks:
        low.setdefault(z, []).extend((x << 32) | y for x, y in tiles)
    planned, met = {}, {}
    lb = np.asarray(spool.low_bounds, dtype=np.float64).reshape(-1, 5)
    ab = np.frombuffer(spool.all_bounds, dtype=np.float64).reshape(-1, 5) if len(spool.all_bounds) \
        else np.zeros((0, 5))
    for z in range(T.MINZOOM, spool.maxzoom + 1):
        rng = T.tile_range(bbox, z)
        if z < spool.pz:
            met[z] = T._feature_tiles(lb[np.minimum(lb[:, 4], spool.pz - 1) <= z, :4], z, rng)
            planned[z] = np.unique(np.asarray(low.get(z, []), dtype=np.int64))
            continue
        met[z] = T._feature_tiles(ab[np.minimum(ab[:, 4], spool.maxzoom) <= z, :4], z, rng)
        if plan.full_grid.get(z):
            xs, ys = np.meshgrid(np.arange(rng[0], rng[2] + 1, dtype=np.int64),
                                 np.arange(rng[1], rng[3] + 1, dtype=np.int64))
            planned[z] = np.sort(((xs << 32) | ys).ravel())
        else:
            planned[z] = met[z]
    return planned, met


def grid_may_have_grown(planned: dict, met: dict, stored: dict, touched: dict, bbox) -> int | None:
    """A zoom at which the new cut visits every tile of the box (FULL_GRID_FACTOR), the old cut may have
    visited only the tiles features met, and some untouched tile the new cut visits is not in the old
    archive (it may hold land now; None: no such zoom). Away from the touched tiles the features meet the
    same tiles in both extracts, so the old count of tiles met lies between the new count less the
    touched ones met and that plus every touched tile. (Where the old cut visited every tile and the new
    one does not, the tiles it no longer visits are simply not copied.)"""
    for z, ids in met.items():
        rng = T.tile_range(bbox, z)
        box = (rng[2] - rng[0] + 1) * (rng[3] - rng[1] + 1)
        if box > T.FULL_GRID_FACTOR * len(ids):
            continue  # the new cut visits the tiles features meet: those of the old cut, away from the change
        t = touched.get(z, np.empty(0, dtype=np.int64))
        lo = len(ids) - int(np.isin(ids, t).sum())
        if box <= T.FULL_GRID_FACTOR * lo:
            continue  # the old cut visited every tile too
        p = planned[z]
        if (~np.isin(p, t) & ~np.isin(p, stored.get(z, ()))).any():
            return z
    return None

