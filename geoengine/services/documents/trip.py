"""The Valhalla-style `trip` document of POST /route (and of /optimised_route and /map_match) from a
typed Route. Lengths are in the route's units; times in seconds; maneuver `type` is Valhalla's integer
code (its snake-case name in `type_name`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from geoengine.geo import encode_polyline, metres_per_unit
from geoengine.services.route_options import DATE_TIME_TYPES, FORMAT


def shape(lon, lat, fmt: str):
    """A shape as polyline6 / polyline5 text or a GeoJSON LineString."""
    if fmt == "geojson":
        return {"type": "LineString", "coordinates": np.round(np.column_stack([lon, lat]), 6).tolist()}
    return encode_polyline(lat, lon, 6 if fmt == "polyline6" else 5)


def leg_shape(leg, fmt: str):
    """`shape` of a leg, the polyline made with the search when it has the precision asked for."""
    made = leg.polyline
    if made is not None and fmt == ("polyline6" if made[0] == 6 else "polyline5"):
        return made[1]
    return shape(leg.lon, leg.lat, fmt)


def leg_bbox(leg) -> dict:
    """`bbox` of a leg's shape, from the one made with the search when there is one."""
    box = leg.bbox
    return bbox(leg.lon, leg.lat) if box is None else _box(*box)


def bbox(lon, lat) -> dict:
    return _box(float(lon.min()), float(lat.min()), float(lon.max()), float(lat.max()))


def _box(min_lon: float, min_lat: float, max_lon: float, max_lat: float) -> dict:
    return {"min_lat": round(min_lat, 6), "min_lon": round(min_lon, 6), "max_lat": round(max_lat, 6),
            "max_lon": round(max_lon, 6)}


def _union(boxes: list[dict]) -> dict:
    """The bbox of several bboxes (of the legs: the route's, without joining their shapes)."""
    if len(boxes) == 1:
        return boxes[0]
    return {"min_lat": min(b["min_lat"] for b in boxes), "min_lon": min(b["min_lon"] for b in boxes),
            "max_lat": max(b["max_lat"] for b in boxes), "max_lon": max(b["max_lon"] for b in boxes)}


def _t(dt) -> str:
    return dt.strftime(FORMAT)


def maneuver_documents(ms) -> list[dict]:
    """The maneuvers of a leg as documents: the narrative's rendering (numbers already rounded in the
    route's units) with Valhalla's integer `type`, `type_name`, `cost` and the travel mode and type."""
    cost = np.round(np.array([m.cost for m in ms], dtype=np.float64), 3).tolist() if ms else []
    out = []
    for m, c in zip(ms, cost, strict=True):
        d = dict(m.rendered)
        d["type_name"] = d.pop("type")
        d["type"] = d.pop("type_code")
        d["cost"] = c
        d["travel_mode"] = m.travel_mode
        d["travel_type"] = m.travel_type
        if m.departure is not None:
            d["departure"], d["arrival"] = _t(m.departure), _t(m.arrival)
        out.append(d)
    return out


def trip_document(route, shape_format: str = "polyline6") -> dict:
    scale = metres_per_unit(route.units)
    legs, boxes = [], []
    for leg in route.legs:
        boxes.append(leg_bbox(leg))
        summary = {"time": round(leg.time_s, 3), "length": round(leg.length_m / scale, 3),
                   "cost": round(leg.cost, 3), **boxes[-1],
                   "has_toll": leg.has_toll, "has_highway": leg.has_highway, "has_ferry": leg.has_ferry}
        if leg.climb_m is not None:
            summary["climb"], summary["descent"] = round(leg.climb_m, 1), round(leg.descent_m, 1)
        doc = {"summary": summary, "shape": leg_shape(leg, shape_format)}
        if leg.maneuvers is not None:
            doc["maneuvers"] = maneuver_documents(leg.maneuvers)
        if leg.elevation is not None:
            doc["elevation_interval"] = leg.elevation_interval
            doc["elevation"] = [None if not np.isfinite(x) else round(float(x), 1) for x in leg.elevation]
        if leg.departure is not None:
            doc["departure"], doc["arrival"] = _t(leg.departure), _t(leg.arrival)
        legs.append(doc)
    locations = []
    for loc in route.locations:
        d = {"type": loc.type, "lat": round(loc.lat, 6), "lon": round(loc.lon, 6), "original_index": loc.original_index,
             "snapped": {"lat": round(loc.snapped_lat, 6), "lon": round(loc.snapped_lon, 6),
                         "distance_m": round(loc.snapped_distance_m, 1)}}
        if loc.name:
            d["name"] = loc.name
        if loc.street:
            d["street"] = loc.street
        if loc.city:
            d["city"] = loc.city
        if loc.date_time is not None:
            d["date_time"] = _t(loc.date_time)
        locations.append(d)
    summary = {"time": round(route.time_s, 3), "length": round(route.length_m / scale, 3), "cost": round(route.cost, 3),
               **_union(boxes), "has_toll": route.has("has_toll"), "has_highway": route.has("has_highway"),
               "has_ferry": route.has("has_ferry")}
    climb = route.climb
    if climb is not None:
        summary["climb"], summary["descent"] = round(climb[0], 1), round(climb[1], 1)
    trip = {
        "locations": locations,
        "legs": legs,
        "summary": summary,
        "status_message": route.status_message,
        "status": 0,
        "units": route.units,
        "language": route.language,
        "costing": route.costing,
    }
    if route.warnings:
        trip["warnings"] = list(route.warnings)
    if route.linear_references is not None:
        trip["linear_references"] = route.linear_references
    if route.date_time is not None:
        kind, when = route.date_time
        trip["departure"], trip["arrival"] = _t(route.departure), _t(route.arrival)
        trip["date_time"] = {"type": kind, "type_name": DATE_TIME_TYPES[kind], "value": _t(when)}
    return trip


def route_document(result, alternates_requested: bool = False) -> dict:
    """The POST /route body: {"trip": ..., "alternates": [{"trip": ...}], "id": ...}."""
    doc = {"trip": trip_document(result.best, result.shape_format)}
    if alternates_requested or len(result.routes) > 1:
        doc["alternates"] = [{"trip": trip_document(r, result.shape_format)} for r in result.routes[1:]]
    if result.id is not None:
        doc["id"] = result.id
    return doc


# -- the documents' schemas (OpenAPI) ------------------------------------------------------------------------
class Maneuver(BaseModel):
    type: int = Field(description="Valhalla maneuver type code (1 start, 4 destination, 10 right, 15 left, ...)")
    type_name: str = Field(description="The type's name, e.g. start, right, roundabout_enter, destination")
    instruction: str | None = Field(None, description="Text instruction (directions_type instructions)")
    verbal_transition_alert_instruction: str | None = None
    verbal_pre_transition_instruction: str | None = None
    verbal_post_transition_instruction: str | None = None
    street_names: list[str] = []
    length: float = Field(description="Length in the requested units")
    time: float = Field(description="Seconds")
    cost: float = Field(description="Cost of the maneuver's edges under the costing")
    begin_shape_index: int
    end_shape_index: int
    bearing_before: float | None = None
    bearing_after: float | None = None
    roundabout_exit_count: int | None = None
    travel_mode: str = Field(description="drive, pedestrian or bicycle")
    travel_type: str = Field(description="car, taxi, bus, truck, motorcycle, motor_scooter, foot or road")


class Summary(BaseModel):
    time: float = Field(description="Seconds, waiting times included")
    length: float = Field(description="Length in the requested units")
    cost: float = Field(description="Cost under the costing (seconds plus penalties)")
    min_lat: float
    min_lon: float
    max_lat: float
    max_lon: float
    has_toll: bool
    has_highway: bool
    has_ferry: bool
    climb: float | None = Field(None, description="Metres climbed (bundles built with a DEM)")
    descent: float | None = Field(None, description="Metres descended (bundles built with a DEM)")


class TripLeg(BaseModel):
    summary: Summary
    shape: str | dict[str, Any] = Field(description="polyline6/polyline5 string, or a GeoJSON LineString")
    maneuvers: list[Maneuver] | None = None


class TripLocation(BaseModel):
    type: str
    lat: float
    lon: float
    original_index: int
    snapped: dict[str, float] = Field(description="lat, lon of the snapped position and distance_m to it")


class Trip(BaseModel):
    locations: list[TripLocation]
    legs: list[TripLeg] = Field(description="One leg per pair of consecutive break locations")
    summary: Summary
    status: int
    status_message: str
    units: str
    language: str
    costing: str
    warnings: list[str] | None = Field(None, description="Options that cannot take effect on this bundle")


class RouteResponse(BaseModel):
    trip: Trip
    alternates: list[dict[str, Trip]] | None = Field(None, description="With `alternates`: [{trip}, ...]")
    id: str | None = None
