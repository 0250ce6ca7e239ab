"""Typed request and response models of the routing endpoints, validated once at the edge.

The same models serve the library (`engine.route(**fields)` validates through them) and the façade
(FastAPI reads them for validation and for the OpenAPI document). Bounds are the spec's.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

COSTINGS = ("auto", "auto_shorter", "bicycle", "bus", "pedestrian", "truck", "motorcycle", "motor_scooter", "taxi")
Costing = Literal["auto", "auto_shorter", "bicycle", "bus", "pedestrian", "truck", "motorcycle", "motor_scooter", "taxi"]
MatrixCosting = Literal["auto", "bicycle", "pedestrian", "truck", "motorcycle"]
Units = Literal["kilometers", "miles"]

Lon = Annotated[float, Field(ge=-180, le=180, allow_inf_nan=False, description="Longitude, WGS84 degrees")]
Lat = Annotated[float, Field(ge=-90, le=90, allow_inf_nan=False, description="Latitude, WGS84 degrees")]
MAX_WAITING_SECS = 7 * 86_400  # = geoengine.routing.extras.MAX_WAITING_SECS: keeps date_time arithmetic in range


def _units(v):
    aliases = {"km": "kilometers", "kilometres": "kilometers", "mi": "miles"}
    return aliases.get(v, v) if isinstance(v, str) else v


class Location(BaseModel):
    """A routing location (the spec's Routing Location object)."""

    model_config = ConfigDict(extra="ignore")

    lon: Lon
    lat: Lat
    type: Literal["break", "through", "via", "break_through"] = Field(
        "break", description="break: a stop that ends a leg; through: pass without stopping or U-turn; via: pass, "
        "U-turn allowed; break_through: a stop that ends a leg without a U-turn")
    heading: float | None = Field(None, ge=0, le=360, description="Preferred heading of travel at the location, degrees")
    heading_tolerance: float | None = Field(None, ge=0, le=180, description="Allowed deviation from heading, degrees (default 60)")
    name: str | None = Field(None, description="Human-readable location name, echoed in the response")
    street: str | None = Field(None, description="Street name hint: candidates on a street of that name rank first")
    city: str | None = Field(None, description="City hint, echoed in the response")
    waiting_secs: int | None = Field(None, ge=0, le=MAX_WAITING_SECS,
                                     description="Waiting time at the location, added to the time (at most 7 days)")
    search_radius: int | None = Field(None, ge=1, le=100, description="Candidate search radius in metres")
    rank_candidates: bool | None = Field(None, description="Rank candidates by distance and hints (default true)")
    preferred_side: Literal["same", "opposite", "either"] | None = Field(
        None, description="Side of the road to reach the location on (right-hand traffic)")


class DirectionsOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    units: Units = "kilometers"
    language: str = Field("en-US", description="Instruction language tag")
    directions_type: Literal["none", "maneuvers", "instructions"] = "instructions"
    banner_instructions: bool = False
    voice_instructions: bool = False

    _norm_units = field_validator("units", mode="before")(_units)


class AvoidLocation(BaseModel):
    lon: Lon
    lat: Lat
    radius: float = Field(0, ge=0, le=200, description="Radius in metres around the point whose roads are avoided")


class RouteRequest(BaseModel):
    """POST /route."""

    model_config = ConfigDict(extra="ignore")

    locations: list[Location] = Field(min_length=2, description="Ordered stops, at least 2")
    costing: Costing = "auto"
    costing_options: dict[str, Any] | None = Field(
        None, description="Options of the costing, flat ({\"use_highways\": 0.3}) or under the costing key "
        "({\"auto\": {...}}); see GET /costing/options/{costing}")
    directions_options: DirectionsOptions = Field(default_factory=DirectionsOptions)
    avoid_locations: list[AvoidLocation] | None = None
    avoid_polygons: list[list[tuple[Lon, Lat]]] | None = Field(
        None, description="Rings of [lon, lat] pairs; roads crossing them are avoided")
    alternates: int | None = Field(None, ge=1, le=3)
    date_time: dict[str, Any] | None = None
    shape_format: Literal["polyline6", "polyline5", "geojson"] = "polyline6"
    linear_references: bool = False
    elevation_interval: float | None = Field(None, ge=0)
    id: str | None = Field(None, description="Echoed in the response")

    @field_validator("costing", mode="before")
    @classmethod
    def _costing_known(cls, v):
        if isinstance(v, str) and v not in COSTINGS:
            raise ValueError(f"unknown costing '{v}'; costings: {', '.join(COSTINGS)}")
        return v


class MatrixRequest(BaseModel):
    """POST /matrix."""

    model_config = ConfigDict(extra="ignore")

    sources: list[Location] = Field(min_length=1)
    targets: list[Location] = Field(min_length=1)
    costing: MatrixCosting = "auto"
    costing_options: dict[str, Any] | None = None
    units: Units = "kilometers"
    date_time: dict[str, Any] | None = Field(
        None, description="Departure time {type: 0 now | 1 depart_at | 3 invariant, value: 'YYYY-MM-DDTHH:MM'}; "
        "also accepted inside costing_options. Each cell then carries its estimated arrival `date_time`.")
    id: str | None = None

    _norm_units = field_validator("units", mode="before")(_units)

    @field_validator("costing", mode="before")
    @classmethod
    def _costing_known(cls, v):
        allowed = ("auto", "bicycle", "pedestrian", "truck", "motorcycle")
        if isinstance(v, str) and v not in allowed:
            raise ValueError(f"costing '{v}' is not available for /matrix; use one of: {', '.join(allowed)}")
        return v


class LatLon(BaseModel):
    lat: float
    lon: float


class MatrixCell(BaseModel):
    to_index: int
    from_index: int
    time: int = Field(description="Travel time in seconds")
    distance: float = Field(description="Road distance in the requested unit")
    date_time: str | None = None


class MatrixResponse(BaseModel):
    sources_to_targets: list[list[MatrixCell | None]]
    sources: list[LatLon]
    targets: list[LatLon]
    units: Units
    id: str | None = None
