"""The Valhalla dialect (docs/valhalla.md): Valhalla's actions with Valhalla's bodies. Thin: parse, one
dialect call (geoengine.dialects.valhalla), return. POST /route and POST /isochrone are the
spec's endpoints (routes/routing.py, routes/isochrone.py); here they also answer Valhalla's
`GET /{action}?json={...}` form, as every other action does."""

from __future__ import annotations

import json as jsonlib

from fastapi import APIRouter, Depends, Query, Request

from geoengine.dialects import valhalla as V
from geoengine.engine import Engine
from geoengine.errors import InvalidRequest
from geoengine.server.deps import get_engine, run_engine
from geoengine.services.matrix import MatrixResponse
from geoengine.services.optimised_route import OptimisedRouteRequest
from geoengine.validation import validate

router = APIRouter(tags=["Valhalla dialect"])

_ERRORS = {422: {"description": "A location cannot be snapped, no route, or the trace cannot be matched"},
           503: {"description": "The bundle lacks the stage the action needs"}}


@router.post("/sources_to_targets", summary="Valhalla matrix: times and distances between sources and targets",
             responses={200: {"model": MatrixResponse, "description": "As POST /matrix, but an unreachable pair is "
                              "an object whose time and distance are null"}, **_ERRORS})
async def sources_to_targets(body: V.SourcesToTargetsRequest, request: Request, engine: Engine = Depends(get_engine)):
    return await run_engine(request, V.sources_to_targets, engine, body)


@router.post("/optimized_route", summary="Valhalla optimized route (first and last location fixed)",
             responses={200: {"description": "{trip} with trip.locations[].original_index"}, **_ERRORS})
async def optimized_route(body: OptimisedRouteRequest, request: Request, engine: Engine = Depends(get_engine)):
    return await run_engine(request, V.optimized_route, engine, body)


@router.post("/trace_route", summary="Valhalla map matching: the matched route as a trip",
             responses={200: {"description": "{trip} (one leg per matched section)"}, **_ERRORS})
async def trace_route(body: V.TraceRequest, request: Request, engine: Engine = Depends(get_engine)):
    return await run_engine(request, V.trace_route, engine, body)


@router.post("/trace_attributes", summary="Valhalla map matching: matched edges (with use) and points",
             responses={200: {"description": "{edges, matched_points, shape, units}; filters include/exclude "
                              "attributes"}, **_ERRORS})
async def trace_attributes(body: V.TraceRequest, request: Request, engine: Engine = Depends(get_engine)):
    return await run_engine(request, V.trace_attributes, engine, body)


@router.post("/height", summary="Valhalla elevation: heights along a shape",
             responses={200: {"description": "{shape|encoded_polyline, height} or {..., range_height}"},
                        422: {"description": "The bundle has no DEM for these points"}})
async def height(body: V.HeightRequest, request: Request, engine: Engine = Depends(get_engine)):
    return await run_engine(request, V.height, engine, body)


@router.post("/locate", summary="Valhalla locate: the edges each location snaps to",
             responses={200: {"description": "One object per location: input_lat, input_lon, edges, nodes"},
                        503: _ERRORS[503]})
async def locate(body: V.LocateRequest, request: Request, engine: Engine = Depends(get_engine)):
    return await run_engine(request, V.locate, engine, body)


@router.post("/expansion", summary="Valhalla expansion: the edges a search visits (isochrone or route action)",
             responses={200: {"description": "GeoJSON FeatureCollection, one LineString per edge"}, **_ERRORS})
async def expansion(body: V.ExpansionRequest, request: Request, engine: Engine = Depends(get_engine)):
    return await run_engine(request, V.expansion, engine, body)


@router.get("/status", summary="Valhalla status: version, data time, available actions")
def status_get(verbose: bool = Query(False), engine: Engine = Depends(get_engine)):
    return V.status(engine, verbose)


@router.post("/status", summary="Valhalla status (body {verbose})")
def status_post(body: V.StatusRequest, engine: Engine = Depends(get_engine)):
    return V.status(engine, body.verbose)


# -- GET /{action}?json={...}: Valhalla's query form of every action ------------------------------------
def json_param(params: dict) -> bytes | None:
    """The body of a `GET /{action}?json={body}` whose only parameter is `json` (the hot path and the
    front door answer it as the POST body); None for the route to read."""
    if len(params) != 1 or "json" not in params:
        return None
    return params["json"].encode()


def _parse_json(raw: str | None) -> dict:
    if raw is None:
        raise InvalidRequest.field("json", "the json query parameter (the request body as JSON) is required")
    try:
        data = jsonlib.loads(raw)
    except ValueError as exc:
        raise InvalidRequest.field("json", f"malformed JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidRequest.field("json", "must be a JSON object")
    return data


def _get_action(action: str):
    async def handler(request: Request, json: str | None = Query(None, include_in_schema=False),
                      engine: Engine = Depends(get_engine)):
        data = _parse_json(json)
        if action == "route":
            return await run_engine(request, engine.route, data)
        if action == "isochrone":
            return await run_engine(request, engine.isochrone, data)
        if action == "optimized_route":
            return await run_engine(request, V.optimized_route, engine, data)
        model, fn = _GET_MODELS[action]
        return await run_engine(request, fn, engine, validate(model, data))

    handler.__name__ = f"{action}_get"
    return handler


_GET_MODELS = {
    "sources_to_targets": (V.SourcesToTargetsRequest, V.sources_to_targets),
    "trace_route": (V.TraceRequest, V.trace_route),
    "trace_attributes": (V.TraceRequest, V.trace_attributes),
    "height": (V.HeightRequest, V.height),
    "locate": (V.LocateRequest, V.locate),
    "expansion": (V.ExpansionRequest, V.expansion),
}

_BODY_MODELS = {"route": "RouteRequest", "isochrone": "IsochroneRequest", "optimized_route": "OptimisedRouteRequest",
                **{a: m.__name__ for a, (m, _fn) in _GET_MODELS.items()}}

for _action in ("route", "isochrone", "optimized_route", *_GET_MODELS):
    # `json` is the POST body serialised: the document says so with a content-typed parameter
    router.add_api_route(f"/{_action}", _get_action(_action), methods=["GET"],
                         summary=f"Valhalla {_action} with the body as the json query parameter",
                         responses=_ERRORS,
                         openapi_extra={"parameters": [{
                             "name": "json", "in": "query", "required": True,
                             "description": f"The request body as JSON (the body of POST /{_action})",
                             "content": {"application/json": {
                                 "schema": {"$ref": f"#/components/schemas/{_BODY_MODELS[_action]}"}}}}]})
