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
        self.elevation([0.0], [0.0])  # elevation: map the DEM tiles, load the compiled sampler

    @cached_property
    def _components(self) -> dict:
        return {}

    # -- elevation (geoengine/elevation; docs/elevation.md) -------------------------------------------
    @cached_property
    def _elevation(self):
        """The bundle's ElevationModel, or None when it was built without a DEM."""
        if not self.bundle.has_stage("elevation"):
            return None
        from geoengine.elevation.model import ElevationModel

        return ElevationModel.open(self.bundle.path / "elevation")

    def elevation(self, lats, lons):
        """Heights in metres (float64 array shaped like `lats`) at the given points; NaN outside the
        DEM coverage and where the DEM has only voids around a point."""
        from geoengine.elevation import query

        return query.heights(self._elevation, lats, lons)

    def elevation_at(self, lat: float, lon: float) -> float:
        """Height in metres at one point; InvalidRequest for impossible coordinates, OutsideCoverage
        when the bundle's DEM has no height there."""
        from geoengine.elevation import query

        return query.height_at(self._elevation, lat, lon, bundle_name=str(self.bundle.path))

    def elevation_profile(self, lats=None, lons=None, *, encoded_polyline=None, precision: int = 6, max_points=None):
        """Heights and cumulative great-circle distances along a shape given as coordinates or as an
        encoded polyline (exactly one). `max_points` defaults to Settings.elevation_max_points."""
        from geoengine.elevation import query

        return query.profile(
            self._elevation,
            lats=lats,
            lons=lons,
            encoded_polyline=encoded_polyline,
            precision=precision,
            max_points=self.settings.elevation_max_points if max_points is None else max_points,
            bundle_name=str(self.bundle.path),
        )

    # -- end of elevation ------------------------------------------------------------------------------
