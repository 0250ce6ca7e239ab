"""POST /v1/routing/directions. Thin: parse, one engine call, return."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from geoengine.engine import Engine
from geoengine.server.deps import get_engine, run_engine
from geoengine.services.directions import DirectionsRequest, DirectionsResponse

router = APIRouter(tags=["Directions"])


@router.post(
    "/v1/routing/directions",
    summary="Turn-by-turn directions between 2 to 25 waypoints",
    response_model=DirectionsResponse,
    response_model_exclude_none=True,
    responses={
        400: {"description": "Invalid waypoints, unsupported profile or language, malformed body"},
        401: {"description": "Missing or invalid credential"},
        422: {"description": "A waypoint has no usable road nearby, or no route joins two waypoints"},
        429: {"description": "Rate limit or daily request pool exhausted"},
    },
)
async def directions(body: DirectionsRequest, request: Request, engine: Engine = Depends(get_engine)):
    return await run_engine(request, engine.directions, body)
