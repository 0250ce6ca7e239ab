"""Elevation queries over an `ElevationModel`: one point, many points, a polyline profile.

These functions validate their input (raising `InvalidRequest` with field paths) and express "no
height here" as `OutsideCoverage` where a single answer is expected; the Engine methods call them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from geoengine.elevation.model import OK, OUTSIDE, VOIDED, ElevationModel
from geoengine.errors import FieldError, InvalidRequest, OutsideCoverage
from geoengine.geo import check_coordinates, cumulative_distance_m, decode_polyline


@dataclass(frozen=True)
class ElevationProfile:
    """Heights (metres, NaN where there is none) of the points of a polyline, with the cumulative
    great-circle distance (metres) of each point from the first."""

    lats: np.ndarray
    lons: np.ndarray
    heights: np.ndarray
    status: np.ndarray  # int8 per point: 0 ok, 1 void, 2 outside coverage

    @cached_property
    def distances(self) -> np.ndarray:
        """Cumulative great-circle distance in metres from the first point (computed on first use)."""
        return cumulative_distance_m(self.lats, self.lons)

    def __len__(self) -> int:
        return int(self.heights.size)

    @property
    def covered(self) -> int:
        return int(np.count_nonzero(self.status == OK))


def _no_dem_error(model: ElevationModel | None, bundle_name: str) -> OutsideCoverage:
    if model is None:
        why = "was built without a DEM (give SRTM .hgt or GeoTIFF files to `geoengine build --dem`)"
    else:
        why = "was built with DEM files none of which meets the extract (see its manifest: elevation.info.skipped)"
    return OutsideCoverage(f"no elevation data: bundle {bundle_name} {why}, so every point is outside elevation coverage")


def heights(model: ElevationModel | None, lats, lons) -> np.ndarray:
    """float64 heights in metres, NaN outside coverage or where all four samples are voids."""
    lats = np.asarray(lats, dtype=np.float64)
    lons = np.asarray(lons, dtype=np.float64)
    if lats.shape != lons.shape:
        raise InvalidRequest(f"lats and lons differ in shape ({lats.shape} and {lons.shape})")
    if model is None:
        return np.full(lats.shape, np.nan)
    h, _status = model.sample(lats, lons)
    return h.reshape(lats.shape)


def height_at(model: ElevationModel | None, lat: float, lon: float, *, bundle_name: str = "") -> float:
    """Height in metres at one point. InvalidRequest for impossible coordinates, OutsideCoverage when
    the DEM does not cover the point or has only voids around it."""
    errors = []
    if not (isinstance(lat, int | float) and -90.0 <= lat <= 90.0):
        errors.append(FieldError("lat", f"latitude must be a number in [-90, 90], got {lat!r}"))
    if not (isinstance(lon, int | float) and -180.0 <= lon <= 180.0):
        errors.append(FieldError("lon", f"longitude must be a number in [-180, 180], got {lon!r}"))
    if errors:
        raise InvalidRequest(errors=errors)
    if model is None or model.empty:
        raise _no_dem_error(model, bundle_name)
    h, status = model.sample(np.array([lat], dtype=np.float64), np.array([lon], dtype=np.float64))
    if status[0] == OUTSIDE:
        raise OutsideCoverage(
            f"point ({lat}, {lon}) is outside the elevation coverage of this bundle ({_coverage_text(model)})"
        )
    if status[0] == VOIDED:
        raise OutsideCoverage(f"the DEM has no data (voids only) around point ({lat}, {lon})")
    return float(h[0])


def _coverage_text(model: ElevationModel) -> str:
    parts = []
    for t in model.tiles[:6]:
        parts.append(f"{t.name}: lat {t.south:g}..{t.north:g}, lon {t.west:g}..{t.east:g}")
    if len(model.tiles) > 6:
        parts.append(f"and {len(model.tiles) - 6} more tiles")
    return "; ".join(parts)


def profile(
    model: ElevationModel | None,
    *,
    lats=None,
    lons=None,
    encoded_polyline: str | None = None,
    precision: int = 6,
    max_points: int | None = None,
    bundle_name: str = "",
) -> ElevationProfile:
    """Heights along a shape given either as coordinates (`lats`, `lons`) or as an encoded polyline.

    Exactly one of the two is required. `max_points` (when set) bounds the number of points. Points
    outside coverage get NaN; a bundle without any DEM raises OutsideCoverage.
    """
    has_shape = lats is not None or lons is not None
    has_poly = encoded_polyline is not None
    if has_shape == has_poly:
        msg = "give exactly one of shape and encoded_polyline" + (", not both" if has_shape else "")
        raise InvalidRequest(errors=[FieldError("shape", msg), FieldError("encoded_polyline", msg)])
    if has_poly:
        field = "encoded_polyline"
        if not isinstance(encoded_polyline, str | bytes):
            raise InvalidRequest.field(field, "must be a string")
        if max_points is not None and len(encoded_polyline) > max_points * 26:
            # a point takes at most 26 characters at precision 6: refuse before decoding
            raise InvalidRequest.field(field, f"too many points: at most {max_points} points are allowed per request")
        plats, plons = decode_polyline(encoded_polyline, precision, field=field)
    else:
        field = "shape"
        plats = np.ascontiguousarray(lats if lats is not None else [], dtype=np.float64).ravel()
        plons = np.ascontiguousarray(lons if lons is not None else [], dtype=np.float64).ravel()
        if plats.size != plons.size:
            raise InvalidRequest.field(field, f"lats and lons differ in length ({plats.size} and {plons.size})")
    n = plats.size
    if n == 0:
        raise InvalidRequest.field(field, "at least one point is required")
    if max_points is not None and n > max_points:
        raise InvalidRequest.field(field, f"too many points: {n} given, at most {max_points} points are allowed per request")
    check_coordinates(plats, plons, field=field if field == "shape" else "encoded_polyline.points")
    if model is None or model.empty:
        raise _no_dem_error(model, bundle_name)
    h, status = model.sample(plats, plons)
    return ElevationProfile(lats=plats, lons=plons, heights=h, status=status)
