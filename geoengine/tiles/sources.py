"""Tile sources: one small protocol that every tile archive answers.

A source has an `id` (the file stem), descriptive metadata (`name`, `format`, `minzoom`, `maxzoom`,
`bounds`, `center`, `attribution`, `vector_layers`) and `get(z, x, y) -> bytes | None` returning the
stored bytes (gzip-compressed or not, as stored). MBTiles (SQLite) and PMTiles (through the `pmtiles`
package's reader) archives are supported; `discover()` finds them in folders.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from geoengine.tiles.mbtiles import MBTilesReader

log = logging.getLogger(__name__)

SUFFIXES = (".mbtiles", ".pmtiles")


@runtime_checkable
class TileSource(Protocol):
    id: str
    info: SourceInfo

    def get(self, z: int, x: int, y: int) -> bytes | None: ...


@dataclass(frozen=True)
class SourceInfo:
    name: str
    format: str = "pbf"
    minzoom: int = 0
    maxzoom: int = 14
    bounds: tuple[float, float, float, float] = (-180.0, -85.0511287798, 180.0, 85.0511287798)
    center: tuple[float, float, int] = (0.0, 0.0, 0)
    attribution: str = ""
    description: str = ""
    vector_layers: list = field(default_factory=list)
    path: str = ""


def _floats(raw, n: int) -> tuple | None:
    if raw is None:
        return None
    try:
        vals = [float(v) for v in str(raw).split(",")]
    except ValueError:
        return None
    return tuple(vals) if len(vals) == n else None


class MBTilesSource:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.id = self.path.stem
        self.reader = MBTilesReader(self.path)
        md = self.reader.metadata
        minzoom, maxzoom = int(md["minzoom"]), int(md["maxzoom"])
        bounds = _floats(md.get("bounds"), 4) or SourceInfo.bounds
        center = _floats(md.get("center"), 3)
        if center is None:
            center = ((bounds[0] + bounds[2]) / 2, (bounds[1] + bounds[3]) / 2, float(min(maxzoom, max(minzoom, 10))))
        self.info = SourceInfo(
            name=md.get("name") or self.id,
            format=md.get("format") or "pbf",
            minzoom=minzoom,
            maxzoom=maxzoom,
            bounds=bounds,
            center=(center[0], center[1], int(center[2])),
            attribution=md.get("attribution") or "",
            description=md.get("description") or "",
            vector_layers=self.reader.vector_layers(),
            path=str(self.path),
        )
        self.get = self.reader.get


_PM_FORMAT = {1: "pbf", 2: "png", 3: "jpg", 4: "webp", 5: "avif", 6: "mlt"}


class PMTilesSource:
    def __init__(self, path: Path):
        from pmtiles.reader import MmapSource, Reader

        self.path = Path(path)
        self.id = self.path.stem
        self._file = open(self.path, "rb")  # noqa: SIM115 - held for the source's lifetime
        self.reader = Reader(MmapSource(self._file))
        h = self.reader.header()
        if h["tile_compression"].value not in (0, 1, 2):  # unknown, none, gzip
            self._file.close()
            raise ValueError(f"tile compression {h['tile_compression'].name} is not supported (only gzip or none)")
        try:
            md = self.reader.metadata()
        except (ValueError, json.JSONDecodeError):
            md = {}
        bounds = (h["min_lon_e7"] / 1e7, h["min_lat_e7"] / 1e7, h["max_lon_e7"] / 1e7, h["max_lat_e7"] / 1e7)
        self.info = SourceInfo(
            name=md.get("name") or self.id,
            format=_PM_FORMAT.get(h["tile_type"].value, "pbf"),
            minzoom=int(h["min_zoom"]),
            maxzoom=int(h["max_zoom"]),
            bounds=bounds,
            center=(h["center_lon_e7"] / 1e7, h["center_lat_e7"] / 1e7, int(h["center_zoom"])),
            attribution=md.get("attribution") or "",
            description=md.get("description") or "",
            vector_layers=_pm_vector_layers(md),
            path=str(self.path),
        )

    def get(self, z: int, x: int, y: int) -> bytes | None:
        data = self.reader.get(z, x, y)
        return None if data is None else bytes(data)


def _pm_vector_layers(md: dict) -> list:
    layers = md.get("vector_layers")
    if layers is None and isinstance(md.get("json"), str):  # converted from MBTiles metadata
        try:
            layers = json.loads(md["json"]).get("vector_layers")
        except (ValueError, AttributeError):
            layers = None
    return list(layers or [])


def open_source(path: Path) -> TileSource:
    path = Path(path)
    if path.suffix == ".mbtiles":
        return MBTilesSource(path)
    if path.suffix == ".pmtiles":
        return PMTilesSource(path)
    raise ValueError(f"{path} is not a .mbtiles or .pmtiles archive")


def discover(folders) -> dict[str, TileSource]:
    """Every archive in the folders (in order) by id; the first of two archives with one id wins."""
    out: dict[str, TileSource] = {}
    for folder in folders:
        if folder is None:
            continue
        folder = Path(folder).expanduser()
        if not folder.is_dir():
            log.warning("tile folder %s does not exist; no sources from it", folder)
            continue
        for path in sorted(folder.iterdir()):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            if path.stem in out:
                log.warning("tile source %s: %s is shadowed by %s", path.stem, path, out[path.stem].info.path)
                continue
            try:
                out[path.stem] = open_source(path)
            except Exception as exc:  # a broken archive must not take the others down
                log.warning("tile archive %s cannot be opened: %s", path, exc)
    return out
