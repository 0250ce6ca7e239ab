"""The map-matching service: POST /map_match (a /route-shaped trip along the matched roads) and
POST /map_match/attributes (matched edges and points), from the HMM matcher's arrays
(geoengine.routing.matching). The request model is validated once at the edge; the library's
`engine.map_match(...)` / `engine.trace_attributes(...)` validate through it too."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from geoengine.errors import FieldError, InvalidRequest, Unprocessable
from geoengine.geo import metres_per_unit
from geoengine.routing.matching import TYPE_NAMES, UNMATCHED, arc_sum
from geoengine.routing.pieces import Leg, piece_geometry
from geoengine.routing.profile import unpack
from geoengine.services.documents.trip import Trip
from geoengine.services.models import (
    DirectionsOptions,
    Lat,
    Lon,
    MatchCosting,
    Units,
    costing_validator,
    unit_alias,
)

MAX_SHAPE_POINTS = 16000


class ShapePoint(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    lon: Lon
    lat: Lat
    time: float | None = Field(None, ge=0, description="Seconds (offset along the trace or epoch); optional")


class TraceOptions(BaseModel):
    """Matching parameters. Unknown keys are refused (a misspelt option would otherwise do nothing)."""

    model_config = ConfigDict(extra="forbid", strict=True)

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

    model_config = ConfigDict(extra="ignore", strict=True)

    shape: list[ShapePoint] | None = Field(None, description="GPS trace points in order; exactly one of shape "
                                           "and encoded_polyline")
    encoded_polyline: str | None = Field(None, description="The trace as a precision-6 encoded polyline")
    shape_match: Literal["map_snap", "edge_walk", "walk_or_snap"] = Field(
        "map_snap", description="map_snap: hidden Markov model matching of a noisy trace; edge_walk: the points "
        "follow the road edges exactly (e.g. a route shape), 422 otherwise; walk_or_snap: edge_walk, falling "
        "back to map_snap")
    costing: MatchCosting = "auto"
    costing_options: dict[str, Any] | None = Field(None, description="Options of the costing (see "
                                                   "GET /costing/options/{costing})")
    directions_options: DirectionsOptions = Field(default_factory=DirectionsOptions)
    trace_options: TraceOptions = Field(default_factory=TraceOptions)
    units: Units | None = Field(None, description="kilometers (default) or miles; overrides directions_options.units")
    shape_format: Literal["polyline6", "polyline5", "geojson"] = Field(
        "polyline6", description="Format of the matched shape in /map_match legs")
    id: str | None = Field(None, description="Echoed in the response")

    _norm_units = field_validator("units", mode="before")(unit_alias)

    _costing_known = costing_validator("map_match")

    @field_validator("shape")
    @classmethod
    def _shape_size(cls, v):
        if v is not None and not (2 <= len(v) <= MAX_SHAPE_POINTS):
            raise ValueError(f"a trace needs 2 to {MAX_SHAPE_POINTS} points, got {len(v)}")
        return v

    @property
    def effective_units(self) -> str:
        return self.units or self.directions_options.units


def trace_points(req):
    """(lon, lat) float64 arrays of the request's trace (shape or encoded_polyline, exactly one)."""
    if (req.shape is None) == (req.encoded_polyline is None):
        raise InvalidRequest.field("shape", "give exactly one of shape and encoded_polyline")
    if req.shape is not None:
        lon = np.array([p.lon for p in req.shape], dtype=np.float64)
        lat = np.array([p.lat for p in req.shape], dtype=np.float64)
        return lon, lat
    from geoengine.geo import decode_polyline

    lat, lon = decode_polyline(req.encoded_polyline, 6, field="encoded_polyline")
    if not (2 <= len(lat) <= MAX_SHAPE_POINTS):
        raise InvalidRequest.field("encoded_polyline", f"a trace needs 2 to {MAX_SHAPE_POINTS} points, got {len(lat)}")
    bad = ~((np.abs(lat) <= 90) & (np.abs(lon) <= 180))
    if bad.any():
        raise InvalidRequest.field("encoded_polyline", f"point {int(np.flatnonzero(bad)[0])} is outside the valid "
                                   "latitude/longitude range (was it encoded at precision 6?)")
    return np.ascontiguousarray(lon), np.ascontiguousarray(lat)


def run(matcher, req: MapMatchRequest):
    """Validated MapMatchRequest -> (profile, lon, lat, MatchResult, options)."""
    lon, lat = trace_points(req)
    router = matcher.router
    options = router.parse_options(req.costing, req.costing_options)
    prof = router.profile(req.costing, options)
    to = req.trace_options
    kw = dict(search_radius=to.search_radius, gps_accuracy=to.gps_accuracy,
              breakage_distance=to.breakage_distance, interpolation_distance=to.interpolation_distance)
    if req.shape_match == "map_snap":
        res = matcher.match(prof, lon, lat, mode="map_snap", **kw)
    elif req.shape_match == "edge_walk":
        res = matcher.match(prof, lon, lat, mode="edge_walk", **kw)
    else:
        try:
            res = matcher.match(prof, lon, lat, mode="edge_walk", **kw)
        except Unprocessable:
            res = matcher.match(prof, lon, lat, mode="map_snap", **kw)
    if not res.sections:
        raise Unprocessable("the trace could not be matched: no two consecutive points are joined by a road "
                            "the costing may use", errors=[FieldError("shape", "no matched section")])
    return prof, lon, lat, res, options


def matched_route(matcher, req: MapMatchRequest):
    """(typed Route with one leg per matched section, MatchResult)."""
    from geoengine.services.route import build_route

    router = matcher.router
    prof, lon, lat, res, options = run(matcher, req)
    opts = req.directions_options.model_copy(update={"units": req.effective_units})
    notes = router.notes(options)
    route = None
    for sec in res.sections:
        leg = _piece(prof, sec.edges, sec.f_first, sec.f_last)
        ends = [int(sec.points[0]), int(sec.points[-1])]
        locs = [SimpleNamespace(type="break", lon=float(lon[i]), lat=float(lat[i]), waiting_secs=None) for i in ends]
        cands = [{"lon": res.lon[i:i + 1], "lat": res.lat[i:i + 1], "distance": res.distance[i:i + 1]} for i in ends]
        part = build_route(router, prof, locs, cands, [leg], notes, opts)
        for loc, i in zip(part.locations, ends, strict=True):
            loc.original_index = i
        if route is None:
            route = part
        else:
            route.legs.extend(part.legs)
            route.locations.extend(part.locations)
    n = len(res.sections)
    route.status_message = "Found matched route" + (f" in {n} sections" if n > 1 else "")
    return route, res


def _piece(prof, edges: np.ndarray, f_first: float, f_last: float) -> Leg:
    """The piece over `edges` from f_first on the first to f_last on the last, with the costing's turn
    delays between them (the search graph's arcs carry the head edge's time plus the delay of the turn
    into it, packed with the length; see profile.unpack)."""
    cov = np.ones(len(edges))
    if len(edges) == 1:
        cov[0] = f_last - f_first
    else:
        cov[0] = 1.0 - f_first
        cov[-1] = f_last
    turn_s = 0.0
    if len(edges) > 1:
        s_ = prof.search
        arc_t, _ = unpack(arc_sum(s_.offsets, s_.targets, s_.secondary, edges))
        turn_s = max(float(arc_t) - float(prof.time[edges[1:]].sum()), 0.0)
    return Leg(edges, f_first, f_last, float((cov * prof.cost[edges]).sum()),
               float((cov * prof.time[edges]).sum()) + turn_s, float((cov * prof.length[edges]).sum()))


def matched_routes_by_point(matcher, req: MapMatchRequest):
    """(one typed Route per matched section, with one leg between each two consecutive matched trace
    points of it, as OSRM's match returns; MatchResult). A point's position on the matched path is its
    edge and fraction; a point behind the previous one on the same edge is held at the previous one."""
    from geoengine.services.route import build_route

    router = matcher.router
    prof, lon, lat, res, options = run(matcher, req)
    opts = req.directions_options.model_copy(update={"units": req.effective_units})
    notes = router.notes(options)
    kept = (res.type != UNMATCHED) & (res.edge_index >= 0)
    routes = []
    base = 0
    for k, sec in enumerate(res.sections):
        pts = np.flatnonzero(kept & (res.section == k))
        local = res.edge_index[pts] - base
        base += len(sec.edges)
        local = np.maximum.accumulate(np.clip(local, 0, len(sec.edges) - 1))  # the path only goes forward
        frac = res.fraction[pts].astype(np.float64)
        pieces = []
        for a in range(len(pts) - 1):
            ea, eb = int(local[a]), int(local[a + 1])
            fa, fb = float(frac[a]), float(frac[a + 1])
            if ea == eb:
                fb = max(fb, fa)
            pieces.append(_piece(prof, sec.edges[ea:eb + 1], fa, fb))
        if not pieces:  # fewer than two kept points: the section as one leg between its ends
            pts = np.array([int(sec.points[0]), int(sec.points[-1])])
            pieces = [_piece(prof, sec.edges, sec.f_first, sec.f_last)]
        locs = [SimpleNamespace(type="break", lon=float(lon[i]), lat=float(lat[i]), waiting_secs=None) for i in pts]
        cands = [{"lon": res.lon[i:i + 1], "lat": res.lat[i:i + 1], "distance": res.distance[i:i + 1]} for i in pts]
        route = build_route(router, prof, locs, cands, pieces, notes, opts)
        for loc, i in zip(route.locations, pts.tolist(), strict=True):
            loc.original_index = i
        route.status_message = "Found matched route"
        routes.append(route)
    return routes, res


def map_match_document(matcher, req: MapMatchRequest) -> dict:
    """The /map_match document: a /route-shaped `trip` with one leg per matched section."""
    from geoengine.services.documents.trip import trip_document

    route, res = matched_route(matcher, req)
    out = {"trip": trip_document(route, req.shape_format),
           "matched": {"points": int((res.type != UNMATCHED).sum()), "unmatched": int((res.type == UNMATCHED).sum()),
                       "sections": len(res.sections)}}
    if req.id is not None:
        out["id"] = req.id
    return out


def attributes_document(matcher, req: MapMatchRequest) -> dict:
    """The /map_match/attributes document: matched edges, matched points and the matched shape."""
    from geoengine.geo import encode_polyline
    from geoengine.graph import tags as T

    prof, lon, lat, res, _ = run(matcher, req)
    units = req.effective_units
    scale = metres_per_unit(units)
    g = matcher.graph
    lons, lats, begins, ends, covs, edges = [], [], [], [], [], []
    offset = 0
    for sec in res.sections:
        lo, la, b, e, cov = piece_geometry(g, Leg(sec.edges, sec.f_first, sec.f_last, 0.0, 0.0, 0.0))
        lons.append(lo)
        lats.append(la)
        begins.append(b + offset)
        ends.append(e + offset)
        covs.append(cov)
        edges.append(sec.edges)
        offset += len(lo)
    lon_s, lat_s = np.concatenate(lons), np.concatenate(lats)
    e_all = np.concatenate(edges)
    begin, end, cov = np.concatenate(begins), np.concatenate(ends), np.concatenate(covs)
    info = g.path_info(e_all)
    klass = np.asarray(info["class"]).astype(np.int64)
    length = np.asarray(info["length_m"], dtype=np.float64)
    speed = np.where(np.isfinite(prof.time[e_all]) & (prof.time[e_all] > 0),
                     3.6 * prof.length[e_all] / np.where(prof.time[e_all] > 0, prof.time[e_all], 1.0), 0.0)
    sec_of_edge = np.repeat(np.arange(len(res.sections)), [len(s.edges) for s in res.sections])
    # output formatting: columns rounded as arrays, then one dict per edge / point
    cls = [T.CLASS_NAMES[k] for k in klass.tolist()]
    edge_docs = [
        {"names": [x for x in (nm, rf) if x], "length": ln, "speed": sp, "road_class": rc, "way_id": wy, "id": ei,
         "begin_shape_index": bi, "end_shape_index": en, "section": sc}
        for nm, rf, ln, sp, rc, wy, ei, bi, en, sc in zip(
            info["name"], info["ref"], np.round(length * cov / scale, 3).tolist(), np.round(speed, 1).tolist(),
            cls, np.asarray(info["way"]).tolist(), e_all.tolist(), begin.tolist(), end.tolist(),
            sec_of_edge.tolist(), strict=True)
    ]
    um = res.type == UNMATCHED
    plat = np.round(np.where(um, lat, res.lat), 6).tolist()
    plon = np.round(np.where(um, lon, res.lon), 6).tolist()
    points = []
    for la, lo, t, ei, fr, di in zip(plat, plon, res.type.tolist(), res.edge_index.tolist(),
                                      np.round(np.nan_to_num(res.fraction), 4).tolist(),
                                      np.round(np.nan_to_num(res.distance), 2).tolist(), strict=True):
        if t == UNMATCHED:
            points.append({"lat": la, "lon": lo, "type": "unmatched"})
        else:
            points.append({"lat": la, "lon": lo, "type": TYPE_NAMES[t], "edge_index": ei,
                           "distance_along_edge": fr, "distance_from_trace_point": di})
    out = {
        "edges": edge_docs,
        "matched_points": points,
        "shape": encode_polyline(lat_s, lon_s, 6),
        "units": units,
        "costing": req.costing,
    }
    if req.id is not None:
        out["id"] = req.id
    return out


# -- the documents' schemas (OpenAPI) ----------------------------------------------------------------------
class MatchCounts(BaseModel):
    points: int = Field(description="Trace points matched or interpolated onto the route")
    unmatched: int = Field(description="Trace points left unmatched (no road within search_radius, or isolated)")
    sections: int = Field(description="Continuously matched sections (one leg each)")


class MapMatchResponse(BaseModel):
    trip: Trip = Field(description="The matched route in the shape of POST /route: one leg per matched section")
    matched: MatchCounts
    id: str | None = None


class MatchedEdge(BaseModel):
    names: list[str] = Field(description="Street name and ref of the edge")
    length: float = Field(description="Length of the matched part of the edge, in the requested units")
    speed: float = Field(description="Speed of the costing on the edge, km/h")
    road_class: str
    way_id: int = Field(description="OpenStreetMap way id")
    id: int = Field(description="Directed edge id in the bundle's graph")
    begin_shape_index: int
    end_shape_index: int
    section: int = Field(description="Index of the matched section the edge belongs to")


class MatchedPoint(BaseModel):
    lat: float = Field(description="Matched position (the input position when unmatched)")
    lon: float
    type: str = Field(description="matched, interpolated or unmatched")
    edge_index: int | None = Field(None, description="Index into edges")
    distance_along_edge: float | None = Field(None, description="Fraction (0-1) of the edge before the position")
    distance_from_trace_point: float | None = Field(None, description="Metres from the input point")


class TraceAttributesResponse(BaseModel):
    edges: list[MatchedEdge]
    matched_points: list[MatchedPoint] = Field(description="One per input point, in order")
    shape: str = Field(description="Matched shape, precision-6 encoded polyline (sections concatenated)")
    units: str
    costing: str
    id: str | None = None


