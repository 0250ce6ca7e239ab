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
        if self.bundle.has_stage("search"):
            self.search_index.warm()

    @cached_property
    def _components(self) -> dict:
        return {}

    # -- search (geoengine.search) ------------------------------------------------------------------
    @cached_property
    def search_index(self):
        """The bundle's search index (memory-mapped); UpstreamError when its files cannot be read."""
        from geoengine.search.index import SearchIndex

        return SearchIndex(self.require_stage("search", "search"))

    def search(self, q: str, types=None, lat: float | None = None, lon: float | None = None, size: int = 10) -> dict:
        """Autocomplete search: {query, total, took_ms, results: [Search Result dict]}; see docs/search.md."""
        return self.search_index.search(q, types=types, lat=lat, lon=lon, size=size)

    def reverse(self, lat: float, lon: float, radius="2km", size: int = 5, types=None) -> dict:
        """Nearest documents to a point, nearest first, each with distance_m: {lat, lon, took_ms, results}."""
        return self.search_index.reverse(lat, lon, radius=radius, size=size, types=types)

    def place(self, doc_id: str) -> dict:
        """One document by id or canonical id (NotFound when missing); `score` is null."""
        return self.search_index.place(doc_id)

    # -- end search ---------------------------------------------------------------------------------
