"""The Engine: one object per bundle, serving the library API, the HTTP façade and the CLI alike.

Components (router, geocoder, tiles, elevation) are opened lazily from the bundle's stage folders
the first time they are used, and raise `Unavailable` when the bundle lacks their stage.
"""

from __future__ import annotations

import threading
import time
from functools import cached_property
from pathlib import Path

from geoengine import __version__
from geoengine.bundle import Bundle
from geoengine.config import Settings
from geoengine.errors import Unavailable


class Engine:
    def __init__(self, bundle: Bundle, settings: Settings | None = None):
        self.bundle = bundle
        self.settings = settings or Settings.from_env()
        self.started = time.monotonic()
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: str | Path, settings: Settings | None = None) -> Engine:
        return cls(Bundle.open(path), settings=settings)

    # -- metadata -------------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        return self.bundle.path

    @property
    def bbox(self):
        return self.bundle.bbox

    def info(self) -> dict:
        m = self.bundle.manifest
        return {
            "bundle": str(self.bundle.path),
            "region": m.get("region"),
            "bbox": m.get("bbox"),
            "built": m.get("created"),
            "built_by": m.get("geoengine_version"),
            "geoengine_version": __version__,
            "stages": sorted(self.bundle.stages),
        }

    def uptime_seconds(self) -> float:
        return time.monotonic() - self.started

    def require_stage(self, name: str, what: str) -> Path:
        if not self.bundle.has_stage(name):
            raise Unavailable(f"{what} is not available: bundle {self.bundle.path} was built without the '{name}' stage")
        return self.bundle.path / name

    def warm(self) -> None:
        """Open every component the bundle has (used by the server at start-up)."""
        if self.bundle.has_stage("tiles") or self.settings.tiles_dir:
            self.tiles  # noqa: B018 - opening is the point

    @cached_property
    def _components(self) -> dict:
        return {}

    # -- tiles (geoengine/tiles) ------------------------------------------------------------------
    @cached_property
    def tiles(self):
        """The TileService: every .mbtiles/.pmtiles of the bundle's `tiles/` folder and of
        Settings.tiles_dir is a source (id = file stem); tile bytes are cached within
        Settings.tile_cache_bytes. See docs/tiles.md."""
        from geoengine.tiles.service import TileService
        from geoengine.tiles.sources import discover

        folders = []
        if self.bundle.has_stage("tiles"):
            folders.append(self.bundle.path / "tiles")
        if self.settings.tiles_dir:
            folders.append(self.settings.tiles_dir)
        return TileService(discover(folders), self.settings.tile_cache_bytes)

    # -- end tiles --------------------------------------------------------------------------------
