"""The Valhalla HTTP API over the engine: `/sources_to_targets`, `/optimized_route`, `/trace_route`,
`/trace_attributes`, `/height`, `/locate`, `/status`, `/expansion` (and `/route`, `/isochrone`, which
are the spec's endpoints and already take Valhalla's bodies).

Request models here are Valhalla's (validated once at the edge, also for the OpenAPI document); each
function makes the engine call and renders Valhalla's response. No HTTP: the thin routes are in
`geoengine/server/routes/valhalla.py`. Field-by-field mapping: docs/valhalla.md.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from geoengine import __version__
from geoengine.errors import FieldError, InvalidRequest
from geoengine.services.matching import MapMatchRequest
from geoengine.services.matrix import MatrixRequest
from geoengine.services.models import Costing, IsochroneCosting, Lat, Location, Lon, costing_validator
from geoengine.services.elevation import resampled_profile
from geoengine.services.valhalla_edges import edge_attributes, expansion_document, locate_documents

ACTIONS = ("route", "isochrone", "sources_to_targets", "optimized_route", "trace_route", "trace_attributes",
           "height", "locate", "status", "expansion")


# ------------------------------------------------------------------------------------------------------
# /sources_to_targets
# ------------------------------------------------------------------------------------------------------
class SourcesToTargetsRequest(MatrixRequest):
    """Valhalla's matrix body: the body of POST /matrix (sources, targets, costing, costing_options, units,
    date_time, id) plus `verbose`."""

    verbose: bool = Field(True, description="true: one object per pair; false: Valhalla's concise form "
                          "(arrays `durations` and `distances`)")


def sources_to_targets(engine, req: SourcesToTargetsRequest) -> dict:
    doc = engine.matrix_request(req.model_dump(exclude={"verbose"}, exclude_none=True))
    return matrix_document(doc, req.verbose)


def matrix_document(doc: dict, verbose: bool = True) -> dict:
    """The /matrix document in Valhalla's shape: an unreachable pair is an object whose time and
    distance are null (not null itself); `verbose=false` gives the concise arrays."""
    rows = doc["sources_to_targets"]
    if verbose:
        out_rows = [[cell if cell is not None else
                     {"from_index": i, "to_index": j, "time": None, "distance": None}
                     for j, cell in enumerate(row)] for i, row in enumerate(rows)]
        body = {**doc, "sources_to_targets": out_rows}
    else:
        body = {k: v for k, v in doc.items() if k != "sources_to_targets"}
        body["sources_to_targets"] = {
            "durations": [[None if c is None else c["time"] for c in row] for row in rows],
            "distances": [[None if c is None else c["distance"] for c in row] for row in rows],
        }
    body["algorithm"] = "timedistancematrix"
    return body


# ------------------------------------------------------------------------------------------------------
# /trace_route, /trace_attributes
# ------------------------------------------------------------------------------------------------------
VALHALLA_ONLY_TRACE_OPTIONS = ("turn_penalty_factor",)


class Filters(BaseModel):
    model_config = ConfigDict(extra="forbid")

    attributes: list[str] = Field(description="Attribute keys such as edge.names, edge.use, matched.point, shape")
    action: Literal["include", "exclude"] = "include"


class TraceRequest(MapMatchRequest):
    """Valhalla's map-matching body: the body of POST /map_match with Valhalla's default shape_match
    (walk_or_snap), Valhalla's trace_options (turn_penalty_factor is accepted and has no effect) and, for
    /trace_attributes, `filters` (with `action` inside or, as routingpy sends it, beside it)."""

    shape_match: Literal["map_snap", "edge_walk", "walk_or_snap"] = Field(
        "walk_or_snap", description="Valhalla's default: edge_walk, falling back to map_snap")
    trace_options: dict[str, Any] | None = Field(
        None, description="search_radius, gps_accuracy, breakage_distance, interpolation_distance; "
        "turn_penalty_factor is accepted and ignored")
    filters: Filters | None = None
    action: Literal["include", "exclude"] | None = Field(None, description="filters.action given beside filters")


def _match_body(req: TraceRequest) -> dict:
    data = req.model_dump(exclude={"filters", "action", "trace_options"}, exclude_none=True)
    to = dict(req.trace_options or {})
    for key in VALHALLA_ONLY_TRACE_OPTIONS:
        to.pop(key, None)
    data["trace_options"] = to
    return data


def trace_route(engine, req: TraceRequest) -> dict:
    """The /map_match document (its trip's maneuver `type` is Valhalla's integer already)."""
    return engine.map_match(_match_body(req))


_MATCHED_KEYS = {"matched.point": ("lat", "lon"), "matched.type": ("type",), "matched.edge_index": ("edge_index",),
                 "matched.distance_along_edge": ("distance_along_edge",),
                 "matched.distance_from_trace_point": ("distance_from_trace_point",)}


def apply_filters(doc: dict, filters: Filters | None, action: str | None) -> dict:
    """Valhalla's `filters`: keep (include) or drop (exclude) the named attributes: `edge.<field>`,
    `matched.point|type|edge_index|distance_along_edge|distance_from_trace_point`, `shape`. Unknown keys
    are ignored (as Valhalla does for attributes it does not have)."""
    if filters is None:
        return doc
    how = action or filters.action
    keys = set(filters.attributes)
    edge_fields = {a[len("edge."):] for a in keys if a.startswith("edge.")}
    point_fields = {f for a in keys if a in _MATCHED_KEYS for f in _MATCHED_KEYS[a]}
    keep = how == "include"  # the named attributes are kept (include) or dropped (exclude)
    doc["edges"] = [{k: v for k, v in e.items() if (k in edge_fields) == keep} for e in doc["edges"]]
    doc["matched_points"] = [{k: v for k, v in p.items() if (k in point_fields) == keep}
                             for p in doc["matched_points"]]
    if ("shape" in keys) != keep:
        doc.pop("shape", None)
    return doc


def trace_attributes(engine, req: TraceRequest) -> dict:
    doc = engine.trace_attributes(_match_body(req))
    doc["edges"] = edge_attributes(engine.graph, doc["edges"])
    return apply_filters(doc, req.filters, req.action)


# ------------------------------------------------------------------------------------------------------
# /height
# ------------------------------------------------------------------------------------------------------
class HeightPoint(BaseModel):
    model_config = ConfigDict(extra="ignore")

    lat: Lat
    lon: Lon


class HeightRequest(BaseModel):
    """Valhalla's elevation body."""

    model_config = ConfigDict(extra="ignore")

    shape: list[HeightPoint] | None = Field(None, description="Points; exactly one of shape and encoded_polyline")
    encoded_polyline: str | None = Field(None, description="Precision-6 encoded polyline")
    range: bool = Field(False, description="true: range_height pairs [cumulative metres, height]")
    resample_distance: float | None = Field(None, ge=10, description="Resample the shape every this many metres "
                                            "(>= 10) before sampling heights")
    height_precision: Literal[0, 1, 2] = Field(0, description="Decimal places of the heights (0, 1 or 2)")
    shape_format: Literal["polyline6", "polyline5"] = "polyline6"
    id: str | None = None


def height(engine, req: HeightRequest) -> dict:
    if (req.shape is None) == (req.encoded_polyline is None):
        raise InvalidRequest(errors=[FieldError("shape", "give exactly one of shape and encoded_polyline")])
    if req.shape is not None:
        prof = resampled_profile(engine, req.resample_distance,
                                 lats=np.array([p.lat for p in req.shape], dtype=np.float64),
                                 lons=np.array([p.lon for p in req.shape], dtype=np.float64))
    else:
        prof = resampled_profile(engine, req.resample_distance, encoded_polyline=req.encoded_polyline,
                                 precision=6 if req.shape_format == "polyline6" else 5)
    lats, lons = prof.lats, prof.lons
    h = np.round(prof.heights, req.height_precision)
    heights = [None if np.isnan(x) else (int(x) if req.height_precision == 0 else float(x)) for x in h.tolist()]
    out: dict[str, Any] = {}
    if req.shape is not None and not req.resample_distance:
        out["shape"] = [{"lat": p.lat, "lon": p.lon} for p in req.shape]
    elif req.encoded_polyline is not None and not req.resample_distance:
        out["encoded_polyline"] = req.encoded_polyline
    else:
        out["shape"] = [{"lat": round(a, 6), "lon": round(b, 6)} for a, b in zip(lats.tolist(), lons.tolist(), strict=True)]
    if req.range:
        d = np.round(prof.distances).astype(np.int64).tolist()
        out["range_height"] = [[di, hi] for di, hi in zip(d, heights, strict=True)]
    else:
        out["height"] = heights
    if req.id is not None:
        out["id"] = req.id
    return out


# ------------------------------------------------------------------------------------------------------
# /locate
# ------------------------------------------------------------------------------------------------------
class LocateRequest(BaseModel):
    """Valhalla's locate body: the locations and costing of a route request, and `verbose`."""

    model_config = ConfigDict(extra="ignore")

    locations: list[Location] = Field(min_length=1, max_length=100, description="1 to 100 locations")
    costing: Costing = "auto"
    costing_options: dict[str, Any] | None = None
    verbose: bool = False
    id: str | None = None

    _costing_known = costing_validator("route")


def locate(engine, req: LocateRequest) -> list[dict]:
    """Per location: the edges it snaps to for the costing, nearest first (services/valhalla_edges.py)."""
    return locate_documents(engine, req.locations, req.costing, req.costing_options, req.verbose)


# ------------------------------------------------------------------------------------------------------
# /status
# ------------------------------------------------------------------------------------------------------
class StatusRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    verbose: bool = Field(False, description="Add has_tiles, has_admins, has_timezones, has_live_traffic, bbox")


def status(engine, verbose: bool = False) -> dict:
    info = engine.info()
    built = info.get("built")
    try:
        ts = int(dt.datetime.fromisoformat(str(built)).timestamp()) if built else 0
    except ValueError:
        ts = 0
    out: dict[str, Any] = {"version": __version__, "tileset_last_modified": ts,
                           "available_actions": list(ACTIONS)}
    if verbose:
        bbox = info.get("bbox")
        stages = set(info.get("stages") or [])
        out.update(has_tiles="graph" in stages, has_admins=False, has_timezones=False, has_live_traffic=False)
        if bbox:
            w, s, e, n = bbox
            out["bbox"] = {"type": "FeatureCollection", "features": [{
                "type": "Feature", "properties": {},
                "geometry": {"type": "Polygon", "coordinates": [[[w, s], [e, s], [e, n], [w, n], [w, s]]]}}]}
    return out


# ------------------------------------------------------------------------------------------------------
# /expansion
# ------------------------------------------------------------------------------------------------------
EXPANSION_PROPERTIES = ("duration", "distance", "cost", "edge_id", "edge_status", "expansion_type")
# routingpy 1.3 sends the plural names of Valhalla's first expansion API
_PLURAL = {"durations": "duration", "distances": "distance", "costs": "cost", "edge_ids": "edge_id",
           "statuses": "edge_status"}


class ExpansionContour(BaseModel):
    model_config = ConfigDict(extra="ignore")

    time: float | None = Field(None, gt=0, le=120, description="Minutes")
    distance: float | None = Field(None, gt=0, le=200, description="Kilometres")


class ExpansionRequest(BaseModel):
    """Valhalla's expansion body: `action` isochrone (with `contours`) or route (the search from the first
    location until the route's duration), plus `skip_opposites` and `expansion_properties`."""

    model_config = ConfigDict(extra="ignore")

    action: Literal["isochrone", "route"]
    locations: list[Location] = Field(min_length=1)
    costing: IsochroneCosting = "auto"
    costing_options: dict[str, Any] | None = None
    contours: list[ExpansionContour] | None = None
    skip_opposites: bool = False
    dedupe: bool = False
    expansion_properties: list[str] = Field(default_factory=list)
    id: str | None = None

    _costing_known = costing_validator("isochrone")

    @field_validator("expansion_properties")
    @classmethod
    def _known(cls, v):
        for p in v:
            if p not in EXPANSION_PROPERTIES and p not in _PLURAL:
                raise ValueError(f"unknown expansion property '{p}'; use: {', '.join(EXPANSION_PROPERTIES)}")
        return v


def expansion(engine, req: ExpansionRequest) -> dict:
    loc = req.locations[0]
    if req.action == "isochrone":
        if not req.contours:
            raise InvalidRequest.field("contours", "the isochrone action needs contours")
        c = req.contours
        if any((x.time is None) == (x.distance is None) for x in c):
            raise InvalidRequest.field("contours", "give exactly one of time (minutes) or distance (km) per contour")
        metric = "time" if c[0].time is not None else "distance"
        if any((x.time is not None) != (metric == "time") for x in c):
            raise InvalidRequest.field("contours", "all contours of an expansion use the same metric")
        limit = max((x.time or 0) * 60.0 for x in c) if metric == "time" else max((x.distance or 0) * 1000.0 for x in c)
    else:
        if len(req.locations) < 2:
            raise InvalidRequest.field("locations", "the route action needs at least 2 locations")
        doc = engine.route({"locations": [x.model_dump(exclude_none=True) for x in req.locations[:2]],
                            "costing": req.costing, "costing_options": req.costing_options,
                            "directions_options": {"directions_type": "none"}})
        metric, limit = "time", float(doc["trip"]["summary"]["time"])
    out = expansion_document(engine, loc, req.costing, req.costing_options, metric, limit,
                             [_PLURAL.get(p, p) for p in req.expansion_properties], req.skip_opposites or req.dedupe)
    if req.id is not None:
        out["id"] = req.id
    return out

