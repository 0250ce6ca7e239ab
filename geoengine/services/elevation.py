"""GET and POST /elevation: the typed request of a profile (`ElevationRequest`: a shape or an encoded
polyline, `range`) and the response schemas, and the documents from the heights the DEM gives
(geoengine/elevation/query.py): one point's (`point_document`) and a profile's (`profile_document`:
heights rounded to 0.1 m, NaN where there is none, or `range_height` pairs).

Library: `engine.elevation_request(shape=[{"lat": .., "lon": ..}, ...], range=True)`; the server's fast
dispatch validates the body with pydantic-core and frames the same document (docs/elevation.md).
"""

from __future__ import annotations

import operator
from typing import Annotated

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidatorFunctionWrapHandler, field_validator
from typing_extensions import TypedDict

from geoengine.errors import InvalidRequest
from geoengine.services.valhalla_edges import resample

_LAT = operator.itemgetter("lat")
_LON = operator.itemgetter("lon")


class ElevationPoint(BaseModel):
    lat: float = Field(description="Latitude as given")
    lon: float = Field(description="Longitude as given")
    elevation_m: float = Field(description="Height above mean sea level in metres (bilinear over the DEM, 0.1 m)")


class ShapePoint(TypedDict):
    """A point of `shape`. A TypedDict, not a model: validating 2,000 of them costs a third as much."""

    __pydantic_config__ = ConfigDict(extra="forbid", strict=True)  # type: ignore[misc]

    lat: Annotated[float, Field(ge=-90, le=90, strict=True, allow_inf_nan=False, description="Latitude in degrees")]
    lon: Annotated[float, Field(ge=-180, le=180, strict=True, allow_inf_nan=False, description="Longitude in degrees")]


class _CheckedShape(list):
    """A `shape` already checked in bulk, carrying its coordinates as arrays."""

    lats: np.ndarray
    lons: np.ndarray


_NUMBER_TYPES = {float, int}


class ElevationRequest(BaseModel):
    """Exactly one of `shape` and `encoded_polyline`, with at most 2,000 points by default
    (the deployment's GEOENGINE_ELEVATION_MAX_POINTS); more is a 400 that states the limit."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,  # JSON types as declared: "yes" or 1 is not a boolean
        json_schema_extra={
            "examples": [
                {"shape": [{"lat": 42.5063, "lon": 1.5218}, {"lat": 42.5345, "lon": 1.5803}]},
                {"encoded_polyline": "wbkapAog{{Aoav@ggqB", "range": True},
            ]
        },
    )

    shape: list[ShapePoint] | None = Field(
        default=None, description="Points to sample, in order; required when encoded_polyline is absent"
    )
    encoded_polyline: str | None = Field(
        default=None, description="The points as a precision-6 encoded polyline; required when shape is absent"
    )
    range: bool = Field(
        default=False,
        description="When true the response carries `range_height` (cumulative great-circle distance and "
        "height per point) instead of `height`",
    )

    @field_validator("shape", mode="wrap")
    @classmethod
    def _bulk_check(cls, value, handler: ValidatorFunctionWrapHandler):
        """The common case, a list of {lat, lon} numbers in range, is checked in bulk (numpy and C-level
        maps, a third of the per-point validation's time on 2,000 points). Anything else goes through
        the per-point validation, which names the offending field (`shape[3].lat`)."""
        if type(value) is list and value:
            try:
                lats, lons = list(map(_LAT, value)), list(map(_LON, value))
            except (KeyError, TypeError):
                return handler(value)
            types = set(map(type, lats))
            types.update(map(type, lons))
            if types <= _NUMBER_TYPES and sum(map(len, value)) == 2 * len(value):
                la = np.array(lats, dtype=np.float64)
                lo = np.array(lons, dtype=np.float64)
                if bool(np.all(np.abs(la) <= 90.0)) and bool(np.all(np.abs(lo) <= 180.0)):  # NaN fails too
                    checked = _CheckedShape(value)
                    checked.lats, checked.lons = la, lo
                    return checked
        return handler(value)


class HeightResponse(BaseModel):
    height: list[float | None] = Field(
        description="Height in metres (0.1 m) per point, in request order; null outside DEM coverage or where the DEM has only voids"
    )


class RangeHeightResponse(BaseModel):
    range_height: list[tuple[float, float | None]] = Field(
        description="Per point `[cumulative_distance_m, elevation_m]`: great-circle distance from the first point "
        "(0.1 m) and height (0.1 m, null where there is none). `height` is not repeated (as in Valhalla)."
    )


def resampled_profile(engine, step: float | None, **shape):
    """The elevation profile of a shape (`lats` and `lons`, or `encoded_polyline` and `precision`),
    resampled every `step` metres along it when `step` is given (Valhalla's /height `resample_distance`):
    at most GEOENGINE_ELEVATION_MAX_POINTS points after resampling, any number before."""
    max_points = engine.settings.elevation_max_points
    prof = engine.elevation_profile(**shape, max_points=None if step else max_points)
    if not step:
        return prof
    lats, lons = resample(prof.lats, prof.lons, float(step))
    if len(lats) > max_points:
        raise InvalidRequest.field("resample_distance", f"resampling gives {len(lats)} points; at most "
                                   f"{max_points} are allowed per request")
    return engine.elevation_profile(lats=lats, lons=lons, max_points=max_points)


def point_document(engine, lat: float, lon: float) -> dict:
    """GET /elevation's document: the point as given and its height (0.1 m)."""
    return {"lat": lat, "lon": lon, "elevation_m": round(engine.elevation_at(lat=lat, lon=lon), 1)}


def profile_document(engine, req: ElevationRequest) -> dict:
    """POST /elevation's document: `height` per point (0.1 m, NaN where there is none), or with `range`
    only `range_height` pairs [cumulative great-circle distance m (0.1 m), height]."""
    shape = req.shape
    if shape is not None:
        if isinstance(shape, _CheckedShape):
            lats, lons = shape.lats, shape.lons
        else:
            lats = np.fromiter(map(_LAT, shape), dtype=np.float64, count=len(shape))
            lons = np.fromiter(map(_LON, shape), dtype=np.float64, count=len(shape))
        prof = engine.elevation_profile(lats=lats, lons=lons, encoded_polyline=req.encoded_polyline)
    else:
        prof = engine.elevation_profile(encoded_polyline=req.encoded_polyline)
    heights = np.round(prof.heights, 1)
    if req.range:
        return {"range_height": np.column_stack((np.round(prof.distances, 1), heights)).tolist()}
    return {"height": heights.tolist()}
