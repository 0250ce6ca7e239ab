"""GET /elevation and POST /elevation: parse, one engine call, format (docs/elevation.md; their entries:
server/endpoints.py). A plainly valid request of either is answered by the fast dispatch, which parses a
POST body with pydantic-core (Rust: about twice as fast as `json.loads` on the 67 kB of a 2,000-point
shape); the FastAPI routes give the 400s."""

from __future__ import annotations

import pydantic_core

from geoengine.server.framing import body_answer
from geoengine.server.routes.search import REQUIRED, Param, fastapi_step, plain_step
from geoengine.services.elevation import (
    ElevationPoint,
    ElevationRequest,
    HeightResponse,
    RangeHeightResponse,
    point_document,
)

_ERRORS = {
    400: {"description": "Coordinates out of range, both or neither of shape and encoded_polyline, a malformed "
                         "polyline, or more points than the limit (GEOENGINE_ELEVATION_MAX_POINTS, default 2000)"},
    422: {"description": "Outside the DEM coverage of the bundle (or the bundle has no DEM)"},
}


# Both run on the event loop: the call takes well under a millisecond (a compiled kernel over
# memory-mapped tiles, 2,000 points in about 0.15 ms), less than the hop to the thread pool.
TAG = "Elevation"
GET_DOC = {"summary": "Elevation of one point", "response_model": ElevationPoint,
           "responses": {400: {"description": "Latitude or longitude missing or out of range"},
                         422: {"description": "The point is outside the DEM coverage (or the DEM has only voids there)"}}}
POST_DOC = {"summary": "Elevation of a list of points or an encoded shape", "responses": _ERRORS,
            "response_model": HeightResponse | RangeHeightResponse,
            "description": "`height` per point, or with `range: true` only `range_height` pairs "
            "[cumulative great-circle distance m, elevation m]. Points outside coverage are null."}


_FINITE = {"allow_inf_nan": False}
POINT = (Param("lat", float, REQUIRED, -90, 90, "Latitude in degrees", _FINITE),
         Param("lon", float, REQUIRED, -180, 180, "Longitude in degrees", _FINITE))
point_params, _plain_point = fastapi_step(POINT), plain_step(POINT)


def plain_point(params: dict | None) -> dict | None:
    """lat and lon of a GET /elevation with exactly `lat` and `lon` as plain decimals within range; None
    for the route to answer (validation, problem bodies)."""
    return None if params is None or len(params) != 2 else _plain_point(params)


def point(engine, req: dict) -> dict:
    return point_document(engine, req["lat"], req["lon"])


def profile_answer(state, body: ElevationRequest):
    """POST /elevation's answer, serialised directly (the declared models document it): NaN, a missing
    height, becomes null."""
    return body_answer(pydantic_core.to_json(state.engine.elevation_request(body), inf_nan_mode="null"))
