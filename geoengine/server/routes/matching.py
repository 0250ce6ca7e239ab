"""POST /map_match and POST /map_match/attributes. Thin: parse, one engine call, return."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from geoengine.engine import Engine
from geoengine.server.deps import get_engine, run_engine
from geoengine.services.matching import MapMatchRequest, MapMatchResponse, TraceAttributesResponse

router = APIRouter(tags=["Map matching"])


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
