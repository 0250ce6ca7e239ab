"""The elevation model of a bundle: memory-mapped DEM tiles and a compiled bilinear sampler.

Sampling rules (also in docs/elevation.md):

- Bilinear interpolation between the four samples around a point, all points of a request in one
  Numba call.
- Tile edges are seamless: the four samples are looked up one by one, so a point between the last
  sample row or column of one tile and the first of its neighbour uses both tiles' samples. A point on
  a shared edge (HGT tiles repeat their edges) reads the tile that contains it.
- Voids (-32768) are never used as heights. The bilinear weights of the valid samples are
  renormalised to sum to 1; a point whose whole weight falls on voids (it sits on a void sample)
  takes the mean of the valid samples of its cell. When all four samples are voids the point has no
  height (NaN in the library, null over HTTP).
- A point is outside coverage when any of its four samples lies in no tile: NaN / null too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
from numba.typed import List as TypedList

from geoengine.elevation.dem import VOID

INDEX_FORMAT = 1

OK, VOIDED, OUTSIDE = 0, 1, 2
_EPS = 1e-9  # degrees; absorbs rounding of coordinates on tile edges


@numba.njit(cache=True, nogil=True, inline="always")
def _locate(lat, lon, north, west, dlat, dlon, rows, cols, t):
    """Value at the sample nearest to grid node (lat, lon) in tile t, or -1 when no tile t holds it."""
    r = (north[t] - lat) / dlat[t]
    c = (lon - west[t]) / dlon[t]
    if r < -0.5 or c < -0.5 or r > rows[t] - 0.5 or c > cols[t] - 0.5:
        return -1, -1
    ri = min(max(int(np.floor(r + 0.5)), 0), rows[t] - 1)
    ci = min(max(int(np.floor(c + 0.5)), 0), cols[t] - 1)
    return ri, ci


@numba.njit(cache=True, nogil=True, inline="always")
def _snap(x):
    """A grid coordinate within 1e-7 of a whole sample (1e-5 m at 3 arc-seconds) is that sample, so
    a point given on a grid node picks the same cell however its degrees were rounded."""
    k = np.floor(x + 0.5)
    return k if abs(x - k) < 1e-7 else x


@numba.njit(cache=True, nogil=True)
def sample_kernel(lats, lons, grids, north, west, dlat, dlon, rows, cols):
    """Bilinear heights (float64) and a status per point (0 ok, 1 all samples void, 2 outside).

    Three passes: place each point in a tile's grid; read the four samples tile by tile (one typed-list
    lookup per tile, not per point); weigh them.
    """
    n = lats.size
    ntiles = north.size
    out = np.full(n, np.nan)
    status = np.full(n, OUTSIDE, dtype=np.int8)
    ref = np.full(n, -1, dtype=np.int64)
    gap = np.zeros(n, dtype=np.bool_)
    r0s = np.zeros(n, dtype=np.int64)
    c0s = np.zeros(n, dtype=np.int64)
    frs = np.zeros(n)
    fcs = np.zeros(n)
    # 1. place: a tile whose sample grid contains the point (all four samples in it), else a tile it
    # borders on the south or east (the point lies in the gap between neighbouring tiles' edge samples)
    for i in range(n):
        lat = lats[i]
        lon = lons[i]
        if not (np.isfinite(lat) and np.isfinite(lon)):
            continue
        for t in range(ntiles):
            south = north[t] - (rows[t] - 1) * dlat[t]
            east = west[t] + (cols[t] - 1) * dlon[t]
            if south - _EPS <= lat <= north[t] + _EPS and west[t] - _EPS <= lon <= east + _EPS:
                r = min(max(_snap((north[t] - lat) / dlat[t]), 0.0), rows[t] - 1.0)
                c = min(max(_snap((lon - west[t]) / dlon[t]), 0.0), cols[t] - 1.0)
                r0s[i] = min(int(np.floor(r)), rows[t] - 2)
                c0s[i] = min(int(np.floor(c)), cols[t] - 2)
                frs[i] = r - r0s[i]
                fcs[i] = c - c0s[i]
                ref[i] = t
                break
        if ref[i] >= 0:
            continue
        for t in range(ntiles):
            south = north[t] - (rows[t] - 1) * dlat[t]
            east = west[t] + (cols[t] - 1) * dlon[t]
            if south - dlat[t] < lat <= north[t] + _EPS and west[t] - _EPS <= lon < east + dlon[t]:
                r = max(_snap((north[t] - lat) / dlat[t]), 0.0)
                c = max(_snap((lon - west[t]) / dlon[t]), 0.0)
                r0s[i] = min(int(np.floor(r)), rows[t] - 1)
                c0s[i] = min(int(np.floor(c)), cols[t] - 1)
                frs[i] = r - r0s[i]
                fcs[i] = c - c0s[i]
                ref[i] = t
                gap[i] = True
                break
    # 2. read the four samples, tile by tile
    vals = np.empty((n, 4), dtype=np.int64)
    have = np.zeros((n, 4), dtype=np.bool_)
    for t in range(ntiles):
        g = grids[t]
        nr = rows[t]
        nc = cols[t]
        for i in range(n):
            if ref[i] != t:
                continue
            r0 = r0s[i]
            c0 = c0s[i]
            if not gap[i]:
                vals[i, 0] = g[r0, c0]
                vals[i, 1] = g[r0, c0 + 1]
                vals[i, 2] = g[r0 + 1, c0]
                vals[i, 3] = g[r0 + 1, c0 + 1]
                have[i, :] = True
                continue
            for k in range(4):
                rk = r0 + k // 2
                ck = c0 + k % 2
                if rk < nr and ck < nc:
                    vals[i, k] = g[rk, ck]
                    have[i, k] = True
                    continue
                nlat = north[t] - rk * dlat[t]
                nlon = west[t] + ck * dlon[t]
                for u in range(ntiles):
                    if u == t:
                        continue
                    ru, cu = _locate(nlat, nlon, north, west, dlat, dlon, rows, cols, u)
                    if ru >= 0:
                        vals[i, k] = grids[u][ru, cu]
                        have[i, k] = True
                        break
    # 3. weigh: renormalised bilinear over the valid samples
    for i in range(n):
        if ref[i] < 0 or not (have[i, 0] and have[i, 1] and have[i, 2] and have[i, 3]):
            continue
        fr = frs[i]
        fc = fcs[i]
        wsum = 0.0
        acc = 0.0
        nvalid = 0
        vsum = 0.0
        for k in range(4):
            v = vals[i, k]
            if v != VOID:
                w = (fr if k >= 2 else 1.0 - fr) * (fc if k % 2 == 1 else 1.0 - fc)
                wsum += w
                acc += w * v
                nvalid += 1
                vsum += v
        if nvalid == 0:
            status[i] = VOIDED
        elif wsum > 1e-12:
            status[i] = OK
            out[i] = acc / wsum
        else:
            status[i] = OK
            out[i] = vsum / nvalid
    return out, status


@dataclass(frozen=True)
class TileInfo:
    name: str
    file: str
    north: float
    south: float
    west: float
    east: float
    rows: int
    cols: int
    step_lat: float
    step_lon: float
    arc_seconds: float
    voids: int
    source: str


class ElevationModel:
    """The DEM tiles of one bundle (possibly none) and the sampler over them."""

    def __init__(self, tiles: list[TileInfo], grids: list[np.ndarray]):
        self.tiles = tiles
        self._grids = TypedList()
        for g in grids:
            self._grids.append(g)
        if not grids:  # give the typed list its item type
            self._grids.append(np.zeros((2, 2), dtype=np.int16))
            self._grids.pop()
        self._north = np.array([t.north for t in tiles], dtype=np.float64)
        self._west = np.array([t.west for t in tiles], dtype=np.float64)
        self._dlat = np.array([t.step_lat for t in tiles], dtype=np.float64)
        self._dlon = np.array([t.step_lon for t in tiles], dtype=np.float64)
        self._rows = np.array([t.rows for t in tiles], dtype=np.int64)
        self._cols = np.array([t.cols for t in tiles], dtype=np.int64)

    @classmethod
    def open(cls, stage_dir: str | Path) -> ElevationModel:
        """Load `<bundle>/elevation/index.json` and memory-map its tiles."""
        stage_dir = Path(stage_dir)
        index = json.loads((stage_dir / "index.json").read_text())
        tiles = [TileInfo(**t) for t in index["tiles"]]
        grids = []
        for t in tiles:
            # np.asarray drops the np.memmap subclass but keeps the memory mapping
            grid = np.asarray(np.load(stage_dir / t.file, mmap_mode="r"))
            if grid.dtype != np.int16 or grid.shape != (t.rows, t.cols):
                raise ValueError(f"{stage_dir / t.file} is not a {t.rows}x{t.cols} int16 array")
            grids.append(grid)
        return cls(tiles, grids)

    @classmethod
    def from_tiles(cls, dem_tiles) -> ElevationModel:
        """A model over in-memory `DemTile`s (no bundle), e.g. to sample a DEM file directly."""
        infos = [
            TileInfo(name=t.name, file="", north=t.north, south=t.south, west=t.west, east=t.east, rows=t.rows,
                     cols=t.cols, step_lat=t.step_lat, step_lon=t.step_lon, arc_seconds=t.arc_seconds,
                     voids=t.voids, source=t.source)
            for t in dem_tiles
        ]
        return cls(infos, [np.ascontiguousarray(t.data, dtype=np.int16) for t in dem_tiles])

    @property
    def empty(self) -> bool:
        return not self.tiles

    def sample(self, lats, lons) -> tuple[np.ndarray, np.ndarray]:
        """(heights float64 with NaN where there is none, status int8: 0 ok, 1 void, 2 outside)."""
        lats = np.ascontiguousarray(lats, dtype=np.float64).ravel()
        lons = np.ascontiguousarray(lons, dtype=np.float64).ravel()
        if lats.shape != lons.shape:
            raise ValueError(f"lats and lons differ in length ({lats.size} and {lons.size})")
        if self.empty or lats.size == 0:
            return np.full(lats.size, np.nan), np.full(lats.size, OUTSIDE, dtype=np.int8)
        return sample_kernel(
            lats, lons, self._grids, self._north, self._west, self._dlat, self._dlon, self._rows, self._cols
        )

    def describe(self) -> list[dict]:
        return [
            {"name": t.name, "bounds": [t.west, t.south, t.east, t.north], "arc_seconds": t.arc_seconds, "voids": t.voids}
            for t in self.tiles
        ]
