"""POST /v1/routing/directions: turn-by-turn directions between 2-25 waypoints, with GeoJSON (or
polyline6) geometry, optional alternative routes, and steps in six languages.

Library: `engine.directions(waypoints=[{"lon": .., "lat": ..}, ...], profile="driving", ...)` or a
`DirectionsRequest`. The routes come from the route service (one search, typed routes); this module
maps the request onto a RouteRequest, and `documents.directions` renders the typed routes.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from geoengine.narrative.locales import LANGUAGE_PATTERN
from geoengine.services.models import PROFILE_COSTING, Lat, Lon

PROFILES = PROFILE_COSTING
LANGUAGES = ("en", "hi", "fr", "de", "es", "ar")
# locale file per language (the narrative layer's tags)
_LOCALE = {"en": "en-US", "hi": "hi", "fr": "fr", "de": "de", "es": "es", "ar": "ar"}
MAX_WAYPOINTS = 25


class Waypoint(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    lon: Lon
    lat: Lat


class DirectionsRequest(BaseModel):
    """Body of POST /v1/routing/directions."""

    model_config = ConfigDict(extra="forbid", strict=True)

    waypoints: list[Waypoint] = Field(min_length=2, max_length=MAX_WAYPOINTS,
                                      description="2 to 25 points; their order is the direction of travel")
    profile: Literal["driving", "walking", "cycling"] = Field(
        description="driving (car, fastest), walking (pedestrian), cycling (bicycle)")
    geometry: Literal["geojson", "polyline6"] = Field(
        "geojson", description="geojson: a GeoJSON LineString of [lon, lat]; polyline6: an encoded polyline, precision 6")
    alternatives: bool = Field(False, description="Also return up to 3 meaningfully different alternative routes")
    steps: bool = Field(True, description="Include the step instructions of each leg")
    language: str = Field("en", description="Instruction language: en, hi, fr, de, es, ar (region variants "
                                            "such as fr-FR are accepted)")
    date_time: dict[str, Any] | None = Field(
        None, description="Departure or arrival time, as on POST /route: {type: 0 current, 1 depart_at, 2 arrive_by, "
        "value: YYYY-MM-DDTHH:MM}. With time-of-day speed profiles on the bundle, the travel times are those of "
        "that quarter hour of the week (docs/traffic.md); without them it changes nothing")

    @field_validator("language", mode="before")
    @classmethod
    def _language(cls, v):
        if not isinstance(v, str):
            raise ValueError(f"language must be a string; supported languages: {', '.join(LANGUAGES)}")
        primary = v.replace("_", "-").split("-")[0].lower()
        if primary not in LANGUAGES or not re.fullmatch(LANGUAGE_PATTERN, v):
            raise ValueError(f"unsupported language '{v}'; supported languages: {', '.join(LANGUAGES)}")
        return primary


class Step(BaseModel):
    instruction: str = Field(description="Text instruction in the requested language")
    distance_m: float = Field(description="Length of the step in metres")
    duration_s: float = Field(description="Travel time of the step in seconds")
    maneuver: str = Field(description="Maneuver type, e.g. start, right, slight_left, roundabout_enter, destination")
    bearing: float | None = Field(None, description="Heading after the maneuver, degrees clockwise from north")
    bearing_before: float | None = Field(None, description="Heading before the maneuver, degrees")
    name: str | None = Field(None, description="Street name(s) of the step, joined by '/'")


class DirectionsLeg(BaseModel):
    distance_m: float
    duration_s: float
    steps: list[Step] | None = Field(None, description="Absent when steps is false")


class DirectionsRoute(BaseModel):
    distance_m: float = Field(description="Total distance in metres")
    duration_s: float = Field(description="Estimated travel time in seconds from road speeds and classes (no live traffic)")
    geometry: dict[str, Any] | str = Field(
        description="GeoJSON LineString with [lon, lat] coordinates, or a polyline6 string (geometry=polyline6)")
    legs: list[DirectionsLeg] = Field(description="One leg per pair of consecutive waypoints")


class DirectionsResponse(BaseModel):
    routes: list[DirectionsRoute] = Field(description="The best route first, then alternatives when asked")
    waypoints: list[Waypoint] = Field(description="The waypoints snapped to the nearest road the profile may use")


def route_request(req: DirectionsRequest):
    """The RouteRequest a directions request stands for."""
    from geoengine.services.route import RouteRequest

    return RouteRequest(
        locations=[{"lon": w.lon, "lat": w.lat, "type": "break"} for w in req.waypoints],
        costing=PROFILES[req.profile],
        directions_options={"language": _LOCALE[req.language], "units": "kilometers",
                            "directions_type": "instructions" if req.steps else "none"},
        shape_format="geojson",
        date_time=req.date_time,
    )


# The spec allows up to 3 routes in all: the best and at most two alternatives.
DIRECTIONS_MAX_ALTERNATES = 2


def directions(engine, req: DirectionsRequest) -> dict:
    """The /v1/routing/directions document for a validated request. Raises Unsnappable / NoRoute (422)
    when a waypoint has no usable road near it or no route joins two waypoints."""
    from geoengine.services import route
    from geoengine.services.documents.directions import directions_document

    result = route.run(engine, route_request(req), field="waypoints",
                       alternates=DIRECTIONS_MAX_ALTERNATES if req.alternatives else 0)
    return directions_document(result, req.geometry, req.steps)
