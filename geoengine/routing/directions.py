"""POST /v1/routing/directions: turn-by-turn directions between 2-25 waypoints, with GeoJSON (or
polyline6) geometry, optional alternative routes, and steps in six languages.

Library: `engine.directions(waypoints=[{"lon": .., "lat": ..}, ...], profile="driving", ...)` or a
`DirectionsRequest`. The routes come from the same router as POST /route (snapping, exact shortest
paths, narrative); this module only maps the request onto it and reshapes the trip document.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from geoengine.routing.models import Lat, Lon

PROFILES = {"driving": "auto", "walking": "pedestrian", "cycling": "bicycle"}
LANGUAGES = ("en", "hi", "fr", "de", "es", "ar")
# locale file per language (the narrative layer's tags)
_LOCALE = {"en": "en-US", "hi": "hi", "fr": "fr", "de": "de", "es": "es", "ar": "ar"}
MAX_WAYPOINTS = 25


class Waypoint(BaseModel):
    model_config = ConfigDict(extra="ignore")

    lon: Lon
    lat: Lat


class DirectionsRequest(BaseModel):
    """Body of POST /v1/routing/directions."""

    model_config = ConfigDict(extra="forbid")

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

    @field_validator("language", mode="before")
    @classmethod
    def _language(cls, v):
        if not isinstance(v, str):
            raise ValueError(f"language must be a string; supported languages: {', '.join(LANGUAGES)}")
        primary = v.strip().replace("_", "-").split("-")[0].lower()
        if primary not in LANGUAGES or not v.strip().replace("_", "-").replace("-", "").isalnum():
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


def _route_request(req: DirectionsRequest):
    from geoengine.routing.models import RouteRequest

    return RouteRequest(
        locations=[{"lon": w.lon, "lat": w.lat, "type": "break"} for w in req.waypoints],
        costing=PROFILES[req.profile],
        directions_options={"language": _LOCALE[req.language], "units": "kilometers",
                            "directions_type": "instructions" if req.steps else "none"},
        shape_format="geojson",
    )


def _route_doc(trip: dict, geometry: str, steps: bool) -> dict:
    import numpy as np

    from geoengine.geo import encode_polyline

    coords: list[list[float]] = []
    legs = []
    for i, leg in enumerate(trip["legs"]):
        c = leg["shape"]["coordinates"]
        coords.extend(c if i == 0 else c[1:])
        doc = {"distance_m": round(leg["summary"]["length"] * 1000.0, 1),
               "duration_s": round(leg["summary"]["time"], 1)}
        if steps:
            doc["steps"] = [_step(m) for m in leg.get("maneuvers", [])]
        legs.append(doc)
    if geometry == "polyline6":
        a = np.asarray(coords, dtype=np.float64).reshape(-1, 2)
        geom: Any = encode_polyline(a[:, 1], a[:, 0], 6)
    else:
        geom = {"type": "LineString", "coordinates": coords}
    return {"distance_m": round(trip["summary"]["length"] * 1000.0, 1),
            "duration_s": round(trip["summary"]["time"], 1), "geometry": geom, "legs": legs}


def _step(m: dict) -> dict:
    d = {"instruction": m.get("instruction", ""), "distance_m": m.get("length_m", round(m["length"] * 1000.0, 1)),
         "duration_s": round(float(m["time"]), 1), "maneuver": m["type"], "bearing": m.get("bearing_after"),
         "bearing_before": m.get("bearing_before")}
    if m.get("street_names"):
        d["name"] = "/".join(m["street_names"])
    return d


# The spec allows up to 3 routes in all: the best and at most two alternatives.
DIRECTIONS_MAX_ALTERNATES = 2


def directions(router, req: DirectionsRequest) -> dict:
    """The /v1/routing/directions document for a validated request. Raises Unsnappable / NoRoute (422)
    when a waypoint has no usable road near it or no route joins two waypoints."""
    from geoengine.costing import inactive_options
    from geoengine.routing.alternates import alternatives
    from geoengine.routing.trip import build_trip

    rreq = _route_request(req)
    options = router.parse_options(rreq.costing, None)
    prof = router.profile(rreq.costing, options)
    cands, pieces = router.route_legs(prof, rreq.locations, field="waypoints")
    notes = inactive_options(router.graph, options)
    trips = [build_trip(router, prof, rreq, cands, pieces, notes)["trip"]]
    if req.alternatives:
        for alt in alternatives(router, prof, cands, DIRECTIONS_MAX_ALTERNATES, best=pieces):
            trips.append(build_trip(router, prof, rreq, cands, alt, notes)["trip"])
    # the positions the best route actually starts from and reaches (the candidate the search chose)
    legs = trips[0]["legs"]
    ends = [leg["shape"]["coordinates"][0] for leg in legs] + [legs[-1]["shape"]["coordinates"][-1]]
    snapped = [{"lon": c[0], "lat": c[1]} for c in ends]
    return {"routes": [_route_doc(t, req.geometry, req.steps) for t in trips], "waypoints": snapped}
