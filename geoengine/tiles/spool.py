"""Tile features spooled to disk by area, then cut one area at a time on every core.

The collector hands each batch of features to a `Spool` instead of a list in memory; each collection
stream (points and lines in a forked process, areas in this one) has its own spool and files, merged at
the end, and sequence numbers keep the order `features.collect` gives. The spool writes it (WKB,
layer, min zoom, properties and its place in collection order) to the file of every partition it
touches: partitions are the tiles of zoom `PARTITION_ZOOM` (10: about 40 km), and a feature is assigned
by its bounds grown by the clipping buffer, so every tile finds in its partition every feature the
whole set would give it. Only what the low zooms (0..PARTITION_ZOOM-1) can draw stays in memory:
features whose min zoom is below the partition zoom and whose size reaches one pixel at zoom
PARTITION_ZOOM-1 (smaller ones are never drawn there), plus the bounds of those with a low min zoom
(they decide where low-zoom tiles exist). Features touching more than `MAX_PARTITIONS` partitions
(country boundaries, the earth polygon) are kept in memory and join every partition.

Cutting: the low zooms from the in-memory set as before (tiler.cut_tiles's batches on a fork pool);
zooms PARTITION_ZOOM..14 by partition, each worker process loading one partition file, so memory
holds about two partitions at a time instead of the whole extract. Within a partition features keep
their collection order, so tiles are byte-identical to cutting the whole set at once.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import pickle
from array import array
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import numpy as np
import shapely

from geoengine.bundler import heap
from geoengine.bundler.isolate import die_with
from geoengine.tiles import mvt, schema, simplify
from geoengine.tiles import tiler as T
from geoengine.tiles.features import OBJ_OTHER, STREAMS, WORLD, _entry, boundary_relations

PARTITION_ZOOM = 10
MAX_PARTITIONS = 16
MAX_GRID = 1 << 22  # cells of `reaching`'s table of tiles at one zoom (32 MB)
_EARTH = schema.LAYERS.index("earth")


@contextmanager
def gc_paused():
    """Python's cyclic garbage collector off for a while (and in the processes forked meanwhile): the
    collector and the cut make millions of short-lived tuples, lists and geometries, none in a cycle,
    and each collection of the oldest generation walked every object the process holds (5-9 % of the
    stage's CPU). Reference counting still frees everything."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _tile_spans(bounds: np.ndarray, z: int, grow: float, rng) -> np.ndarray:
    """[n, 4] inclusive tile ranges x0, y0, x1, y1 at zoom z of bounds grown by `grow`, within `rng`."""
    size = WORLD / (1 << z)
    half = WORLD / 2
    x0, y0, x1, y1 = rng
    return np.column_stack([
        np.clip(np.floor((bounds[:, 0] - grow + half) / size), x0, x1),
        np.clip(np.floor((half - bounds[:, 3] - grow) / size), y0, y1),
        np.clip(np.floor((bounds[:, 2] + grow + half) / size), x0, x1),
        np.clip(np.floor((half - bounds[:, 1] + grow) / size), y0, y1),
    ]).astype(np.int64)


SEQ_STRIDE = 1 << 40  # collection order across streams: stream k's features have seq ((k + 1) * SEQ_STRIDE + i) * SEQ_GAP
SEQ_GAP = 1 << 16  # room between two features' seqs: a patch puts an object's new features between its neighbours'


class Spool:
    """A FeatureSet-like sink for the collector (`add_many`, `coastlines`, counters) that writes to disk.
    Each collection stream writes its own files (`{x}-{y}.{stream}.features`); `merge` takes another
    stream's spool into this one."""

    def __init__(self, folder: Path, bbox, maxzoom: int = T.MAXZOOM, partition_zoom: int = PARTITION_ZOOM,
                 stream: str = "m", first_seq: int = 0):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.maxzoom = maxzoom
        self.pz = pz = min(partition_zoom, maxzoom)
        self.prange = T.tile_range(bbox, pz)
        self.grow = WORLD / (1 << pz) * T.BUFFER / T.EXTENT  # the largest buffer of any zoom >= pz
        self.low_pixel = WORLD / (1 << (pz - 1)) / 256.0
        self.stream = stream
        self.next_seq = first_seq
        self.files: dict[tuple[int, int], object] = {}
        self.written: set[tuple[int, int]] = set()
        self.counts_by_layer = [0] * len(schema.LAYERS)
        self.n = 0
        self.shared: list[tuple] = []  # (seq, wkb, layer, min_zoom, props): in every partition
        self.low: list[tuple] = []  # (seq, geom, layer, min_zoom, props): drawn at low zooms
        self.low_bounds: list[tuple] = []  # (minx, miny, maxx, maxy, min_zoom), low min zooms, not earth
        self.shared_spans: list[tuple[int, int, int, int]] = []
        self.all_bounds = array("d")  # minx, miny, maxx, maxy, min_zoom of every non-earth feature
        self.coastlines: list = []
        self.skipped_ways = 0
        self.partial_ways = 0
        self.way_flags = array("q")  # the ways counted in partial_ways (id << 1) and skipped_ways (id << 1 | 1)
        # per feature, in add order (what geoengine.tiles.kept keeps): seq, object code, layer, min zoom,
        # Mercator bounds and size (sqrt of the area, the length, inf for points); written to
        # `index_files` (one per stream, not held in memory: the cut's workers fork from this process),
        # or held in `index` while `captured` is set
        self.index: list[np.ndarray] = []
        self.index_files: list[Path] = []
        self._ix = None
        self.kept_tags: dict = {}  # per stream: (way ids, tag set ids, tag sets) of its collector
        self.relations: list | None = None  # features.boundary_relations's (read by the first stream)

    def __len__(self) -> int:
        return self.n

    def counts(self) -> dict[str, int]:
        return {name: self.counts_by_layer[i] for i, name in enumerate(schema.LAYERS)}

    clip_box = None  # while set, features are clipped to it as features.clip_to_box does
    captured = None  # a list: (WKB, layer, min zoom, props) of each feature added, in order, instead of spooling
    keep = None  # a set of partitions: only their files are written (a patch cuts only those)
    reach = None  # per zoom, tile ids: only features that can reach one of them are kept for the cut

    def add(self, geom, feat: schema.Feature, tags, obj: int = -1) -> None:
        geoms = np.empty(1, dtype=object)
        geoms[0] = geom
        layer, min_zoom, props = _entry(feat, tags)
        self.add_many(geoms, [layer], [min_zoom], [props], objs=[obj])

    def add_many(self, geoms: np.ndarray, layers, min_zooms, props, wkbs: list | None = None,
                 objs=None) -> None:
        """Spool features (object array of Mercator geometries, layer indices, min zooms, properties)
        in order: the geometry work is vectorised, then each record is written to its partitions.
        `wkbs` may give a geometry's WKB (what shapely.to_wkb would write; None where not known)."""
        if wkbs is None:
            wkbs = [None] * len(geoms)
        layers = np.asarray(layers, dtype=np.int64)
        min_zooms = np.asarray(min_zooms, dtype=np.int64)
        objs = np.full(len(geoms), -1, dtype=np.int64) if objs is None else np.asarray(objs, dtype=np.int64)
        if self.clip_box is not None:
            # most features lie inside the box and are left as they are: for a rectangle, "contains
            # properly" is "the bounds lie strictly inside" (empty geometries: NaN bounds, not kept)
            x0, y0, x1, y1 = self.clip_box.bounds
            bb = shapely.bounds(geoms)
            keep = (bb[:, 0] > x0) & (bb[:, 1] > y0) & (bb[:, 2] < x1) & (bb[:, 3] < y1)
            for i in np.flatnonzero(~keep).tolist():
                g = _clip_one(geoms[i], self.clip_box)
                if g is not None:
                    if g is not geoms[i]:
                        geoms[i] = g
                        wkbs[i] = None
                    keep[i] = True
            if not keep.all():
                idx = np.flatnonzero(keep)
                geoms, layers, min_zooms, objs = geoms[idx], layers[idx], min_zooms[idx], objs[idx]
                props, wkbs = [props[i] for i in idx], [wkbs[i] for i in idx]
        n = len(geoms)
        if n == 0:
            return
        b = shapely.bounds(geoms)
        dims = shapely.get_dimensions(geoms)
        size = np.full(n, np.inf)
        polys, lines = np.flatnonzero(dims == 2), np.flatnonzero(dims == 1)
        size[polys] = np.sqrt(shapely.area(geoms[polys]))
        size[lines] = shapely.length(geoms[lines])
        missing = [i for i, w in enumerate(wkbs) if w is None]
        if missing:
            for i, w in zip(missing, shapely.to_wkb(geoms[missing]).tolist(), strict=True):
                wkbs[i] = w
        spans = _tile_spans(b, self.pz, self.grow, self.prange)
        mz = np.minimum(min_zooms, self.maxzoom)
        not_earth = layers != _EARTH
        seqs = np.arange(self.next_seq, self.next_seq + n, dtype=np.int64) * SEQ_GAP
        self.next_seq += n
        rows = _index_rows(seqs, objs, layers, min_zooms, b, size)
        if self.captured is None:
            if self._ix is None:
                path = self.folder / f"index.{self.stream}.rows"
                self._ix = open(path, "ab")
                self.index_files.append(path)
            self._ix.write(rows.tobytes())
        else:
            self.index.append(rows)  # a patch's small extract: the records, nothing written
            self.captured.extend(zip(wkbs, layers.tolist(), min_zooms.tolist(), props, strict=True))
            return
        self.n += n
        counts = np.bincount(layers, minlength=len(schema.LAYERS))
        self.counts_by_layer = [int(c) + int(d) for c, d in zip(self.counts_by_layer, counts.tolist(), strict=True)]
        self.all_bounds.frombytes(np.column_stack([b, min_zooms.astype(np.float64)])[not_earth].tobytes())
        low = mz < self.pz
        drawn = low & (size >= self.low_pixel)
        hit = None
        if self.reach is not None:  # a patch: what no tile to cut can use is neither held nor written
            hit = reaching(b, {z: v for z, v in self.reach.items() if z >= self.pz}) | ~not_earth
            drawn &= reaching(b, {z: v for z, v in self.reach.items() if z < self.pz}) | ~not_earth
        for i in np.flatnonzero(drawn).tolist():
            self.low.append((int(seqs[i]), geoms[i], int(layers[i]), int(min_zooms[i]), props[i]))
        sel = low & not_earth
        self.low_bounds.extend(zip(*b[sel].T.tolist(), min_zooms[sel].tolist(), strict=True))
        area = (spans[:, 2] - spans[:, 0] + 1) * (spans[:, 3] - spans[:, 1] + 1)
        shared = (area > MAX_PARTITIONS) | ~not_earth
        seq_l, layer_l, mz_l, span_l = seqs.tolist(), layers.tolist(), min_zooms.tolist(), spans.tolist()
        for i in np.flatnonzero(shared).tolist():
            if hit is None or hit[i]:
                self.shared.append((seq_l[i], wkbs[i], layer_l[i], mz_l[i], props[i]))
            if layer_l[i] != _EARTH:  # its partitions have tiles even when no other feature is there
                self.shared_spans.append(tuple(span_l[i]))
        # one pickled list of records per partition and batch (not one pickle per record)
        by_part: dict[tuple[int, int], list] = {}
        for i in np.flatnonzero(~shared if hit is None else ~shared & hit).tolist():
            rec = (seq_l[i], wkbs[i], layer_l[i], mz_l[i], props[i])
            x0, y0, x1, y1 = span_l[i]
            for x in range(x0, x1 + 1):
                for y in range(y0, y1 + 1):
                    recs = by_part.get((x, y))
                    if recs is None:
                        by_part[(x, y)] = [rec]
                    else:
                        recs.append(rec)
        files = self.files
        keep = self.keep
        for key, recs in by_part.items():
            if keep is not None and key not in keep:
                continue
            fh = files.get(key)
            if fh is None:
                fh = files[key] = open(self.folder / f"{key[0]}-{key[1]}.{self.stream}.features", "ab")
            pickle.dump(recs, fh, protocol=pickle.HIGHEST_PROTOCOL)

    def replace_earth(self, geom) -> None:
        """The earth polygon becomes `geom` (land, once coastlines split the box)."""
        self.shared = [(s, shapely.to_wkb(geom), lay, mz, p) if lay == _EARTH else (s, w, lay, mz, p)
                       for s, w, lay, mz, p in self.shared]
        self.low = [(s, geom, lay, mz, p) if lay == _EARTH else (s, g, lay, mz, p) for s, g, lay, mz, p in self.low]

    def finish(self) -> None:
        """Close this stream's partition files (the partitions they hold stay in `written`)."""
        if self._ix is not None:
            self._ix.close()
            self._ix = None
        for key, fh in self.files.items():
            fh.close()
            self.written.add(key)
        self.files = {}

    def merge(self, other: Spool) -> None:
        """Take another stream's spool (finished) into this one."""
        self.n += other.n
        self.counts_by_layer = [a + b for a, b in zip(self.counts_by_layer, other.counts_by_layer, strict=True)]
        self.written |= other.written
        for name in ("shared", "low", "low_bounds", "shared_spans", "coastlines", "index", "index_files"):
            getattr(self, name).extend(getattr(other, name))
        self.all_bounds.extend(other.all_bounds)
        self.skipped_ways += other.skipped_ways
        self.partial_ways += other.partial_ways
        self.way_flags.extend(other.way_flags)
        self.kept_tags.update(other.kept_tags)
        if other.relations is not None:
            self.relations = other.relations

    def close(self) -> list[tuple[int, int]]:
        """Close the partition files; the partitions to cut (with a file, or under a shared feature)."""
        self.finish()
        keys = set(self.written)
        for x0, y0, x1, y1 in self.shared_spans:
            keys.update((x, y) for x in range(x0, x1 + 1) for y in range(y0, y1 + 1))
        return sorted(keys)


INDEX_DTYPE = np.dtype([("seq", "<i8"), ("obj", "<i8"), ("layer", "<i2"), ("min_zoom", "<i2"),
                        ("bounds", "<f8", (4,)), ("size", "<f8")])


def _index_rows(seqs, objs, layers, min_zooms, bounds, size) -> np.ndarray:
    rows = np.empty(len(seqs), dtype=INDEX_DTYPE)
    rows["seq"], rows["obj"], rows["layer"], rows["min_zoom"] = seqs, objs, layers, min_zooms
    rows["bounds"], rows["size"] = bounds, size
    return rows


def _clip_one(geom, box):
    """features.clip_to_box for one geometry: None when nothing of it is left in the box."""
    if shapely.contains_properly(box, geom):
        return geom
    dim = int(shapely.get_dimensions(geom))
    x0, y0, x1, y1 = box.bounds
    clipped = shapely.clip_by_rect(geom, x0, y0, x1, y1)
    if shapely.is_empty(clipped):
        return None
    if shapely.get_type_id(clipped) == 7:
        parts = [p for p in shapely.get_parts(clipped) if shapely.get_dimensions(p) == dim]
        if not parts:
            return None
        if dim == 2:
            return shapely.union_all(parts)
        if dim == 1:
            return shapely.multilinestrings([q for p in parts for q in shapely.get_parts(p)])
        return shapely.multipoints(parts)
    return clipped


def _load(folder: Path, key: tuple[int, int]) -> list[tuple]:
    """The records of a partition, from every stream's file (none for a partition only shared features
    reach)."""
    out = []
    for path in sorted(folder.glob(f"{key[0]}-{key[1]}.*.features")):
        with open(path, "rb") as fh:
            while True:
                try:
                    out.extend(pickle.load(fh))  # a batch's records
                except EOFError:
                    break
    return out


def _state_of(records: list[tuple], maxzoom: int) -> dict:
    """tiler's cutting state for records (seq, geom, layer, min_zoom, props) in collection order."""
    records.sort(key=lambda r: r[0])
    fs = type("Rows", (), {})()
    fs.geoms = [r[1] for r in records]
    fs.layer = [r[2] for r in records]
    fs.min_zoom = [r[3] for r in records]
    fs.props = [r[4] for r in records]
    st = T._prepare(fs, maxzoom)
    # each feature's seq: tiler._encode_batch then returns each tile's features (geoengine.tiles.splice)
    st["seq"] = np.fromiter((r[0] for r in records), dtype=np.int64, count=len(records))
    return st


_JOB: dict = {}  # set in the parent before the pool forks


def _tiles_in(bounds: np.ndarray, z: int, brng, rng) -> np.ndarray:
    """tiler._feature_tiles over the bbox's range `brng`, restricted to the partition's range `rng`
    (features are clamped to the bbox's range first, as when cutting the whole set)."""
    size = WORLD / (1 << z)
    half = WORLD / 2
    fx0 = np.clip(np.floor((bounds[:, 0] + half) / size), brng[0], brng[2])
    fx1 = np.clip(np.floor((bounds[:, 2] + half) / size), brng[0], brng[2])
    fy0 = np.clip(np.floor((half - bounds[:, 3]) / size), brng[1], brng[3])
    fy1 = np.clip(np.floor((half - bounds[:, 1]) / size), brng[1], brng[3])
    hit = (fx1 >= rng[0]) & (fx0 <= rng[2]) & (fy1 >= rng[1]) & (fy0 <= rng[3])
    # a feature's tile count is decided over the bbox's range, as in the whole-set cut
    n = (fx1 - fx0 + 1) * (fy1 - fy0 + 1)
    hit &= n <= T.MAX_TILES_PER_FEATURE
    return T._feature_tiles(bounds[hit], z, rng)


def _cut_partition(key: tuple[int, int]) -> list[tuple[int, int, int, bytes]]:
    job = _JOB
    px, py = key
    pz = job["pz"]
    parts = job.get("parts")  # (a splice's mini cut: its partitions' records in memory)
    recs = (list(parts.get(key, ())) if parts is not None else _load(job["folder"], key)) + list(job["shared"])
    if job.get("seqs") is not None:  # a patch: only the records that can reach a tile to cut, before parsing
        s = np.fromiter((r[0] for r in recs), dtype=np.int64, count=len(recs))
        hit = np.isin(s, job["seqs"])
        recs = [r for r, h in zip(recs, hit.tolist(), strict=True) if h]
    geoms = shapely.from_wkb(np.fromiter((r[1] for r in recs), dtype=object, count=len(recs)))  # one call
    recs = [(s, g, lay, mz, p) for (s, _w, lay, mz, p), g in zip(recs, geoms.tolist(), strict=True)]
    only = job.get("only")
    if only is not None:  # a patch: only these tiles, from the features that can reach them
        recs = _reaching(recs, only, key, pz, job["maxzoom"])
    T._STATE = _state_of(recs, job["maxzoom"])
    st = T._STATE
    keep = st["layer"] != _EARTH
    bounds = shapely.bounds(st["geoms"][keep])
    min_zoom = np.asarray(st["min_zoom"])[keep]
    out = []
    for z in range(pz, job["maxzoom"] + 1):
        k = 1 << (z - pz)
        brng = T.tile_range(job["bbox"], z)
        rng = (max(px * k, brng[0]), max(py * k, brng[1]), min(px * k + k - 1, brng[2]), min(py * k + k - 1, brng[3]))
        if rng[0] > rng[2] or rng[1] > rng[3]:
            continue
        if only is not None:  # the tiles to cut again (the caller took them from the whole cut's plan)
            ids = only.get(z, np.empty(0, dtype=np.int64))
            xs, ys = ids >> 32, ids & 0xFFFFFFFF
            ids = ids[(xs >= rng[0]) & (xs <= rng[2]) & (ys >= rng[1]) & (ys <= rng[3])]
        elif job["full_grid"].get(z):  # the whole-set cut makes every tile of the box at this zoom
            xs, ys = np.meshgrid(np.arange(rng[0], rng[2] + 1, dtype=np.int64),
                                 np.arange(rng[1], rng[3] + 1, dtype=np.int64))
            ids = np.sort(((xs << 32) | ys).ravel())
        else:
            ids = _tiles_in(bounds[min_zoom <= z], z, brng, rng)
        tiles = list(zip((ids >> 32).tolist(), (ids & 0xFFFFFFFF).tolist(), strict=True))
        for i in range(0, len(tiles), T.BATCH):
            out.extend(T._encode_batch((z, tiles[i:i + T.BATCH])))
    T._STATE = {}
    return out


def _reaching(recs: list[tuple], only: dict, key: tuple[int, int], pz: int, maxzoom: int) -> list[tuple]:
    """The records (seq, geom, ...) whose bounds meet one of the tiles `only` (per zoom, ids x << 32 | y)
    of partition `key` grown by its zoom's clipping buffer: every feature a cut of those tiles can use
    (a tile's features are those whose simplified bounds, within their bounds, meet the grown tile)."""
    if not recs:
        return recs
    mine = {}
    for z in range(pz, maxzoom + 1):
        ids = only.get(z)
        if ids is None or len(ids) == 0:
            continue
        s = z - pz
        mine[z] = ids[((ids >> 32) >> s == key[0]) & ((ids & 0xFFFFFFFF) >> s == key[1])]
    b = shapely.bounds(np.fromiter((r[1] for r in recs), dtype=object, count=len(recs)))
    hit = reaching(b, mine)
    return [r for r, h in zip(recs, hit.tolist(), strict=True) if h]


def reaching(b: np.ndarray, only: dict) -> np.ndarray:
    """Which Mercator bounds `b` [n, 4] meet one of the tiles `only` (per zoom, ids x << 32 | y), each
    grown by its zoom's clipping buffer (edges included): a summed-area table of the tiles per zoom,
    over their extent, and one lookup per bounds' tile span."""
    hit = np.zeros(len(b), dtype=bool)
    half = WORLD / 2
    for z, ids in only.items():
        if ids is None or len(ids) == 0 or len(b) == 0:
            continue
        xs, ys = ids >> 32, ids & 0xFFFFFFFF
        x0, y0, x1, y1 = int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())
        while (x1 - x0 + 2) * (y1 - y0 + 2) > MAX_GRID:
            # the parent tiles instead (a parent holds its children, and its buffer is twice theirs):
            # more bounds may meet them, none fewer
            z, xs, ys = z - 1, xs >> 1, ys >> 1
            x0, y0, x1, y1 = x0 >> 1, y0 >> 1, x1 >> 1, y1 >> 1
        grid = np.zeros((y1 - y0 + 2, x1 - x0 + 2), dtype=np.int64)
        grid[ys - y0 + 1, xs - x0 + 1] = 1
        grid = grid.cumsum(0).cumsum(1)
        size = WORLD / (1 << z)
        grow = size * T.BUFFER / T.EXTENT
        spans = _tile_spans(b, z, grow, (x0, y0, x1, y1)) - np.array([x0, y0, x0, y0])
        # bounds wholly outside the extent were clamped onto its edge: they meet none of its tiles
        inside = ((b[:, 2] + grow + half) / size >= x0) & ((b[:, 0] - grow + half) / size < x1 + 1) & \
            ((half - b[:, 1] + grow) / size >= y0) & ((half - b[:, 3] - grow) / size < y1 + 1)
        sx0, sy0, sx1, sy1 = spans.T
        n = grid[sy1 + 1, sx1 + 1] - grid[sy0, sx1 + 1] - grid[sy1 + 1, sx0] + grid[sy0, sx0]
        hit |= inside & (n > 0)
    return hit


def _largest_first(folder: Path, partitions: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The partitions by the size of their files, largest first: the pool's last tasks are then small
    ones, so no core waits alone on a large partition at the end (the tiles are the same in any order)."""
    size = {key: 0 for key in partitions}
    for path in folder.glob("*.features"):
        x, y = path.name.split(".", 1)[0].split("-")
        key = (int(x), int(y))
        if key in size:
            size[key] += path.stat().st_size
    return sorted(partitions, key=lambda k: (-size[k], k))


def _full_grid(spool: Spool, bbox) -> dict[int, bool]:
    """Per zoom >= the partition zoom: does tiler.tasks_for make every tile of the box (features touch at
    least 1/FULL_GRID_FACTOR of them)? Decided over all features' bounds, as the whole-set cut does."""
    factor = getattr(T, "FULL_GRID_FACTOR", None)
    if factor is None:
        return {}
    ab = np.frombuffer(spool.all_bounds, dtype=np.float64).reshape(-1, 5) if len(spool.all_bounds) else np.zeros((0, 5))
    out = {}
    for z in range(spool.pz, spool.maxzoom + 1):
        rng = T.tile_range(bbox, z)
        sel = ab[np.minimum(ab[:, 4], spool.maxzoom) <= z, :4]
        n = len(T._feature_tiles(sel, z, rng))
        out[z] = (rng[2] - rng[0] + 1) * (rng[3] - rng[1] + 1) <= factor * n
    return out


class CutPlan(NamedTuple):
    """What `cut_spooled` will cut: the low-zoom batches and the partitions (with every partition of
    the box when a zoom makes a full grid), so a caller can count the steps before cutting."""

    low_tasks: list
    partitions: list[tuple[int, int]]
    full_grid: dict[int, bool]


def plan_cut(spool: Spool, partitions: list[tuple[int, int]], bbox) -> CutPlan:
    lb = np.asarray(spool.low_bounds, dtype=np.float64).reshape(-1, 5)
    low_tasks = T.tasks_for(bbox, T.MINZOOM, spool.pz - 1, lb[:, :4], lb[:, 4].astype(np.int16))
    full_grid = _full_grid(spool, bbox)
    if any(full_grid.values()):  # every partition of the box then has tiles, even one without features
        x0, y0, x1, y1 = spool.prange
        partitions = sorted(set(partitions) | {(x, y) for x in range(x0, x1 + 1) for y in range(y0, y1 + 1)})
    return CutPlan(low_tasks, partitions, full_grid)


def _partitions_of(tiles: dict, pz: int) -> set[tuple[int, int]]:
    keys: set[tuple[int, int]] = set()
    for z, ids in tiles.items():
        if z < pz or len(ids) == 0:
            continue
        s = z - pz
        keys.update(zip(((ids >> 32) >> s).tolist(), ((ids & 0xFFFFFFFF) >> s).tolist(), strict=True))
    return keys


def restrict_plan(plan: CutPlan, only: dict, pz: int) -> CutPlan:
    """The plan of a cut of the tiles `only` (per zoom, sorted ids x << 32 | y, among those `plan`
    visits): the low tasks with those tiles alone (batches of tiler.BATCH per zoom; a tile's bytes do
    not depend on its batch), and the partitions holding one of them."""
    low: dict[int, list] = {}
    for z, tiles in plan.low_tasks:
        ids = only.get(z)
        if ids is None or len(ids) == 0:
            continue
        t = np.asarray([(x << 32) | y for x, y in tiles], dtype=np.int64)
        low.setdefault(z, []).extend(t[np.isin(t, ids)].tolist())
    tasks = []
    for z in sorted(low, reverse=True):
        tiles = [(i >> 32, i & 0xFFFFFFFF) for i in sorted(low[z])]
        tasks.extend((z, tiles[i:i + T.BATCH]) for i in range(0, len(tiles), T.BATCH))
    return CutPlan(tasks, sorted(_partitions_of(only, pz)), plan.full_grid)


def cut_spooled(spool: Spool, partitions: list[tuple[int, int]], bbox, *, processes: int | None = None,
                on_step=None, plan: CutPlan | None = None, only: dict | None = None, record: list | None = None):
    """Yield (z, x, y, gzip bytes) of every tile: low zooms from memory, then partition by partition.
    `on_step(1)` after each of the plan's low tasks and partitions (`plan_cut`, made here when not given).
    The garbage collector is off meanwhile (`gc_paused`). `only` (a patch, per zoom the sorted ids
    x << 32 | y of tiles the plan visits): cut those tiles alone (`restrict_plan` first). `record` (a
    list): (z, x, y, seqs, mixed) of each tile is appended to it (tiler._tile_seqs; geoengine.tiles.splice)."""
    with gc_paused():
        for t in _cut_spooled(spool, partitions, bbox, processes=processes, on_step=on_step, plan=plan, only=only):
            if len(t) == 5:
                if record is not None:
                    record.append((t[0], t[1], t[2], *t[4]))
                t = t[:4]
            yield t


def _cut_spooled(spool: Spool, partitions: list[tuple[int, int]], bbox, *, processes: int | None = None,
                 on_step=None, plan: CutPlan | None = None, only: dict | None = None):
    global _JOB
    maxzoom = spool.maxzoom
    processes = processes or min(os.cpu_count() or 1, 8)
    plan = plan or plan_cut(spool, partitions, bbox)
    low_tasks, partitions, full_grid = plan
    mvt.warm()  # the kernels are loaded once here and inherited by every forked worker
    simplify.warm()
    # low zooms: the in-memory set, tasks from the bounds of every low-min-zoom feature
    low = list(spool.low)
    if only is not None:  # a patch: only the low-zoom features that reach a tile to cut
        b = shapely.bounds(np.fromiter((r[1] for r in low), dtype=object, count=len(low)))
        hit = reaching(b, {z: ids for z, ids in only.items() if z < spool.pz})
        low = [r for r, h in zip(low, hit.tolist(), strict=True) if h]
    T._STATE = _state_of(low, maxzoom)
    _JOB = {"folder": spool.folder, "shared": spool.shared, "maxzoom": maxzoom, "bbox": bbox, "pz": spool.pz,
            "full_grid": full_grid, "only": only, "seqs": getattr(spool, "reach_seqs", None),
            "parts": getattr(spool, "parts", None)}
    try:
        if processes <= 1:
            for t in low_tasks:
                yield from T._encode_batch(t)
                on_step and on_step(1)
            for key in partitions:
                yield from _cut_partition(key)
                on_step and on_step(1)
            return
        ctx = mp.get_context("fork")
        with ctx.Pool(processes) as pool:
            for res in pool.imap_unordered(T._encode_batch, low_tasks, chunksize=1):
                yield from res
                on_step and on_step(1)
        T._STATE = {}
        with ctx.Pool(processes, maxtasksperchild=1) as pool:
            for res in pool.imap_unordered(_cut_partition, _largest_first(spool.folder, partitions), chunksize=1):
                yield from res
                on_step and on_step(1)
    finally:
        T._STATE = {}
        _JOB = {}


def _collect_stream(k: int, osm_path, bbox, folder: Path, maxzoom: int, partition_zoom: int, box,
                    keep: set | None = None, way_level: dict | None = None, capture: bool = False) -> Spool:
    """Collect stream k into its own spool. The points-and-lines stream reads the boundary relations
    first (their member ways are boundary lines) when `way_level` is not given; the areas stream does
    not need them, so it starts at once while the other process reads them."""
    relations = None
    if way_level is None and STREAMS[k].needs_boundaries:
        way_level, relations = boundary_relations(osm_path)
    spool = Spool(folder, bbox, maxzoom, partition_zoom, stream=f"s{k}", first_seq=(k + 1) * SEQ_STRIDE)
    if relations is not None:
        spool.relations = relations
    if capture:  # (geoengine.tiles.slim: the features of a small extract, with their records)
        spool.captured = []
    spool.clip_box = box
    if keep is not None:
        spool.reach = keep
        spool.keep = _partitions_of(keep, spool.pz)
    collector = STREAMS[k](spool, way_level)
    collector.collect(osm_path)
    spool.kept_tags[k] = (collector.way_ids, collector.way_tag_set, list(collector.tag_sets))
    spool.clip_box = None
    spool.finish()
    return spool


def _stream_child(k: int, state_path: Path, parent: int, *args) -> None:  # pragma: no cover - forked child
    """Collect stream k and leave its spool (or its error's message) in `state_path`; the parent raises
    the error, so a failed build prints one line, not the child's traceback."""
    die_with(parent)
    try:
        result = _collect_stream(k, *args)
    except BaseException as exc:  # noqa: BLE001 - handed to the parent as a message
        result = ("error", f"{type(exc).__name__}: {exc}")
    try:
        with open(state_path, "wb") as fh:
            pickle.dump(result, fh, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:  # noqa: BLE001 - e.g. the disk is full: the exit code tells the parent
        os._exit(1)


def collect_spooled(osm_path, bbox, folder: Path, *, maxzoom: int = T.MAXZOOM, partition_zoom: int = PARTITION_ZOOM,
                    processes: int | None = None, keep: set | None = None) -> tuple[Spool, list[tuple[int, int]]]:
    """features.collect, spooled (`_collect_spooled`), with the garbage collector off (`gc_paused`).
    `keep` (a patch: per zoom, the ids x << 32 | y of the tiles to cut): only the features that can reach
    one of them are written or held (every feature is still counted, and its bounds kept, so the plan of
    the whole cut is the same)."""
    with gc_paused():
        return _collect_spooled(osm_path, bbox, folder, maxzoom=maxzoom, partition_zoom=partition_zoom,
                                processes=processes, keep=keep)


def _collect_spooled(osm_path, bbox, folder: Path, *, maxzoom: int = T.MAXZOOM, partition_zoom: int = PARTITION_ZOOM,
                     processes: int | None = None, keep: set | None = None) -> tuple[Spool, list[tuple[int, int]]]:
    """features.collect, spooled: the same features in the same order, written by partition. The
    collection streams (points and lines; areas) each read the extract, the first in a forked process
    when there is a second core."""
    from geoengine.tiles.features import lonlat_to_merc, split_land_sea

    folder = Path(folder)
    spool = Spool(folder, bbox, maxzoom, partition_zoom)
    x0, y0 = lonlat_to_merc(bbox[0], bbox[1])
    x1, y1 = lonlat_to_merc(bbox[2], bbox[3])
    box = shapely.box(float(x0), float(y0), float(x1), float(y1))
    spool.clip_box = box
    spool.add(box, schema.Feature("earth", "earth", 0), {}, obj=OBJ_OTHER)
    spool.clip_box = None
    args = (osm_path, bbox, folder, maxzoom, partition_zoom, box, keep)
    processes = processes or min(os.cpu_count() or 1, len(STREAMS))
    child = None
    if processes > 1:
        state_path = folder / "s0.state"
        child = mp.get_context("fork").Process(target=_stream_child, args=(0, state_path, os.getpid(), *args),
                                               daemon=True)
        child.start()
    try:
        streams = [_collect_stream(k, *args) for k in range(1 if child else 0, len(STREAMS))]
    except BaseException:
        if child is not None:
            child.kill()
            child.join()
        raise
    if child is not None:
        child.join()
        if child.exitcode != 0:
            raise RuntimeError(f"collecting the extract's points and lines failed (exit code {child.exitcode})")
        with open(state_path, "rb") as fh:
            result = pickle.load(fh)
        state_path.unlink()
        if isinstance(result, tuple):
            raise RuntimeError(f"collecting the extract's points and lines failed: {result[1]}")
        streams.insert(0, result)
    for other in streams:
        spool.merge(other)
    if spool.coastlines:
        split = split_land_sea(spool.coastlines, box)
        if split is not None:
            land, sea = split
            spool.replace_earth(land)
            spool.next_seq = (len(STREAMS) + 1) * SEQ_STRIDE  # after every stream, as in features.collect
            spool.add(sea, schema.Feature("water", "ocean", 0, "ocean"), {}, obj=(1 << 2) | OBJ_OTHER)
    # the batches' temporaries stay on glibc's heap once freed; the cut's workers fork from this process
    # and would carry them
    heap.release()
    return spool, spool.close()
