"""POST /isochrone: where one location reaches within given times or distances, as a GeoJSON
FeatureCollection (the reach search and contour kernels are in geoengine.routing.isochrone).

Library: `engine.isochrone(locations=[...], contours=[{"time": 10}])`; `engine.isochrone_reach(...)`
returns the per-edge reach arrays.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from geoengine.errors import InvalidRequest
from geoengine.routing.isochrone import BUFFER_M, Reach, contour_polygons, reach_grid, search, to_lonlat
from geoengine.services.models import IsochroneCosting, Location, costing_validator

MAX_CONTOURS = 4
MAX_TIME_MIN = 120.0
MAX_DISTANCE_KM = 200.0
DEFAULT_COLORS = ("bf4040", "bfaa40", "40bf80", "406abf")  # smallest contour first


# ----------------------------------------------------------------------------------------------------
# Request model
# ----------------------------------------------------------------------------------------------------
class Contour(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    time: float | None = Field(None, gt=0, le=MAX_TIME_MIN, description=f"Minutes, > 0 and <= {MAX_TIME_MIN:g}")
    distance: float | None = Field(None, gt=0, le=MAX_DISTANCE_KM,
                                   description=f"Kilometres, > 0 and <= {MAX_DISTANCE_KM:g}")
    color: str | None = Field(None, pattern=r"^#?[0-9a-fA-F]{6}$", description="Hex colour rrggbb (with or without #)")

    @model_validator(mode="after")
    def _one_metric(self):
        if (self.time is None) == (self.distance is None):
            raise ValueError("give exactly one of time (minutes) or distance (km)")
        return self

    @property
    def metric(self) -> str:
        return "time" if self.time is not None else "distance"

    @property
    def value(self) -> float:
        return float(self.time if self.time is not None else self.distance)

    @property
    def limit(self) -> float:
        """Seconds or metres."""
        return self.time * 60.0 if self.time is not None else self.distance * 1000.0


class IsochroneRequest(BaseModel):
    """POST /isochrone."""

    model_config = ConfigDict(extra="ignore", strict=True)

    locations: list[Location] = Field(min_length=1, max_length=1, description="Exactly one location")
    costing: IsochroneCosting = "auto"
    costing_options: dict[str, Any] | None = Field(
        None, description="Options of the costing, flat or under the costing key; see GET /costing/options/{costing}")
    contours: list[Contour] = Field(min_length=1, max_length=MAX_CONTOURS,
                                    description=f"1 to {MAX_CONTOURS} contours, each by time (minutes) or distance (km)")
    polygons: bool = Field(True, description="(Multi)Polygon features; false gives (Multi)LineString outer rings")
    denoise: Annotated[float, Field(ge=0, le=1)] = Field(
        1.0, description="Drop parts smaller than denoise x the largest part of the same contour (1: largest only)")
    generalize: Annotated[float, Field(ge=0)] | None = Field(
        None, description="Douglas-Peucker tolerance in metres (default: half the grid cell)")
    show_locations: bool = Field(True, description="Add the input and snapped locations as Point features")
    date_time: dict[str, Any] | None = Field(
        None, description="{type: 0 current, 1 depart_at, 2 arrive_by, 3 invariant; value: 'YYYY-MM-DDTHH:MM'}: "
        "its quarter hour selects the time-of-day profile speeds (docs/traffic.md)")
    id: str | None = Field(None, description="Echoed in the response")

    _costing_known = costing_validator("isochrone")


def _geojson(geom, polygons: bool) -> dict:
    """GeoJSON geometry of a (Multi)Polygon: all coordinates rounded and listed in one go."""
    import shapely

    _typ, coords, offs = shapely.to_ragged_array([geom])
    pts = np.round(coords[:, :2], 6).tolist()
    ring_off = offs[0].tolist()
    rings = [pts[a:b] for a, b in zip(ring_off[:-1], ring_off[1:], strict=True)]
    if geom.geom_type == "MultiPolygon":
        poly_off = offs[1].tolist()
        parts = [rings[a:b] for a, b in zip(poly_off[:-1], poly_off[1:], strict=True)]
    else:
        parts = [rings]
    if polygons:
        if len(parts) == 1:
            return {"type": "Polygon", "coordinates": parts[0]}
        return {"type": "MultiPolygon", "coordinates": parts}
    lines = [p[0] for p in parts]
    if len(lines) == 1:
        return {"type": "LineString", "coordinates": lines[0]}
    return {"type": "MultiLineString", "coordinates": lines}


def _color(c: Contour, i: int) -> str:
    if c.color:
        return "#" + c.color.lstrip("#").lower()
    return "#" + DEFAULT_COLORS[i % len(DEFAULT_COLORS)]


# ----------------------------------------------------------------------------------------------------
# Entry points
# ----------------------------------------------------------------------------------------------------
def reach(router, lon: float, lat: float, costing: str = "auto", costing_options=None, *,
          metric: str = "time", limit: float = 600.0) -> Reach:
    """Library form for notebooks: the per-edge reach of one location within `limit` seconds
    (metric 'time') or metres (metric 'distance')."""
    if metric not in ("time", "distance"):
        raise InvalidRequest.field("metric", "must be 'time' or 'distance'")
    if not (limit > 0 and math.isfinite(limit)):
        raise InvalidRequest.field("limit", "must be a positive number")
    from geoengine.validation import validate

    req = validate(IsochroneRequest, {"locations": [{"lon": lon, "lat": lat}], "costing": costing,
                                      "contours": [{"time": 1.0}]})
    options = router.parse_options(req.costing, costing_options)
    prof = router.profile(req.costing, options)
    cands = router.candidates(prof, req.locations[0], 0)
    return search(prof, cands, metric, float(limit))


def _selection(date_time):
    """The time-of-day bucket of an isochrone's date_time: the given time's quarter hour (arrive_by too;
    the contours are still those reached from the location)."""
    from geoengine.services.route_options import selection

    return selection(date_time)


def isochrone(router, req: IsochroneRequest) -> dict:
    """The GeoJSON FeatureCollection of POST /isochrone (see docs/isochrone.md)."""
    options = router.parse_options(req.costing, req.costing_options)
    prof = router.profile(req.costing, options, bucket=_selection(req.date_time))
    loc = req.locations[0]
    cands = router.candidates(prof, loc, 0)
    graph = router.graph
    lon0, lat0 = float(loc.lon), float(loc.lat)
    buffer_m = BUFFER_M[req.costing]
    features: list[dict] = []
    # contours in the response: largest first (Valhalla's order), so smaller ones draw on top
    order = sorted(range(len(req.contours)), key=lambda i: (req.contours[i].metric != "time", -req.contours[i].limit))
    by_metric: dict[str, Any] = {}
    for metric in ("time", "distance"):
        limits = [c.limit for c in req.contours if c.metric == metric]
        if not limits:
            continue
        r = search(prof, cands, metric, max(limits))
        by_metric[metric] = (r, reach_grid(graph, r, buffer_m, lon0, lat0))
    for i in order:
        c = req.contours[i]
        r, g = by_metric[c.metric]
        color = _color(c, i)
        geom = None
        if g is not None:
            grid, x0, y0, cell, kx, ky = g
            tol = cell / 2.0 if req.generalize is None else float(req.generalize)
            geom = contour_polygons(grid, c.limit, x0, y0, cell, req.denoise, tol)
            if geom is not None and not geom.is_empty:
                geom = to_lonlat(geom, lon0, lat0, kx, ky)
        if geom is None or geom.is_empty:
            geometry = ({"type": "Polygon", "coordinates": []} if req.polygons
                        else {"type": "LineString", "coordinates": []})
        else:
            geometry = _geojson(geom, req.polygons)
        props = {"contour": c.value, "metric": c.metric, "color": color, "fill": color, "fillColor": color,
                 "fill-opacity": 0.33, "fillOpacity": 0.33, "opacity": 0.33}
        features.append({"type": "Feature", "properties": props, "geometry": geometry})
    if req.show_locations:
        # the location points come FIRST: clients that pair the contour features with the requested
        # intervals by position from the end (routingpy's Valhalla client) then pair them correctly
        points = [{"type": "Feature", "properties": {"location_index": 0, "type": "input"},
                   "geometry": {"type": "Point", "coordinates": [round(lon0, 6), round(lat0, 6)]}}]
        pts = np.unique(np.round(np.column_stack([cands["lon"], cands["lat"]]), 6), axis=0)
        points += [{"type": "Feature", "properties": {"location_index": 0, "type": "snapped"},
                    "geometry": {"type": "Point", "coordinates": [lo, la]}} for lo, la in pts.tolist()]
        features = points + features
    out: dict[str, Any] = {"type": "FeatureCollection", "features": features}
    if req.id is not None:
        out["id"] = req.id
    return out


def warm(router) -> None:
    """Load the isochrone kernels (and the car profile's arc metrics) now rather than on the first
    request: one tiny time and distance isochrone at the first junction of the car network."""
    prof = router.profile("auto")
    usable = np.flatnonzero(prof.usable)
    if usable.size == 0:
        return
    e = int(usable[0])
    node = int(router.graph.edge_src[e])
    lon, lat = float(router.graph.node_lon[node]), float(router.graph.node_lat[node])
    req = IsochroneRequest.model_validate({"locations": [{"lon": lon, "lat": lat}],
                                           "contours": [{"time": 1}, {"distance": 0.5}]})
    isochrone(router, req)


# -- the document's schema (OpenAPI) -------------------------------------------------------------------------
class IsoFeature(BaseModel):
    type: Literal["Feature"]
    properties: dict[str, Any] = Field(
        description="Contours: contour (minutes or km), metric (time|distance), color, fill, fillColor, "
        "fill-opacity, fillOpacity, opacity. Locations: location_index, type (input|snapped)")
    geometry: dict[str, Any] = Field(
        description="GeoJSON Polygon/MultiPolygon (polygons=true) or LineString/MultiLineString (outer rings), "
        "Point for locations; [lon, lat]")


class IsochroneResponse(BaseModel):
    type: Literal["FeatureCollection"]
    features: list[IsoFeature] = Field(description="One feature per contour, largest first, then the locations")
    id: str | None = None


