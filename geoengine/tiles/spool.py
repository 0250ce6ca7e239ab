"""Tile features spooled to disk by area, then cut one area at a time on every core.

The collector hands each feature to a `Spool` instead of a list in memory. The spool writes it (WKB,
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

import multiprocessing as mp
import os
import pickle
from array import array
from pathlib import Path

import numpy as np
import shapely

from geoengine.tiles import schema
from geoengine.tiles import tiler as T
from geoengine.tiles.features import WORLD

PARTITION_ZOOM = 10
MAX_PARTITIONS = 16
_EARTH = schema.LAYERS.index("earth")


def _tile_span(bounds, z: int, grow: float, rng) -> tuple[int, int, int, int]:
    size = WORLD / (1 << z)
    half = WORLD / 2
    x0, y0, x1, y1 = rng
    clamp = lambda v, lo, hi: min(max(int(v), lo), hi)  # noqa: E731
    return (clamp(np.floor((bounds[0] - grow + half) / size), x0, x1),
            clamp(np.floor((half - bounds[3] - grow) / size), y0, y1),
            clamp(np.floor((bounds[2] + grow + half) / size), x0, x1),
            clamp(np.floor((half - bounds[1] + grow) / size), y0, y1))


class Spool:
    """A FeatureSet-like sink for the collector (`add`, `coastlines`, counters) that writes to disk."""

    def __init__(self, folder: Path, bbox, maxzoom: int = T.MAXZOOM, partition_zoom: int = PARTITION_ZOOM):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.maxzoom = maxzoom
        self.pz = pz = min(partition_zoom, maxzoom)
        self.prange = T.tile_range(bbox, pz)
        self.grow = WORLD / (1 << pz) * T.BUFFER / T.EXTENT  # the largest buffer of any zoom >= pz
        self.low_pixel = WORLD / (1 << (pz - 1)) / 256.0
        self.files: dict[tuple[int, int], object] = {}
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

    def __len__(self) -> int:
        return self.n

    def counts(self) -> dict[str, int]:
        return {name: self.counts_by_layer[i] for i, name in enumerate(schema.LAYERS)}

    clip_box = None  # while set, features are clipped to it as features.clip_to_box does

    def add(self, geom, feat: schema.Feature, tags) -> None:
        if self.clip_box is not None:
            geom = _clip_one(geom, self.clip_box)
            if geom is None:
                return
        self.add_record(geom, schema.LAYERS.index(feat.layer), feat.min_zoom, schema.properties(feat, tags))

    def add_record(self, geom, layer: int, min_zoom: int, props: dict, seq: int | None = None) -> None:
        if seq is None:
            seq = self.n
            self.n += 1
            self.counts_by_layer[layer] += 1
        b = shapely.bounds(geom)
        mz = min(min_zoom, self.maxzoom)
        if layer != _EARTH:
            self.all_bounds.extend((*b, float(min_zoom)))
        if mz < self.pz:
            dim = int(shapely.get_dimensions(geom))
            size = np.sqrt(shapely.area(geom)) if dim == 2 else shapely.length(geom) if dim == 1 else np.inf
            if size >= self.low_pixel:
                self.low.append((seq, geom, layer, min_zoom, props))
            if layer != _EARTH:
                self.low_bounds.append((*b, min_zoom))
        x0, y0, x1, y1 = _tile_span(b, self.pz, self.grow, self.prange)
        rec = (seq, shapely.to_wkb(geom), layer, min_zoom, props)
        if (x1 - x0 + 1) * (y1 - y0 + 1) > MAX_PARTITIONS or layer == _EARTH:
            self.shared.append(rec)
            if layer != _EARTH:  # its partitions have tiles even when no other feature is there
                self.shared_spans.append((x0, y0, x1, y1))
            return
        data = pickle.dumps(rec, protocol=pickle.HIGHEST_PROTOCOL)
        for x in range(x0, x1 + 1):
            for y in range(y0, y1 + 1):
                fh = self.files.get((x, y))
                if fh is None:
                    fh = self.files[(x, y)] = open(self.folder / f"{x}-{y}.features", "ab")
                fh.write(data)

    def replace_earth(self, geom) -> None:
        """The earth polygon becomes `geom` (land, once coastlines split the box)."""
        self.shared = [(s, shapely.to_wkb(geom), lay, mz, p) if lay == _EARTH else (s, w, lay, mz, p)
                       for s, w, lay, mz, p in self.shared]
        self.low = [(s, geom, lay, mz, p) if lay == _EARTH else (s, g, lay, mz, p) for s, g, lay, mz, p in self.low]

    def close(self) -> list[tuple[int, int]]:
        """Close the partition files; the partitions to cut (with a file, or under a shared feature)."""
        for fh in self.files.values():
            fh.close()
        keys = set(self.files)
        for x0, y0, x1, y1 in self.shared_spans:
            keys.update((x, y) for x in range(x0, x1 + 1) for y in range(y0, y1 + 1))
        return sorted(keys)


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


def _load(path: Path) -> list[tuple]:
    out = []
    if not path.exists():  # a partition only shared features reach
        return out
    with open(path, "rb") as fh:
        while True:
            try:
                out.append(pickle.load(fh))
            except EOFError:
                return out


def _state_of(records: list[tuple], maxzoom: int) -> dict:
    """tiler's cutting state for records (seq, geom, layer, min_zoom, props) in collection order."""
    records.sort(key=lambda r: r[0])
    fs = type("Rows", (), {})()
    fs.geoms = [r[1] for r in records]
    fs.layer = [r[2] for r in records]
    fs.min_zoom = [r[3] for r in records]
    fs.props = [r[4] for r in records]
    return T._prepare(fs, maxzoom)


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
    recs = _load(job["folder"] / f"{px}-{py}.features")
    shared = [(s, shapely.from_wkb(w), lay, mz, p) for s, w, lay, mz, p in job["shared"]]
    recs = [(s, shapely.from_wkb(w), lay, mz, p) for s, w, lay, mz, p in recs] + shared
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
        if job["full_grid"].get(z):  # the whole-set cut makes every tile of the box at this zoom
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


def cut_spooled(spool: Spool, partitions: list[tuple[int, int]], bbox, *, processes: int | None = None,
                on_step=None):
    """Yield (z, x, y, gzip bytes) of every tile: low zooms from memory, then partition by partition."""
    global _JOB
    maxzoom = spool.maxzoom
    processes = processes or min(os.cpu_count() or 1, 8)
    # low zooms: the in-memory set, tasks from the bounds of every low-min-zoom feature
    low_recs = list(spool.low)
    low_state = _state_of(low_recs, maxzoom)
    lb = np.asarray(spool.low_bounds, dtype=np.float64).reshape(-1, 5)
    low_tasks = T.tasks_for(bbox, T.MINZOOM, spool.pz - 1, lb[:, :4], lb[:, 4].astype(np.int16))
    T._STATE = low_state
    full_grid = _full_grid(spool, bbox)
    if any(full_grid.values()):  # every partition of the box then has tiles, even one without features
        x0, y0, x1, y1 = spool.prange
        partitions = sorted(set(partitions) | {(x, y) for x in range(x0, x1 + 1) for y in range(y0, y1 + 1)})
    _JOB = {"folder": spool.folder, "shared": spool.shared, "maxzoom": maxzoom, "bbox": bbox, "pz": spool.pz,
            "full_grid": full_grid}
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
        del low_state
        with ctx.Pool(processes, maxtasksperchild=1) as pool:
            for res in pool.imap_unordered(_cut_partition, partitions, chunksize=1):
                yield from res
                on_step and on_step(1)
    finally:
        T._STATE = {}
        _JOB = {}


def low_task_count(spool: Spool, bbox) -> int:
    lb = np.asarray(spool.low_bounds, dtype=np.float64).reshape(-1, 5)
    return len(T.tasks_for(bbox, T.MINZOOM, spool.pz - 1, lb[:, :4], lb[:, 4].astype(np.int16)))


def collect_spooled(osm_path, bbox, folder: Path, *, maxzoom: int = T.MAXZOOM,
                    partition_zoom: int = PARTITION_ZOOM) -> tuple[Spool, list[tuple[int, int]]]:
    """features.collect, spooled: the same features in the same order, written by partition."""
    import osmium

    from geoengine.tiles.features import _BoundaryRelations, _Collector, lonlat_to_merc, split_land_sea

    rel = _BoundaryRelations()
    rel.apply_file(str(osm_path), filters=[osmium.filter.EntityFilter(osmium.osm.RELATION)])
    spool = Spool(folder, bbox, maxzoom, partition_zoom)
    x0, y0 = lonlat_to_merc(bbox[0], bbox[1])
    x1, y1 = lonlat_to_merc(bbox[2], bbox[3])
    box = shapely.box(float(x0), float(y0), float(x1), float(y1))
    spool.clip_box = box
    spool.add(box, schema.Feature("earth", "earth", 0), {})
    coll = _Collector(spool, rel.way_level)
    coll.apply_file(str(osm_path), locations=True)
    spool.clip_box = None
    if spool.coastlines:
        split = split_land_sea(spool.coastlines, box)
        if split is not None:
            land, sea = split
            spool.replace_earth(land)
            spool.add(sea, schema.Feature("water", "ocean", 0, "ocean"), {})
    return spool, spool.close()
