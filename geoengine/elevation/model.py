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

Storage: every tile's samples, row-major, back to back in one int16 array (`samples.npy`, memory-
mapped); tile t starts at `offset[t]`. One flat array rather than a Numba typed list of per-tile
arrays: building such a list costs 0.6 to 1.2 s of compilation in every new process.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np

from geoengine.elevation.dem import VOID

INDEX_FORMAT = 1
SAMPLES_FILE = "samples.npy"

OK, VOIDED, OUTSIDE = 0, 1, 2
_EPS = 1e-9  # degrees; absorbs rounding of coordinates on tile edges


@numba.njit(cache=True, nogil=True, inline="always")
def _snap(x):
    """A grid coordinate within 1e-7 of a whole sample (1e-5 m at 3 arc-seconds) is that sample, so
    a point given on a grid node picks the same cell however its degrees were rounded."""
    k = np.floor(x + 0.5)
    return k if abs(x - k) < 1e-7 else x


@numba.njit(cache=True, nogil=True)
def _node_value(lat, lon, samples, offset, north, west, dlat, dlon, rows, cols, skip):
    """Sample nearest to grid node (lat, lon) in the first tile (other than `skip`) holding it, and
    whether one was found."""
    for u in range(north.size):
        if u == skip:
            continue
        r = (north[u] - lat) / dlat[u]
        c = (lon - west[u]) / dlon[u]
        if r < -0.5 or c < -0.5 or r > rows[u] - 0.5 or c > cols[u] - 0.5:
            continue
        ri = min(max(int(np.floor(r + 0.5)), 0), rows[u] - 1)
        ci = min(max(int(np.floor(c + 0.5)), 0), cols[u] - 1)
        return np.int64(samples[offset[u] + ri * cols[u] + ci]), True
    return np.int64(0), False


@numba.njit(cache=True, nogil=True)
def sample_kernel(lats, lons, samples, offset, north, west, dlat, dlon, rows, cols):
    """Bilinear heights (float64) and a status per point (0 ok, 1 all samples void, 2 outside)."""
    n = lats.size
    ntiles = north.size
    out = np.full(n, np.nan)
    status = np.full(n, OUTSIDE, dtype=np.int8)
    vals = np.empty(4, dtype=np.int64)
    for i in range(n):
        lat = lats[i]
        lon = lons[i]
        if not (np.isfinite(lat) and np.isfinite(lon)):
            continue
        # 1. a tile whose sample grid contains the point: its four samples are all in that tile
        ref = -1
        for t in range(ntiles):
            south = north[t] - (rows[t] - 1) * dlat[t]
            east = west[t] + (cols[t] - 1) * dlon[t]
            if south - _EPS <= lat <= north[t] + _EPS and west[t] - _EPS <= lon <= east + _EPS:
                ref = t
                break
        if ref >= 0:
            t = ref
            r = min(max(_snap((north[t] - lat) / dlat[t]), 0.0), rows[t] - 1.0)
            c = min(max(_snap((lon - west[t]) / dlon[t]), 0.0), cols[t] - 1.0)
            r0 = min(int(np.floor(r)), rows[t] - 2)
            c0 = min(int(np.floor(c)), cols[t] - 2)
            fr = r - r0
            fc = c - c0
            k = offset[t] + r0 * cols[t] + c0
            vals[0] = samples[k]
            vals[1] = samples[k + 1]
            vals[2] = samples[k + cols[t]]
            vals[3] = samples[k + cols[t] + 1]
        else:
            # 2. the point lies in the gap between the edge samples of neighbouring tiles (tiles that
            # do not repeat their edges): take the grid of a tile it borders on the south or east and
            # find each of the four samples in whichever tile holds it
            for t in range(ntiles):
                south = north[t] - (rows[t] - 1) * dlat[t]
                east = west[t] + (cols[t] - 1) * dlon[t]
                if south - dlat[t] < lat <= north[t] + _EPS and west[t] - _EPS <= lon < east + dlon[t]:
                    ref = t
                    break
            if ref < 0:
                continue
            t = ref
            r = max(_snap((north[t] - lat) / dlat[t]), 0.0)
            c = max(_snap((lon - west[t]) / dlon[t]), 0.0)
            r0 = min(int(np.floor(r)), rows[t] - 1)
            c0 = min(int(np.floor(c)), cols[t] - 1)
            # A point exactly on the tile's last row or column (e.g. on the east edge of the coverage,
            # in the gap between two tiles stacked north-south) takes the cell inside the tile with
            # weight 1 on that row/column, as step 1 does: the neighbour beyond it has weight 0 and
            # may not exist at all.
            if r0 == rows[t] - 1 and r == r0 and r0 > 0:
                r0 -= 1
            if c0 == cols[t] - 1 and c == c0 and c0 > 0:
                c0 -= 1
            fr = r - r0
            fc = c - c0
            found = 0
            for q in range(4):
                rq = r0 + q // 2
                cq = c0 + q % 2
                if rq < rows[t] and cq < cols[t]:
                    vals[q] = samples[offset[t] + rq * cols[t] + cq]
                    found += 1
                else:
                    v, ok = _node_value(north[t] - rq * dlat[t], west[t] + cq * dlon[t], samples, offset,
                                        north, west, dlat, dlon, rows, cols, t)
                    if ok:
                        vals[q] = v
                        found += 1
            if found < 4:
                continue
        # 3. renormalised bilinear over the valid samples
        wsum = 0.0
        acc = 0.0
        nvalid = 0
        vsum = 0.0
        for q in range(4):
            v = vals[q]
            if v != VOID:
                w = (fr if q >= 2 else 1.0 - fr) * (fc if q % 2 == 1 else 1.0 - fc)
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
    offset: int  # index of the tile's first sample in samples.npy
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

    def __init__(self, tiles: list[TileInfo], samples: np.ndarray):
        self.tiles = tiles
        self._samples = samples
        self._offset = np.array([t.offset for t in tiles], dtype=np.int64)
        self._north = np.array([t.north for t in tiles], dtype=np.float64)
        self._west = np.array([t.west for t in tiles], dtype=np.float64)
        self._dlat = np.array([t.step_lat for t in tiles], dtype=np.float64)
        self._dlon = np.array([t.step_lon for t in tiles], dtype=np.float64)
        self._rows = np.array([t.rows for t in tiles], dtype=np.int64)
        self._cols = np.array([t.cols for t in tiles], dtype=np.int64)
        need = int((self._offset + self._rows * self._cols).max()) if tiles else 0
        if samples.dtype != np.int16 or samples.ndim != 1 or samples.size < need:
            raise ValueError(f"the sample array ({samples.dtype}, {samples.shape}) does not hold the {need:,} int16 samples of the tiles")

    @classmethod
    def open(cls, stage_dir: str | Path) -> ElevationModel:
        """Load `<bundle>/elevation/index.json` and memory-map `samples.npy`."""
        stage_dir = Path(stage_dir)
        index = json.loads((stage_dir / "index.json").read_text())
        tiles = [TileInfo(**t) for t in index["tiles"]]
        # np.asarray drops the np.memmap subclass (one kernel type for both) but keeps the mapping
        samples = np.asarray(np.load(stage_dir / SAMPLES_FILE, mmap_mode="r"))
        return cls(tiles, samples)

    @classmethod
    def from_tiles(cls, dem_tiles) -> ElevationModel:
        """A model over in-memory `DemTile`s (no bundle), e.g. to sample DEM files directly."""
        infos, offset = [], 0
        for t in dem_tiles:
            infos.append(TileInfo(name=t.name, offset=offset, north=t.north, south=t.south, west=t.west, east=t.east,
                                  rows=t.rows, cols=t.cols, step_lat=t.step_lat, step_lon=t.step_lon,
                                  arc_seconds=t.arc_seconds, voids=t.voids, source=t.source))
            offset += t.rows * t.cols
        return cls(infos, pack_samples(dem_tiles))

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
        return sample_kernel(lats, lons, self._samples, self._offset, self._north, self._west, self._dlat,
                             self._dlon, self._rows, self._cols)


def pack_samples(dem_tiles) -> np.ndarray:
    """The tiles' samples, row-major, back to back, as one native-order int16 array."""
    if not dem_tiles:
        return np.zeros(0, dtype=np.int16)
    return np.concatenate([np.ascontiguousarray(t.data, dtype=np.int16).ravel() for t in dem_tiles])
