"""Elevation: DEM readers (SRTM HGT, GeoTIFF), the `elevation` build stage, and vectorised bilinear
sampling over the memory-mapped tiles of a bundle. See docs/elevation.md."""

from geoengine.elevation.dem import VOID, DemTile, read_dem
from geoengine.elevation.model import ElevationModel
from geoengine.elevation.query import ElevationProfile

__all__ = ["VOID", "DemTile", "ElevationModel", "ElevationProfile", "read_dem"]
