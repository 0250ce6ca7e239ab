"""DEM readers: SRTM/skadi `.hgt` (plain, `.hgt.gz`, `.hgt.zip`) and single-band GeoTIFF.

Every reader returns `DemTile`s on one convention: `data[r, c]` is the height in metres (int16,
`VOID` = no data) of the sample at latitude `north - r * step_lat` and longitude
`west + c * step_lon` (samples are points; row 0 is the northern edge).

HGT: a square grid of big-endian int16, 1201 x 1201 (3 arc-seconds) or 3601 x 3601 (1 arc-second),
detected from the byte size; the file name (`N42E001`) gives the south-west corner; the outer rows and
columns lie exactly on the integer degrees and repeat the neighbouring tiles' edges.

GeoTIFF: geographic (lat/lon) rasters with ModelPixelScale and ModelTiepoint tags. With
RasterPixelIsArea (the default) the tie point is the outer corner of the first pixel and samples sit
at pixel centres; with RasterPixelIsPoint it is the first sample. Float rasters are rounded to whole
metres; their NaN and GDAL_NODATA values become `VOID`.
"""

from __future__ import annotations

import gzip
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from geoengine.errors import BuildError

VOID = -32768
_HGT_NAME = re.compile(r"([NS])(\d{1,2})([EW])(\d{1,3})", re.IGNORECASE)
_HGT_SIZES = {1201 * 1201 * 2: (1201, 3), 3601 * 3601 * 2: (3601, 1)}


@dataclass
class DemTile:
    name: str
    data: np.ndarray  # int16, C-contiguous, native byte order
    north: float  # latitude of row 0
    west: float  # longitude of column 0
    step_lat: float  # degrees between rows (> 0)
    step_lon: float  # degrees between columns (> 0)
    source: str  # file the tile was read from

    @property
    def rows(self) -> int:
        return int(self.data.shape[0])

    @property
    def cols(self) -> int:
        return int(self.data.shape[1])

    @property
    def south(self) -> float:
        return self.north - (self.rows - 1) * self.step_lat

    @property
    def east(self) -> float:
        return self.west + (self.cols - 1) * self.step_lon

    @property
    def arc_seconds(self) -> float:
        return round(self.step_lat * 3600.0, 6)

    @property
    def voids(self) -> int:
        return int(np.count_nonzero(self.data == VOID))

    def intersects(self, bbox: tuple[float, float, float, float]) -> bool:
        min_lon, min_lat, max_lon, max_lat = bbox
        return not (self.east < min_lon or self.west > max_lon or self.south > max_lat or self.north < min_lat)

    def crop(self, bbox: tuple[float, float, float, float]) -> DemTile:
        """The part of the tile covering `bbox` (min_lon, min_lat, max_lon, max_lat), widened to whole
        samples so that every point of `bbox` inside the tile keeps its four surrounding samples."""
        min_lon, min_lat, max_lon, max_lat = bbox
        r0 = max(0, int(np.floor((self.north - max_lat) / self.step_lat)))
        r1 = min(self.rows - 1, int(np.ceil((self.north - min_lat) / self.step_lat)))
        c0 = max(0, int(np.floor((min_lon - self.west) / self.step_lon)))
        c1 = min(self.cols - 1, int(np.ceil((max_lon - self.west) / self.step_lon)))
        if r0 == 0 and c0 == 0 and r1 == self.rows - 1 and c1 == self.cols - 1:
            return self
        return DemTile(
            name=self.name,
            data=np.ascontiguousarray(self.data[r0 : r1 + 1, c0 : c1 + 1]),
            north=self.north - r0 * self.step_lat,
            west=self.west + c0 * self.step_lon,
            step_lat=self.step_lat,
            step_lon=self.step_lon,
            source=self.source,
        )


def read_dem(path: str | Path) -> DemTile:
    """Read one DEM file (by its suffix: .hgt, .hgt.gz, .hgt.zip, .tif, .tiff). Raises BuildError."""
    path = Path(path)
    lower = path.name.lower()
    if lower.endswith((".hgt", ".hgt.gz", ".hgt.zip")):
        return read_hgt(path)
    if lower.endswith((".tif", ".tiff")):
        return read_geotiff(path)
    raise BuildError(f"DEM file {path} is neither SRTM .hgt(.gz/.zip) nor GeoTIFF (.tif/.tiff)")


# -- HGT ---------------------------------------------------------------------------------------------


def _hgt_origin(name: str, source: Path) -> tuple[str, int, int]:
    m = _HGT_NAME.search(name)
    if not m:
        raise BuildError(f"cannot tell the corner of HGT tile {source}: its name must look like N42E001.hgt")
    lat = int(m.group(2)) * (1 if m.group(1).upper() == "N" else -1)
    lon = int(m.group(4)) * (1 if m.group(3).upper() == "E" else -1)
    if not (-90 <= lat < 90 and -180 <= lon < 180):
        raise BuildError(f"HGT tile {source} names an impossible corner {m.group(0)}")
    tile = f"{'N' if lat >= 0 else 'S'}{abs(lat):02d}{'E' if lon >= 0 else 'W'}{abs(lon):03d}"
    return tile, lat, lon


def _hgt_bytes(path: Path) -> tuple[bytes, str]:
    lower = path.name.lower()
    try:
        if lower.endswith(".zip"):
            with zipfile.ZipFile(path) as zf:
                members = [n for n in zf.namelist() if n.lower().endswith(".hgt")]
                if len(members) != 1:
                    raise BuildError(f"{path} should hold exactly one .hgt file, it holds {len(members)}")
                return zf.read(members[0]), Path(members[0]).name
        if lower.endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                return fh.read(), path.name[:-3]
        return path.read_bytes(), path.name
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        raise BuildError(f"cannot read DEM file {path}: {exc}") from exc


def read_hgt(path: str | Path) -> DemTile:
    path = Path(path)
    raw, inner = _hgt_bytes(path)
    size = _HGT_SIZES.get(len(raw))
    if size is None:
        raise BuildError(
            f"HGT tile {path} has {len(raw):,} bytes; expected {1201 * 1201 * 2:,} (3 arc-seconds, 1201 x 1201) "
            f"or {3601 * 3601 * 2:,} (1 arc-second, 3601 x 3601)"
        )
    n, _arcsec = size
    name, lat, lon = _hgt_origin(inner, path)
    data = np.frombuffer(raw, dtype=">i2").reshape(n, n).astype(np.int16)
    step = 1.0 / (n - 1)
    return DemTile(name=name, data=data, north=float(lat + 1), west=float(lon), step_lat=step, step_lon=step, source=path.name)


# -- GeoTIFF -----------------------------------------------------------------------------------------

_GEOKEY_MODEL_TYPE = 1024  # 1 projected, 2 geographic
_GEOKEY_RASTER_TYPE = 1025  # 1 PixelIsArea, 2 PixelIsPoint


def _geokeys(tag_value) -> dict[int, int]:
    if tag_value is None:
        return {}
    vals = [int(v) for v in tag_value]
    keys = {}
    count = vals[3] if len(vals) >= 4 else 0
    for k in range(count):
        key, loc, _n, off = vals[4 + 4 * k : 8 + 4 * k]
        if loc == 0:
            keys[key] = off
    return keys


def read_geotiff(path: str | Path) -> DemTile:
    import tifffile

    path = Path(path)
    try:
        with tifffile.TiffFile(path) as tif:
            page = tif.pages[0]
            tags = {t.code: t.value for t in page.tags.values()}
            data = page.asarray()
    except Exception as exc:  # tifffile raises many kinds
        raise BuildError(f"cannot read GeoTIFF {path}: {exc}") from exc
    scale, tie = tags.get(33550), tags.get(33922)
    if scale is None or tie is None:
        raise BuildError(f"GeoTIFF {path} has no ModelPixelScale/ModelTiepoint tags: cannot place it on the map")
    if data.ndim == 3 and 1 in (data.shape[0], data.shape[-1]):
        data = data.reshape(data.shape[1:] if data.shape[0] == 1 else data.shape[:2])
    if data.ndim != 2:
        raise BuildError(f"GeoTIFF {path} has {data.ndim} dimensions (shape {data.shape}); only single-band DEMs are read")
    geokeys = _geokeys(tags.get(34735))
    if geokeys.get(_GEOKEY_MODEL_TYPE, 2) != 2:
        raise BuildError(f"GeoTIFF {path} is in a projected coordinate system; reproject it to lat/lon (EPSG:4326) first")
    sx, sy = float(scale[0]), float(scale[1])
    ti, tj, _tk, tx, ty = (float(v) for v in tie[:5])
    if sx <= 0 or sy <= 0:
        raise BuildError(f"GeoTIFF {path} has a non-positive pixel scale {sx}, {sy}")
    west = tx - ti * sx
    north = ty + tj * sy
    if geokeys.get(_GEOKEY_RASTER_TYPE, 1) == 1:  # PixelIsArea: samples at pixel centres
        west += sx / 2
        north -= sy / 2
    if data.dtype.kind == "f":
        nodata = tags.get(42113)
        bad = ~np.isfinite(data)
        if nodata not in (None, ""):
            try:
                bad |= data == float(str(nodata).strip("\x00 "))
            except ValueError:
                pass
        heights = np.clip(np.round(np.where(bad, 0, data)), -32767, 32767).astype(np.int16)
        heights[bad] = VOID
    elif data.dtype.kind in "iu":
        heights = data.astype(np.int64)
        nodata = tags.get(42113)
        bad = np.zeros(data.shape, dtype=bool)
        if nodata not in (None, ""):
            try:
                bad = heights == int(float(str(nodata).strip("\x00 ")))
            except ValueError:
                pass
        heights = np.clip(heights, -32767, 32767).astype(np.int16)
        heights[bad] = VOID
        if data.dtype == np.int16:  # keep int16 rasters bit for bit (their -32768 is already VOID)
            heights = np.where(bad, VOID, data).astype(np.int16)
    else:
        raise BuildError(f"GeoTIFF {path} holds {data.dtype} samples; expected integer or float heights")
    return DemTile(
        name=path.name.split(".")[0],
        data=np.ascontiguousarray(heights),
        north=north,
        west=west,
        step_lat=sy,
        step_lon=sx,
        source=path.name,
    )
