"""POST /route, POST /matrix, GET /costings, GET /costing/options/{costing}. Thin: parse, one engine
call, return."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from geoengine.engine import Engine
from geoengine.routing.models import MatrixRequest, MatrixResponse, RouteRequest
from geoengine.server.deps import get_engine, run_engine

router = APIRouter(tags=["Routing"])


class Maneuver(BaseModel):
    type: str = Field(description="Maneuver name, e.g. start, right, roundabout_enter, destination")
    type_code: int = Field(description="Valhalla maneuver type number")
    instruction: str | None = Field(None, description="Text instruction (directions_type instructions)")
    street_names: list[str] = []
    length: float = Field(description="Length in the requested units")
    time: float = Field(description="Seconds")
    begin_shape_index: int
    end_shape_index: int
    bearing_before: float | None = None
    bearing_after: float | None = None
    roundabout_exit_count: int | None = None


class Summary(BaseModel):
    time: float = Field(description="Seconds, waiting times included")
    length: float = Field(description="Length in the requested units")
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
    id: str | None = None


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


COSTING_INFO = {
    "auto": (["/route", "/matrix", "/optimised_route", "/isochrone", "/map_match"], "Fastest car route"),
    "auto_shorter": (["/route"], "Shortest car route"),
    "bicycle": (["/route", "/matrix", "/optimised_route", "/isochrone", "/map_match"], "Bicycle"),
    "bus": (["/route", "/map_match"], "Bus"),
    "pedestrian": (["/route", "/matrix", "/optimised_route", "/isochrone", "/map_match"], "Walking"),
    "truck": (["/route", "/matrix", "/optimised_route", "/isochrone"], "Truck / heavy goods vehicle"),
    "motorcycle": (["/route", "/matrix", "/isochrone", "/map_match"], "Motorcycle"),
    "motor_scooter": (["/route", "/isochrone"], "Scooter"),
    "taxi": (["/route"], "Taxi"),
}


@router.get("/costings", summary="The transport modes (costings) and the endpoints that accept each",
            response_model=CostingsResponse)
def costings(engine: Engine = Depends(get_engine)):
    return {"costings": [{"costing": c, "endpoints": COSTING_INFO[c][0], "description": COSTING_INFO[c][1]}
                         for c in engine.costings()]}


@router.get("/costing/options/{costing}", summary="Option schema of one costing",
            response_model=CostingOptionsResponse, responses={404: {"description": "Unknown costing"}})
def costing_options(costing: str, engine: Engine = Depends(get_engine)):
    from geoengine.errors import NotFound

    if costing not in engine.costings():
        raise NotFound(f"unknown costing '{costing}'; costings: {', '.join(engine.costings())}")
    return engine.costing_options(costing)
