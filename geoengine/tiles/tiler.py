"""Cut a FeatureSet into gzip-compressed Mapbox Vector Tiles, zoom 0..14, on every core.

Per zoom: features whose `min_zoom` (capped at the maximum zoom, so z14 tiles carry everything for
overzoom) is above the zoom are dropped, and so are polygons and lines smaller than about one screen
pixel (importance by size); the rest are simplified with a tolerance of a fraction of a pixel of that
zoom, clipped to the tile with a buffer (a feature strictly inside the buffered tile is kept as it is:
GEOS's clip returns it unchanged), moved to tile coordinates (extent 4096, y down) and encoded with
geoengine.tiles.mvt (mapbox-vector-tile's bytes, encoded over arrays, a batch's tiles in one call).
Work is split into batches of tiles handed to a fork-based process pool; the features are inherited by
the workers, not pickled.
"""

from __future__ import annotations

import gzip
import math
import multiprocessing as mp
import os

import numpy as np
import shapely

from geoengine.arrays import unique
from geoengine.tiles import mvt, schema, simplify
from geoengine.tiles.features import WORLD, FeatureSet, lonlat_to_merc

EXTENT = 4096
BUFFER = 64  # tile units of clipping buffer on each side (tippecanoe's default 5/256 is 80)
MINZOOM = 0
MAXZOOM = 14
BATCH = 24  # tiles per work unit
MAX_TILES_PER_FEATURE = 1 << 20
# At a zoom where features touch at least 1/FULL_GRID_FACTOR of the box's tiles, every tile of the box is
# made (so its `earth` covers the extract's bounds); where they are sparser (far-apart parts in one
# extract) only the tiles that features touch are.
FULL_GRID_FACTOR = 4
LANDCOVER_MAXZOOM = 7  # the style fades landcover out by z7; landuse carries the detail above
_LANDCOVER = schema.LAYERS.index("landcover")

_STATE: dict = {}  # set in the parent before the pool forks


def tile_range(bbox, z: int) -> tuple[int, int, int, int]:
    """x0, y0, x1, y1 (inclusive) of the tiles at zoom z covering a lon/lat bbox."""
    n = 1 << z
    x0m, y0m = lonlat_to_merc(bbox[0], bbox[1])
    x1m, y1m = lonlat_to_merc(bbox[2], bbox[3])
    half = WORLD / 2
    fx0, fx1 = (float(x0m) + half) / WORLD * n, (float(x1m) + half) / WORLD * n
    fy0, fy1 = (half - float(y1m)) / WORLD * n, (half - float(y0m)) / WORLD * n
    clamp = lambda v: min(max(int(math.floor(v)), 0), n - 1)  # noqa: E731
    return clamp(fx0), clamp(fy0), clamp(fx1), clamp(fy1)


def tile_bounds(z: int, x: int, y: int) -> tuple[float, float, float, float]:
    size = WORLD / (1 << z)
    minx = -WORLD / 2 + x * size
    maxy = WORLD / 2 - y * size
    return minx, maxy - size, minx + size, maxy


def _prepare(fs: FeatureSet, maxzoom: int) -> dict:
    geoms = np.array(fs.geoms, dtype=object)
    dims = shapely.get_dimensions(geoms)
    size = np.where(dims == 2, np.sqrt(shapely.area(geoms)), np.where(dims == 1, shapely.length(geoms), np.inf))
    return {
        "geoms": geoms,
        "dims": dims,
        "size": size,
        "layer": np.array(fs.layer, dtype=np.int16),
        "min_zoom": np.minimum(np.array(fs.min_zoom, dtype=np.int16), maxzoom),
        # below it, simplification changes nothing (the smallest tolerance asked is maxzoom's)
        "simplify_floor": simplify.floors(geoms, dims, stop=WORLD / (1 << maxzoom) / EXTENT * 0.5),
        "props": fs.props,
        "tags": mvt.TagTable(fs.props),  # each feature's properties read once, framed per tile in a kernel
        "bounds": shapely.bounds(geoms),  # NaN for an empty geometry: no box test selects it
        "maxzoom": maxzoom,
    }


def _touching(bounds: np.ndarray, x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
    """Rows of `bounds` [n, 4] whose box meets the box x0, y0, x1, y1 (edges included), in order: what
    an STRtree query with that box gives, sorted (an empty geometry's NaN bounds meet nothing)."""
    return np.flatnonzero((bounds[:, 0] <= x1) & (bounds[:, 2] >= x0) & (bounds[:, 1] <= y1) & (bounds[:, 3] >= y0))


def _polygonal(g, dim: int):
    """Keep the parts of a clipped geometry with the dimension of the original."""
    if g.geom_type != "GeometryCollection":
        return g if int(shapely.get_dimensions(g)) == dim else None  # e.g. a sliver clipped to a line
    parts = [p for p in shapely.get_parts(g) if shapely.get_dimensions(p) == dim]
    if not parts:
        return None
    if dim == 2:
        return shapely.union_all(parts)
    lines = [q for p in parts for q in shapely.get_parts(p)]
    return shapely.multilinestrings(lines) if dim == 1 else shapely.multipoints(lines)


def _encode_batch(task) -> list[tuple[int, int, int, bytes]]:
    z, tiles = task
    st = _STATE
    size = WORLD / (1 << z)
    pixel = size / 256.0  # one screen pixel at this zoom
    buf = size * BUFFER / EXTENT
    xs = [t[0] for t in tiles]
    ys = [t[1] for t in tiles]
    bx0, _, _, by1 = tile_bounds(z, min(xs), min(ys))
    _, by0, bx1, _ = tile_bounds(z, max(xs), max(ys))
    idx = _touching(st["bounds"], bx0 - buf, by0 - buf, bx1 + buf, by1 + buf)
    keep = st["min_zoom"][idx] <= z
    if z > LANDCOVER_MAXZOOM:
        keep &= st["layer"][idx] != _LANDCOVER
    if z < st["maxzoom"]:
        keep &= st["size"][idx] >= pixel
    idx = idx[keep]
    out = []
    if len(idx) == 0:
        return out
    tol = size / EXTENT * (1.0 if z < st["maxzoom"] else 0.5)
    # each feature is simplified once per zoom, whichever batch meets it first (a partition cuts its
    # batches zoom by zoom, so only the current zoom's results are kept)
    if st.get("simplified_zoom") != z:
        st["simplified_zoom"] = z
        st["simplified"] = np.empty(len(st["geoms"]), dtype=object)
        st["simplified_bounds"] = np.empty((len(st["geoms"]), 4))
        st["simplified_done"] = np.zeros(len(st["geoms"]), dtype=bool)
    todo = idx[~st["simplified_done"][idx]]
    if len(todo):
        # most features at high zooms come back from GEOS unchanged: those are known without asking it
        same = simplify.unchanged(st["simplify_floor"][todo], tol)
        st["simplified"][todo[same]] = st["geoms"][todo[same]]
        st["simplified_bounds"][todo[same]] = st["bounds"][todo[same]]
        todo_geos = todo[~same]
        if len(todo_geos):
            # GEOS's result computed in a kernel where its topology checks provably refuse nothing
            res, proven = simplify.preserve_topology(st["geoms"][todo_geos], tol)
            st["simplified"][todo_geos[proven]] = res[proven]
            todo_geos = todo_geos[~proven]
        if len(todo_geos):
            st["simplified"][todo_geos] = shapely.simplify(st["geoms"][todo_geos], tol, preserve_topology=True)
        changed = todo[~same]
        if len(changed):
            st["simplified_bounds"][changed] = shapely.bounds(st["simplified"][changed])
        st["simplified_done"][todo] = True
    simp = st["simplified"][idx]
    sb = st["simplified_bounds"][idx]
    simple = shapely.get_type_id(simp) != 7  # (a feature is never a collection; cheap to make sure)
    simp_dims = shapely.get_dimensions(simp)
    k = EXTENT / size
    made = []  # per tile with features, in order: (x, y, bytes) or (x, y, None) until the batch is encoded
    seq = st.get("seq")  # (set by spool._state_of: then each tile's seqs are returned too)
    recs: list = []
    flags: list | None = [] if seq is not None else None
    batch = []  # the tiles encoded together: (fis, clipped, want, lay, tile minx, tile maxy)
    for x, y in tiles:
        minx, miny, maxx, maxy = tile_bounds(z, x, y)
        rx0, ry0, rx1, ry1 = minx - buf, miny - buf, maxx + buf, maxy + buf
        sel = _touching(sb, rx0, ry0, rx1, ry1)
        if len(sel) == 0:
            continue
        # a geometry strictly inside the clipping box is what GEOS's clip_by_rect would return (a copy,
        # vertex for vertex: tests/tiles/test_tiler.py): only the others are clipped
        b = sb[sel]
        inside = (b[:, 0] > rx0) & (b[:, 1] > ry0) & (b[:, 2] < rx1) & (b[:, 3] < ry1) & simple[sel]
        clipped = simp[sel]
        want = st["dims"][idx[sel]]
        keep = np.ones(len(sel), dtype=bool)
        collection = np.zeros(len(sel), dtype=bool)
        cut = np.flatnonzero(~inside)
        if len(cut):
            c = shapely.clip_by_rect(clipped[cut], rx0, ry0, rx1, ry1)
            clipped[cut] = c
            # a clipped geometry that is not a collection is kept when it has the original's dimension
            # (a sliver clipped to a line is not); only collections go through _polygonal
            coll = shapely.get_type_id(c) == 7
            collection[cut] = coll
            keep[cut] = ~shapely.is_empty(c) & (coll | (shapely.get_dimensions(c) == want[cut]))
        keep[inside] = simp_dims[sel[inside]] == want[inside]
        fis = idx[sel]
        # collections go through _polygonal one by one, in the tile's frame (a union there is not the
        # union in Mercator moved), and then the whole tile is moved into its frame and encoded alone;
        # otherwise the encoder moves the coordinates (no new geometries), for the batch's tiles at once
        collection &= keep
        alone = bool(collection.any())
        if alone:
            clipped = mvt.to_tile(clipped, (minx, maxy, k))
        for j in np.flatnonzero(collection).tolist():
            g = _polygonal(clipped[j], int(want[j]))
            if g is None:
                keep[j] = False
            else:
                clipped[j] = g
        if not keep.any():
            continue
        fis, clipped, want = fis[keep], clipped[keep], want[keep]
        # grouped by layer (stable: collection order within a layer), the layers in schema order
        lay = st["layer"][fis]
        order = np.argsort(lay, kind="stable")
        fis, clipped, want, lay = fis[order], clipped[order], want[order], lay[order]
        if alone:
            gb, go, ty = mvt.geometry_buffer(clipped, want)
            made.append((x, y, mvt.frame_tile(*_layers(lay), fis, ty, gb, go, st["tags"], flags)))
            if seq is not None:
                recs.append(_tile_seqs(seq[fis], ty))
        else:
            made.append((x, y, None))
            batch.append((fis, clipped, want, lay, minx, maxy))
            if seq is not None:
                recs.append(None)
                flags.append(None)
    if batch:
        counts = np.array([len(t[0]) for t in batch])
        gbuf, goff, types = mvt.geometry_buffer(
            np.concatenate([t[1] for t in batch]), np.concatenate([t[2] for t in batch]),
            (np.repeat([t[4] for t in batch], counts), np.repeat([t[5] for t in batch], counts), k))
        first = np.concatenate([[0], np.cumsum(counts)]).tolist()
        pending = iter(range(len(batch)))
        for i, (x, y, data) in enumerate(made):
            if data is None:
                j = next(pending)
                fis, _, _, lay, _, _ = batch[j]
                a, b = first[j], first[j + 1]
                fl = [] if seq is not None else None
                made[i] = (x, y, mvt.frame_tile(*_layers(lay), fis, types[a:b], gbuf, goff[a:b + 1], st["tags"], fl))
                if seq is not None:
                    recs[i] = _tile_seqs(seq[fis], types[a:b])
                    flags[i] = fl[0]
    if seq is not None:  # what geoengine.tiles.splice keeps of each tile: its features' seqs, its `mixed`
        return [(z, x, y, gzip.compress(data, compresslevel=6, mtime=0), (r, f))
                for (x, y, data), r, f in zip(made, recs, flags, strict=True)]
    return [(z, x, y, gzip.compress(data, compresslevel=6, mtime=0)) for x, y, data in made]


def _tile_seqs(seqs: np.ndarray, types: np.ndarray) -> np.ndarray:
    """A tile's features' seqs in the tile's order (layer by layer, collection order within one), a
    feature that writes nothing (MVT type 0: its layer is still written) as -1 - seq."""
    s = np.asarray(seqs, dtype=np.int64)
    return np.where(np.asarray(types) == 0, -1 - s, s)


def _layers(lay: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The names of a tile's layers and where each starts among its features (sorted by layer)."""
    starts = np.concatenate([[0], np.flatnonzero(np.diff(lay)) + 1, [len(lay)]])
    return [schema.LAYERS[i] for i in lay[starts[:-1]].tolist()], starts


def _feature_tiles(bounds: np.ndarray, z: int, rng, cap: int | None = MAX_TILES_PER_FEATURE,
                   drop_outside: bool = False) -> np.ndarray:
    """Tile ids (x << 32 | y) at zoom z touched by the bounding boxes of features, within `rng`. A box
    over more than `cap` tiles makes none (None: no cap); a box wholly outside `rng` is clamped onto its
    edge, or dropped with `drop_outside`."""
    if len(bounds) == 0:
        return np.empty(0, dtype=np.int64)
    x0, y0, x1, y1 = rng
    size = WORLD / (1 << z)
    half = WORLD / 2
    fx0 = np.clip(np.floor((bounds[:, 0] + half) / size), x0, x1).astype(np.int64)
    fx1 = np.clip(np.floor((bounds[:, 2] + half) / size), x0, x1).astype(np.int64)
    fy0 = np.clip(np.floor((half - bounds[:, 3]) / size), y0, y1).astype(np.int64)
    fy1 = np.clip(np.floor((half - bounds[:, 1]) / size), y0, y1).astype(np.int64)
    if drop_outside:
        inside = ((bounds[:, 2] + half) / size >= x0) & ((bounds[:, 0] + half) / size < x1 + 1) & \
            ((half - bounds[:, 1]) / size >= y0) & ((half - bounds[:, 3]) / size < y1 + 1)
        fx0, fx1, fy0, fy1 = fx0[inside], fx1[inside], fy0[inside], fy1[inside]
    w, h = fx1 - fx0 + 1, fy1 - fy0 + 1
    n = w * h
    if cap is not None:
        keep = n <= cap  # a huge feature alone does not make tiles (it shows where others do)
        fx0, fy0, w, n = fx0[keep], fy0[keep], w[keep], n[keep]
    if len(n) == 0:
        return np.empty(0, dtype=np.int64)
    idx = np.repeat(np.arange(len(n)), n)
    offs = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    xs = fx0[idx] + offs % w[idx]
    ys = fy0[idx] + offs // w[idx]
    return unique((xs << 32) | ys)


def tasks_for(bbox, minzoom: int, maxzoom: int, bounds: np.ndarray,
              min_zoom: np.ndarray | None = None) -> list[tuple[int, list[tuple[int, int]]]]:
    """Batches of the tiles per zoom within `bbox`: those that the bounding boxes of the features
    (Mercator `bounds`, with their `min_zoom`) touch, and every other tile of the box too when the
    features touch at least 1/FULL_GRID_FACTOR of them, so that the land layer covers the extract's
    bounds at every zoom (no 204 inside the box) while an extract of far-apart parts does not make a
    grid of empty tiles between them."""
    tasks = []
    for z in range(minzoom, maxzoom + 1):
        rng = tile_range(bbox, z)
        x0, y0, x1, y1 = rng
        sel = bounds if min_zoom is None else bounds[np.minimum(min_zoom, maxzoom) <= z]
        ids = _feature_tiles(sel, z, rng)
        if (x1 - x0 + 1) * (y1 - y0 + 1) <= FULL_GRID_FACTOR * len(ids):
            xs, ys = np.meshgrid(np.arange(x0, x1 + 1, dtype=np.int64), np.arange(y0, y1 + 1, dtype=np.int64))
            ids = np.sort(((xs << 32) | ys).ravel())
        tiles = list(zip((ids >> 32).tolist(), (ids & 0xFFFFFFFF).tolist(), strict=True))
        for i in range(0, len(tiles), BATCH):
            tasks.append((z, tiles[i : i + BATCH]))
    # Big zooms first so the pool's tail is made of small tasks.
    tasks.sort(key=lambda t: -t[0])
    return tasks


def feature_bounds(fs: FeatureSet) -> tuple[np.ndarray, np.ndarray]:
    """Mercator bounds and min zooms of the features that decide where tiles exist (all but earth)."""
    layer = np.array(fs.layer, dtype=np.int16)
    keep = layer != schema.LAYERS.index("earth")
    geoms = np.array(fs.geoms, dtype=object)[keep]
    return shapely.bounds(geoms), np.array(fs.min_zoom, dtype=np.int16)[keep]


def cut_tiles(fs: FeatureSet, bbox, *, minzoom: int = MINZOOM, maxzoom: int = MAXZOOM, processes: int | None = None,
              on_batch=None):
    """Yield (z, x, y, gzip bytes) for every non-empty tile over `bbox` (lon/lat)."""
    global _STATE
    _STATE = _prepare(fs, maxzoom)
    tasks = tasks_for(bbox, minzoom, maxzoom, *feature_bounds(fs))
    processes = processes or min(os.cpu_count() or 1, 8)
    mvt.warm()  # loaded once here, inherited by the forked workers
    simplify.warm()
    try:
        if processes <= 1 or len(tasks) < 4:
            for t in tasks:
                yield from _encode_batch(t)
                if on_batch:
                    on_batch(1)
            return
        ctx = mp.get_context("fork")
        with ctx.Pool(processes) as pool:
            for res in pool.imap_unordered(_encode_batch, tasks, chunksize=1):
                yield from res
                if on_batch:
                    on_batch(1)
    finally:
        _STATE = {}
