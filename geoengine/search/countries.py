"""The country of a point that no country boundary of the extract covers: Nominatim's country grid.

A clipped extract rarely holds its countries whole (Andorra's extract has 17 of Andorra's 19 border ways,
11 of France's 931, 8 of Spain's 366), so their relations do not assemble. Nominatim then takes an object's
country from `country_osm_grid`, a simplified polygon grid of the world's OSM countries (`get_country_code`
in its lib-sql/functions/utils.sql): the smallest grid polygon that covers the point (ST_Covers: its edge
counts), else none. `data/search/country_grid.bin` holds that grid unchanged (vendor/country-grid/generate.py
derives it from the file nominatim-db ships; ODbL, (c) OpenStreetMap contributors).

Only the polygons whose bounding box meets the points asked about become geometries, so a query over one
region costs that region's few cells, not the world's 11,811.
"""

from __future__ import annotations

import lzma
from pathlib import Path

import numpy as np
import shapely

from geoengine.config import data_path

SCALE = 1e-4  # the grid's vertices are int32 steps of 1e-4 degree
CHUNK = 262_144  # points per tree query (bounds the pair arrays)


def grid_path() -> Path:
    return data_path("search/country_grid.bin")


class CountryGrid:
    """Nominatim's country grid as arrays: polygon p has country `cc[p]` (upper case), Nominatim's `area[p]`
    and rings `ring_ends[poly_rings[p]:poly_rings[p + 1] + 1]` (exterior first) over the vertices `xy`."""

    def __init__(self, path: Path):
        # six .npy arrays in one xz stream, read array by array (no copy of the whole decompressed file)
        with lzma.open(path, "rb") as f:
            read = np.lib.format.read_array
            self.source = str(read(f, allow_pickle=False))
            self.cc = np.char.upper(np.char.decode(read(f, allow_pickle=False), "ascii")).astype(object)
            self.area = read(f, allow_pickle=False)
            self.poly_rings = read(f, allow_pickle=False).astype(np.int64)
            self.ring_ends = read(f, allow_pickle=False).astype(np.int64)
            self.xy = read(f, allow_pickle=False)  # int32 steps, summed in place into 1e-4 degree units
        np.cumsum(self.xy, axis=0, out=self.xy)
        # each polygon's bounding box, from its exterior ring
        first = self.ring_ends[self.poly_rings[:-1]]
        ends = self.ring_ends[self.poly_rings[:-1] + 1]
        self.box = np.column_stack([np.minimum.reduceat(self.xy[:, 0], first), np.minimum.reduceat(self.xy[:, 1], first),
                                    np.maximum.reduceat(self.xy[:, 0], first), np.maximum.reduceat(self.xy[:, 1], first)]) * SCALE
        assert (ends > first).all()

    def __len__(self) -> int:
        return len(self.cc)

    def polygon(self, p: int):
        rings = [self.xy[self.ring_ends[r]:self.ring_ends[r + 1]] * SCALE
                 for r in range(self.poly_rings[p], self.poly_rings[p + 1])]
        return shapely.Polygon(rings[0], rings[1:])

    def codes(self, lon, lat, exclude=()) -> np.ndarray:
        """The country code (ISO 3166-1 alpha-2, upper case) of each point: the smallest grid polygon that
        covers it, None where none does (the sea beyond the grid). `exclude`: codes never given (the
        countries whose own polygon the extract holds: a point outside it is not in it, whatever the coarser
        grid says)."""
        lon = np.asarray(lon, np.float64)
        lat = np.asarray(lat, np.float64)
        out = np.full(len(lon), None, dtype=object)
        if not len(lon):
            return out
        # the polygons whose box meets the points' cells of one degree (far-apart parts do not take in the
        # cells between them)
        cells = np.unique(np.column_stack([np.floor(lon), np.floor(lat)]), axis=0)
        near = np.zeros(len(self), bool)
        cb = np.floor(self.box)
        for x, y in cells.tolist():  # one step per occupied degree cell
            near |= (cb[:, 0] <= x) & (cb[:, 2] >= x) & (cb[:, 1] <= y) & (cb[:, 3] >= y)
        if exclude:
            near &= ~np.isin(self.cc, list(exclude))
        sel = np.flatnonzero(near)
        if not len(sel):
            return out
        polys = [self.polygon(int(p)) for p in sel.tolist()]  # the region's cells: tens, not thousands
        tree = shapely.STRtree(polys)
        area = self.area[sel]
        pick = np.full(len(lon), -1, np.int64)
        for a in range(0, len(lon), CHUNK):
            pts = shapely.points(lon[a:a + CHUNK], lat[a:a + CHUNK])
            pt, poly = tree.query(pts, predicate="intersects")
            del pts
            pt = pt + a
            # per point the smallest covering polygon (Nominatim: ORDER BY area ASC LIMIT 1)
            order = np.lexsort((area[poly], pt))
            pt, poly = pt[order], poly[order]
            first = np.ones(len(pt), bool)
            first[1:] = pt[1:] != pt[:-1]
            pick[pt[first]] = poly[first]
        hit = pick >= 0
        out[hit] = self.cc[sel[pick[hit]]]
        return out


CACHE_FORMAT = 1


def _cache_path(path: Path) -> Path | None:
    """Where the decompressed grid of the file `path` is kept (the cache folder, GEOENGINE_CACHE; by the
    file's content hash), None when no cache folder is set up."""
    import hashlib

    from geoengine.config import Settings

    try:
        folder = Settings.from_env().cache_dir
    except Exception:  # noqa: BLE001 - a bad setting elsewhere: no cache, the grid is read as before
        return None
    if folder is None:
        return None
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    return Path(folder) / "search" / f"country_grid-{digest}-v{CACHE_FORMAT}.npz"


def _load_cached(cache: Path) -> CountryGrid | None:
    try:
        with np.load(cache, allow_pickle=False) as z:
            g = CountryGrid.__new__(CountryGrid)
            g.source = str(z["source"])
            g.cc = z["cc"].astype(object)
            g.area, g.poly_rings, g.ring_ends, g.xy, g.box = (z[k] for k in ("area", "poly_rings", "ring_ends", "xy", "box"))
        return g
    except (OSError, KeyError, ValueError):
        return None


def _save_cached(cache: Path, g: CountryGrid) -> None:
    import os
    import tempfile

    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache.parent, prefix=".country_grid-", suffix=".npz")
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, source=np.asarray(g.source), cc=np.asarray(g.cc.tolist(), dtype=str), area=g.area,
                     poly_rings=g.poly_rings, ring_ends=g.ring_ends, xy=g.xy, box=g.box)
        os.replace(tmp, cache)  # (another process's copy of the same content may have come first: equal)
    except OSError:
        pass


def country_grid() -> CountryGrid:
    """The grid (16 MB of vertices while held: the build drops it after its countries step). Decompressing the
    xz file took 0.2 s a build (and an update's search patch): the arrays are kept decompressed in the cache
    folder (`_cache_path`, about 20 MB) after the first read, and read from there."""
    path = grid_path()
    cache = _cache_path(path) if path.exists() else None
    if cache is not None and cache.exists():
        g = _load_cached(cache)
        if g is not None:
            return g
    g = CountryGrid(path)
    if cache is not None:
        _save_cached(cache, g)
    return g
