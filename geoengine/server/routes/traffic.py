"""POST /admin/speeds: measured speeds for the motor costings (the engine does the work; docs/traffic.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from geoengine.server.deps import get_engine, require_scope, run_engine

router = APIRouter(tags=["System"])


class SpeedsInForce(BaseModel):
    generation: int = Field(description="Counts every apply and reset of this bundle's speeds")
    file: str | None = Field(description="The stored speeds (null: the costings' profile speeds, after a reset)")
    source: str | None = Field(description="Where the speeds came from (a path, `<request>`, `<DataFrame>`)")
    sha256: str | None = Field(None, description="SHA-256 of the speed file's bytes")
    form: str | None = Field(None, description="`segment` (OSRM's segment speed file) or `way`")
    rows: int | None = Field(None, description="Rows read")
    edges: int | None = Field(None, description="Directed road edges whose time the speeds change")
    applied_at: str = Field(description="When they were applied (UTC, ISO 8601)")
    bundle_created: str | None = Field(None, description="The build of the bundle they apply to")


@router.post("/admin/speeds", response_model=SpeedsInForce, summary="Apply measured speeds (traffic)",
             description="Needs a key with the `admin` scope. The body is a speed file (CSV): OSRM's segment "
             "speed file (`from_osm_node_id,to_osm_node_id,speed_kmh[,rate]`) or the per-way form "
             "(`way_id,speed_kmh[,direction]`). It is checked whole (a bad line is named in a 400 and nothing "
             "is applied), stored beside the bundle, and every worker answers with it from its next request "
             "on. `?reset=true` (no body) returns to the profile speeds. See docs/traffic.md.",
             responses={400: {"description": "A bad speed file: the first bad line is named"},
                        403: {"description": "The key lacks the admin scope"}})
async def apply_speeds(request: Request,
                       form: Annotated[Literal["segment", "way"] | None,
                                       Query(description="The file's form (default: from its header or columns)")]
                       = None,
                       reset: Annotated[bool, Query(description="Return to the profile speeds")] = False) -> dict:
    require_scope(request, "admin")
    engine = get_engine(request)
    if reset:
        return await run_engine(request, engine.reset_speeds)
    body = await request.body()
    return await run_engine(request, engine.apply_speeds, body, form=form, label="<request>")
