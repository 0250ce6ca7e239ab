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

    @cached_property
    def _components(self) -> dict:
        return {}

    # -- road graph, costing, snapping (graph helper; the router builds on these) -------------------
    @cached_property
    def graph(self):
        """The bundle's road graph (`geoengine.graph.Graph`, memory-mapped); Unavailable without it."""
        from geoengine.graph import Graph

        return Graph.open(self.require_stage("graph", "routing"))

    @cached_property
    def snapper(self):
        """Spatial index over the graph's edges (`geoengine.routing.snap.Snapper`), built on first use."""
        from geoengine.routing.snap import Snapper

        with self._lock:
            return Snapper(self.graph)

    def costings(self) -> list[str]:
        """Names of the costings (travel modes) the engine offers."""
        from geoengine.costing import COSTINGS

        return list(COSTINGS)

    def costing_options(self, costing: str) -> dict:
        """Option schema of one costing (body of GET /costing/options/{costing})."""
        from geoengine.costing import costing_options_schema

        return costing_options_schema(costing)
    # -- end of road graph block --------------------------------------------------------------------
