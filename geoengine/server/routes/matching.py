"""POST /map_match and POST /map_match/attributes. Thin: parse, one engine call, return."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from geoengine.engine import Engine
from geoengine.routing.match_models import MapMatchRequest
from geoengine.server.deps import get_engine, run_engine
from geoengine.server.routes.routing import Trip

router = APIRouter(tags=["Map matching"])


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


_ERRORS = {
    400: {"description": "Invalid body: neither or both of shape and encoded_polyline, fewer than 2 points, an "
          "unsupported costing, bad trace_options"},
    422: {"description": "No point is near a road the costing may use, nothing could be matched, or edge_walk "
          "could not follow the edges"},
    503: {"description": "The bundle has no routing graph"},
}


@router.post("/map_match", summary="Match a GPS trace to the roads; the matched route",
             responses={200: {"model": MapMatchResponse}, **_ERRORS})
async def map_match(body: MapMatchRequest, request: Request, engine: Engine = Depends(get_engine)):
    return await run_engine(request, engine.map_match, body)


@router.post("/map_match/attributes", summary="Match a GPS trace to the roads; matched edges and points",
             responses={200: {"model": TraceAttributesResponse}, **_ERRORS})
async def map_match_attributes(body: MapMatchRequest, request: Request, engine: Engine = Depends(get_engine)):
    return await run_engine(request, engine.trace_attributes, body)
