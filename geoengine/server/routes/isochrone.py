"""POST /isochrone. Thin: parse, one engine call, return."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from geoengine.engine import Engine
from geoengine.routing.isochrone import IsochroneRequest
from geoengine.server.deps import get_engine, run_engine

router = APIRouter(tags=["Routing"])


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


@router.post("/isochrone", summary="Reachability contours (time or distance) around one location",
             responses={200: {"model": IsochroneResponse},
                        400: {"description": "Not exactly one location, unknown costing or option, bad contours"},
                        422: {"description": "The location cannot be snapped to a road of the costing"},
                        503: {"description": "The bundle has no routing graph"}})
async def isochrone(body: IsochroneRequest, request: Request, engine: Annotated[Engine, Depends(get_engine)]):
    return await run_engine(request, engine.isochrone, body)
