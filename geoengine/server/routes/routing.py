"""POST /route, POST /matrix, GET /costings, GET /costing/options/{costing}. Thin: parse, one engine
call, return."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from geoengine.engine import Engine
from geoengine.server.deps import get_engine, run_engine
from geoengine.services.documents.trip import RouteResponse
from geoengine.services.matrix import MatrixRequest, MatrixResponse
from geoengine.services.models import COSTING_DESCRIPTIONS, costing_endpoints
from geoengine.services.route import RouteRequest

router = APIRouter(tags=["Routing"])


class CostingEntry(BaseModel):
    costing: str
    endpoints: list[str]
    description: str


class CostingsResponse(BaseModel):
    costings: list[CostingEntry]


class CostingOptionsResponse(BaseModel):
    costing: str
    options: dict[str, Any] = Field(description="{type: object, properties: {name: {type, minimum, maximum, default, description}}}")
    usage: str


@router.post("/route", summary="Turn-by-turn route between two or more locations",
             responses={200: {"model": RouteResponse}, 422: {"description": "A location cannot be snapped (the detail names its index) or no route exists"}})
async def route(body: RouteRequest, request: Request, engine: Engine = Depends(get_engine)):
    return await run_engine(request, engine.route, body)


@router.post("/matrix", summary="Many-to-many travel times and distances",
             responses={200: {"model": MatrixResponse}, 422: {"description": "A location cannot be snapped"},
                        503: {"description": "The bundle has no routing graph"}})
async def matrix(body: MatrixRequest, request: Request, engine: Engine = Depends(get_engine)):
    return await run_engine(request, engine.matrix_request, body)


@router.get("/costings", summary="The transport modes (costings) and the endpoints that accept each",
            response_model=CostingsResponse)
def costings(engine: Engine = Depends(get_engine)):
    return {"costings": [{"costing": c, "endpoints": costing_endpoints(c), "description": COSTING_DESCRIPTIONS[c]}
                         for c in engine.costings()]}


@router.get("/costing/options/{costing}", summary="Option schema of one costing",
            response_model=CostingOptionsResponse, responses={404: {"description": "Unknown costing"}})
def costing_options(costing: str, engine: Engine = Depends(get_engine)):
    from geoengine.errors import NotFound

    if costing not in engine.costings():
        raise NotFound(f"unknown costing '{costing}'; costings: {', '.join(engine.costings())}")
    return engine.costing_options(costing)
