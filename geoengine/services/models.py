"""Request parts shared by the routing services (locations, directions options, units), the one
costing x endpoint table, and the travel-profile aliases.

Each service module (route, matrix, optimised_route, isochrone, matching, directions) declares its own
request and response models from these parts; the library, the CLI and the HTTP façade validate
through the same models (`geoengine.validation.validate`), so bounds and messages are the same
everywhere.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from geoengine.costing.schema import COSTINGS

# -- the costing x endpoint table: which costings each operation offers (the spec's lists) ---------------
ENDPOINT_COSTINGS: dict[str, tuple[str, ...]] = {
    "route": COSTINGS,
    "matrix": ("auto", "bicycle", "pedestrian", "truck", "motorcycle"),
    "optimised_route": ("auto", "bicycle", "pedestrian", "truck"),
    "isochrone": ("auto", "bicycle", "pedestrian", "truck", "motorcycle", "motor_scooter"),
    "map_match": ("auto", "bicycle", "pedestrian", "bus", "motorcycle"),
}

COSTING_DESCRIPTIONS: dict[str, str] = {
    "auto": "Fastest car route", "auto_shorter": "Shortest car route", "bicycle": "Bicycle", "bus": "Bus",
    "pedestrian": "Walking", "truck": "Truck / heavy goods vehicle", "motorcycle": "Motorcycle",
    "motor_scooter": "Scooter", "taxi": "Taxi",
}


def costing_endpoints(costing: str) -> list[str]:
    """The endpoints (paths) that accept a costing, from the one table."""
    return [f"/{ep}" for ep, names in ENDPOINT_COSTINGS.items() if costing in names]


#: travel profiles of the directions endpoint (and the OSRM-style profile names) -> costing
PROFILE_COSTING: dict[str, str] = {"driving": "auto", "walking": "pedestrian", "cycling": "bicycle"}

Costing = Literal[COSTINGS]  # type: ignore[valid-type]
MatrixCosting = Literal[ENDPOINT_COSTINGS["matrix"]]  # type: ignore[valid-type]
OptimisedRouteCosting = Literal[ENDPOINT_COSTINGS["optimised_route"]]  # type: ignore[valid-type]
IsochroneCosting = Literal[ENDPOINT_COSTINGS["isochrone"]]  # type: ignore[valid-type]
MatchCosting = Literal[ENDPOINT_COSTINGS["map_match"]]  # type: ignore[valid-type]


def costing_validator(endpoint: str):
    """A pydantic before-validator that names the endpoint's costings when a costing is not among them."""
    allowed = ENDPOINT_COSTINGS[endpoint]
    where = "" if endpoint == "route" else f" for /{endpoint}"

    def _check(cls, v):
        if isinstance(v, str) and v not in allowed:
            if endpoint == "route":
                raise ValueError(f"unknown costing '{v}'; costings: {', '.join(allowed)}")
            raise ValueError(f"costing '{v}' is not available{where}; use one of: {', '.join(allowed)}")
        return v

    return field_validator("costing", mode="before")(classmethod(_check))


Units = Literal["kilometers", "miles"]

Lon = Annotated[float, Field(ge=-180, le=180, allow_inf_nan=False, description="Longitude, WGS84 degrees")]
Lat = Annotated[float, Field(ge=-90, le=90, allow_inf_nan=False, description="Latitude, WGS84 degrees")]
MAX_WAITING_SECS = 7 * 86_400  # = services.route_options.MAX_WAITING_SECS: keeps date_time arithmetic in range


def integral(v):
    """A JSON number with no fractional part (57.0) is the integer 57, as JSON Schema's `integer` says; a
    string, a boolean or 57.5 stays refused by the strict int that follows."""
    return int(v) if type(v) is float and v.is_integer() else v


#: an int field of a request body: strict (no "57", no true) but 57.0 is 57 (JSON has one number type)
JsonInt = Annotated[int, BeforeValidator(integral)]


def unit_alias(v):
    """A request's `units` with its aliases (km, kilometres, mi) spelt out; other values as given."""
    aliases = {"km": "kilometers", "kilometres": "kilometers", "mi": "miles"}
    return aliases.get(v, v) if isinstance(v, str) else v


class Location(BaseModel):
    """A routing location (the spec's Routing Location object)."""

    model_config = ConfigDict(extra="ignore", strict=True)

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
    waiting_secs: JsonInt | None = Field(None, ge=0, le=MAX_WAITING_SECS,
                                     description="Waiting time at the location, added to the time (at most 7 days)")
    search_radius: JsonInt | None = Field(None, ge=1, le=100, description="Candidate search radius in metres")
    rank_candidates: bool | None = Field(None, description="Rank candidates by distance and hints (default true)")
    preferred_side: Literal["same", "opposite", "either"] | None = Field(
        None, description="Side of the road to reach the location on (right-hand traffic)")


class DirectionsOptions(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    units: Units = "kilometers"
    language: str = Field("en-US", description="Instruction language tag")
    directions_type: Literal["none", "maneuvers", "instructions"] = "instructions"
    banner_instructions: bool = False
    voice_instructions: bool = False

    _norm_units = field_validator("units", mode="before")(unit_alias)


class AvoidLocation(BaseModel):
    model_config = ConfigDict(strict=True)

    lon: Lon
    lat: Lat
    radius: float = Field(0, ge=0, le=200, description="Radius in metres around the point whose roads are avoided")


class LatLon(BaseModel):
    lat: float
    lon: float
