"""POST /optimised_route. Thin: parse, one engine call, return."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from geoengine.engine import Engine
from geoengine.server.deps import get_engine, run_engine
from geoengine.services.optimised_route import OptimisedRouteRequest, OptimisedRouteResponse

router = APIRouter(tags=["Routing"])


@router.post(
    "/optimised_route",
    summary="Best visiting order of the stops (first and last fixed) and the trip in that order",
    response_model=OptimisedRouteResponse,
    response_model_exclude_none=True,
    responses={
        400: {"description": "Fewer than 2 locations, unsupported costing or options, malformed body"},
        422: {"description": "A location cannot be snapped, or the stops cannot all be reached"},
    },
)
async def optimised_route(body: OptimisedRouteRequest, request: Request, engine: Engine = Depends(get_engine)):
    return await run_engine(request, engine.optimised_route, body)
