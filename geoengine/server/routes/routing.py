"""The routing endpoints' own parts (their entries: server/endpoints.py): GET /costings, GET
/costing/options/{costing}, POST /admin/speeds, and the error statuses the routing endpoints document."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Query, Request
from pydantic import BaseModel, Field

from geoengine.errors import NotFound
from geoengine.server.deps import require_scope
from geoengine.services.models import COSTING_DESCRIPTIONS, costing_endpoints


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


def costings(engine, _req=None) -> dict:
    return {"costings": [{"costing": c, "endpoints": costing_endpoints(c), "description": COSTING_DESCRIPTIONS[c]}
                         for c in engine.costings()]}


def costing_param(costing: str) -> str:
    return costing


def costing_options(engine, costing: str) -> dict:
    if costing not in engine.costings():
        raise NotFound(f"unknown costing '{costing}'; costings: {', '.join(engine.costings())}")
    return engine.costing_options(costing)


COSTINGS_DOC = {"summary": "The transport modes (costings) and the endpoints that accept each",
                "response_model": CostingsResponse}
OPTIONS_DOC = {"summary": "Option schema of one costing", "response_model": CostingOptionsResponse,
               "responses": {404: {"description": "Unknown costing"}}}
MATCH_ERRORS = {
    400: {"description": "Invalid body: neither or both of shape and encoded_polyline, fewer than 2 points, an "
          "unsupported costing, bad trace_options"},
    422: {"description": "No point is near a road the costing may use, nothing could be matched, or edge_walk "
          "could not follow the edges"},
    503: {"description": "The bundle has no routing graph"},
}
DIRECTIONS_ERRORS = {
    400: {"description": "Invalid waypoints, unsupported profile or language, malformed body"},
    401: {"description": "Missing or invalid credential"},
    422: {"description": "A waypoint has no usable road nearby, or no route joins two waypoints"},
    429: {"description": "Rate limit or daily request pool exhausted"},
}
OPTIMISED_ERRORS = {
    400: {"description": "Fewer than 2 locations, unsupported costing or options, malformed body"},
    422: {"description": "A location cannot be snapped, or the stops cannot all be reached"},
}


# -- POST /admin/speeds: measured speeds for the motor costings (the engine does the work; docs/traffic.md)
class SpeedsInForce(BaseModel):
    generation: int = Field(description="Counts every apply and reset of this bundle's speeds")
    file: str | None = Field(description="The stored speeds (null: the costings' profile speeds, after a reset)")
    source: str | None = Field(description="Where the speeds came from (a path, `<request>`, `<DataFrame>`)")
    sha256: str | None = Field(None, description="SHA-256 of the speed file's bytes")
    form: str | None = Field(None, description="`segment` (OSRM's segment speed file) or `way`")
    rows: int | None = Field(None, description="Rows read")
    edges: int | None = Field(None, description="Directed road edges whose time the speeds change")
    bytes: int | None = Field(None, description="Size of the stored speeds file")
    applied_at: str = Field(description="When they were applied (UTC, ISO 8601)")
    bundle_created: str | None = Field(None, description="The build of the bundle they apply to")


async def speeds_params(request: Request,
                        form: Annotated[Literal["segment", "way"] | None,
                                        Query(description="The file's form (default: from its header or columns)")]
                        = None,
                        reset: Annotated[bool, Query(description="Return to the profile speeds")] = False):
    require_scope(request, "admin")
    return form, None if reset else await request.body()


def speeds(engine, req) -> dict:
    form, body = req
    return engine.reset_speeds() if body is None else engine.apply_speeds(body, form=form, label="<request>")


SPEEDS_DOC = {
    "summary": "Apply measured speeds (traffic)", "response_model": SpeedsInForce,
    "description": "Needs a key with the `admin` scope. The body is a speed file (CSV): OSRM's segment "
    "speed file (`from_osm_node_id,to_osm_node_id,speed_kmh[,rate]`) or the per-way form "
    "(`way_id,speed_kmh[,direction]`). It is checked whole (a bad line is named in a 400 and nothing "
    "is applied), stored beside the bundle, and every worker answers with it from its next request "
    "on. `?reset=true` (no body) returns to the profile speeds. See docs/traffic.md.",
    "responses": {400: {"description": "A bad speed file: the first bad line is named"},
                  403: {"description": "The key lacks the admin scope"}}}
