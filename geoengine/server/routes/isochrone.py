"""POST /isochrone. Thin: parse, one engine call, return."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from geoengine.engine import Engine
from geoengine.server.deps import get_engine, run_engine
from geoengine.services.isochrone import IsochroneRequest, IsochroneResponse

router = APIRouter(tags=["Routing"])


@router.post("/isochrone", summary="Reachability contours (time or distance) around one location",
             responses={200: {"model": IsochroneResponse},
                        400: {"description": "Not exactly one location, unknown costing or option, bad contours"},
                        422: {"description": "The location cannot be snapped to a road of the costing"},
                        503: {"description": "The bundle has no routing graph"}})
async def isochrone(body: IsochroneRequest, request: Request, engine: Annotated[Engine, Depends(get_engine)]):
    return await run_engine(request, engine.isochrone, body)
