"""Elevation: DEM readers (SRTM HGT, GeoTIFF), the `elevation` build stage, and vectorised bilinear
sampling over the memory-mapped tiles of a bundle. See docs/elevation.md.

The names below are imported on first use, so that `geoengine.elevation.grades` (which opening a road
graph needs) does not import the DEM readers and the sampling kernels with it."""

from __future__ import annotations

__all__ = ["VOID", "DemTile", "ElevationModel", "ElevationProfile", "read_dem"]

_HOME = {"VOID": "dem", "DemTile": "dem", "read_dem": "dem", "ElevationModel": "model",
         "ElevationProfile": "query"}


def __getattr__(name):
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'geoengine.elevation' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"geoengine.elevation.{module}"), name)
    globals()[name] = value
    return value
