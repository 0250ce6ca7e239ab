"""Typed request model of POST /map_match and POST /map_match/attributes (validated once at the edge;
the library's `engine.map_match(...)` / `engine.trace_attributes(...)` validate through it too)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from geoengine.routing.models import DirectionsOptions, Lat, Lon, Units, _units

MATCH_COSTINGS = ("auto", "bicycle", "pedestrian", "bus", "motorcycle")
MAX_SHAPE_POINTS = 16000


class ShapePoint(BaseModel):
    model_config = ConfigDict(extra="ignore")

    lon: Lon
    lat: Lat
    time: float | None = Field(None, ge=0, description="Seconds (offset along the trace or epoch); optional")


class TraceOptions(BaseModel):
    """Matching parameters. Unknown keys are refused (a misspelt option would otherwise do nothing)."""

    model_config = ConfigDict(extra="forbid")

    search_radius: float = Field(50.0, gt=0, le=100, description="Metres around each GPS point searched for "
                                 "candidate road positions (1-100, default 50)")
    gps_accuracy: float = Field(5.0, gt=0, le=100, description="GPS error in metres: the standard deviation of "
                                "the emission model (default 5)")
    breakage_distance: float = Field(2000.0, gt=0, le=10000, description="Two consecutive points farther apart "
                                     "than this (metres) start a new matched section (default 2000)")
    interpolation_distance: float = Field(10.0, ge=0, le=100, description="A point closer than this (metres) to "
                                          "the previous matched point is not matched on its own but interpolated "
                                          "onto the matched route (default 10; 0 matches every point)")


class MapMatchRequest(BaseModel):
    """POST /map_match and POST /map_match/attributes."""

    model_config = ConfigDict(extra="ignore")

    shape: list[ShapePoint] | None = Field(None, description="GPS trace points in order; exactly one of shape "
                                           "and encoded_polyline")
    encoded_polyline: str | None = Field(None, description="The trace as a precision-6 encoded polyline")
    shape_match: Literal["map_snap", "edge_walk", "walk_or_snap"] = Field(
        "map_snap", description="map_snap: hidden Markov model matching of a noisy trace; edge_walk: the points "
        "follow the road edges exactly (e.g. a route shape), 422 otherwise; walk_or_snap: edge_walk, falling "
        "back to map_snap")
    costing: Literal["auto", "bicycle", "pedestrian", "bus", "motorcycle"] = "auto"
    costing_options: dict[str, Any] | None = Field(None, description="Options of the costing (see "
                                                   "GET /costing/options/{costing})")
    directions_options: DirectionsOptions = Field(default_factory=DirectionsOptions)
    trace_options: TraceOptions = Field(default_factory=TraceOptions)
    units: Units | None = Field(None, description="kilometers (default) or miles; overrides directions_options.units")
    shape_format: Literal["polyline6", "polyline5", "geojson"] = Field(
        "polyline6", description="Format of the matched shape in /map_match legs")
    id: str | None = Field(None, description="Echoed in the response")

    _norm_units = field_validator("units", mode="before")(_units)

    @field_validator("costing", mode="before")
    @classmethod
    def _costing_known(cls, v):
        if isinstance(v, str) and v not in MATCH_COSTINGS:
            raise ValueError(f"costing '{v}' is not available for /map_match; use one of: {', '.join(MATCH_COSTINGS)}")
        return v

    @field_validator("shape")
    @classmethod
    def _shape_size(cls, v):
        if v is not None and not (2 <= len(v) <= MAX_SHAPE_POINTS):
            raise ValueError(f"a trace needs 2 to {MAX_SHAPE_POINTS} points, got {len(v)}")
        return v

    @property
    def effective_units(self) -> str:
        return self.units or self.directions_options.units
