"""The Valhalla dialect (docs/valhalla.md): Valhalla's actions with Valhalla's bodies, one dialect call
each (geoengine.dialects.valhalla); their entries are in server/endpoints.py. POST /route and POST
/isochrone are the spec's endpoints; every action also answers Valhalla's `GET /{action}?json={...}`."""

from __future__ import annotations

import json as jsonlib

from fastapi import Query

from geoengine.dialects import valhalla as V
from geoengine.errors import InvalidRequest
from geoengine.services.matrix import MatrixResponse
from geoengine.services.optimised_route import OptimisedRouteRequest
from geoengine.validation import validate

TAG = "Valhalla dialect"
# the actions counted in the routing quota (their entries' quota class, server/endpoints.py)
ROUTING_ACTIONS = ("route", "isochrone", "sources_to_targets", "optimized_route", "trace_route", "trace_attributes",
                   "expansion")
UNAUTHORIZED_ACTIONS = ("sources_to_targets",)  # the matrix's twin: a missing key is a 401, as on /matrix

_ERRORS = {422: {"description": "A location cannot be snapped, no route, or the trace cannot be matched"},
           503: {"description": "The bundle lacks the stage the action needs"}}


_OK = {"sources_to_targets": {"model": MatrixResponse, "description": "As POST /matrix, but an unreachable pair "
                               "is an object whose time and distance are null"},
       "optimized_route": {"description": "{trip} with trip.locations[].original_index"},
       "trace_route": {"description": "{trip} (one leg per matched section)"},
       "trace_attributes": {"description": "{edges, matched_points, shape, units}; filters include/exclude attributes"},
       "height": {"description": "{shape|encoded_polyline, height} or {..., range_height}"},
       "locate": {"description": "One object per location: input_lat, input_lon, edges, nodes"},
       "expansion": {"description": "GeoJSON FeatureCollection, one LineString per edge"}}
def _optimised(engine, body) -> dict:
    return engine.optimised_route(body)


# (action, body model, dialect call, summary, responses) of the POST actions
POSTS = (
    ("sources_to_targets", V.SourcesToTargetsRequest, V.sources_to_targets,
     "Valhalla matrix: times and distances between sources and targets", _ERRORS),
    # the /optimised_route document: Valhalla's trip (first and last fixed), `optimized_order`, `optimisation`
    ("optimized_route", OptimisedRouteRequest, _optimised, "Valhalla optimized route (first and last location fixed)",
     _ERRORS),
    ("trace_route", V.TraceRequest, V.trace_route, "Valhalla map matching: the matched route as a trip", _ERRORS),
    ("trace_attributes", V.TraceRequest, V.trace_attributes,
     "Valhalla map matching: matched edges (with use) and points", _ERRORS),
    ("height", V.HeightRequest, V.height, "Valhalla elevation: heights along a shape",
     {422: {"description": "The bundle has no DEM for these points"}}),
    ("locate", V.LocateRequest, V.locate, "Valhalla locate: the edges each location snaps to", {503: _ERRORS[503]}),
    ("expansion", V.ExpansionRequest, V.expansion,
     "Valhalla expansion: the edges a search visits (isochrone or route action)", _ERRORS),
)
POSTS = tuple((a, m, fn, summary, {200: _OK[a], **responses}) for a, m, fn, summary, responses in POSTS)


def status_query(verbose: bool = Query(False)) -> bool:
    return verbose


def status(engine, req) -> dict:
    """GET /status (`verbose` parameter) or POST /status (body {verbose})."""
    return V.status(engine, req if isinstance(req, bool) else req.verbose)


# -- GET /{action}?json={...}: Valhalla's query form of every action ------------------------------------
def json_param(params: dict) -> bytes | None:
    """The body of a `GET /{action}?json={body}` whose only parameter is `json` (the hot path and the
    front door answer it as the POST body); None for the route to read."""
    if len(params) != 1 or "json" not in params:
        return None
    return params["json"].encode()


def json_query(json: str | None = Query(None, include_in_schema=False)) -> dict:
    """The FastAPI parse step of `GET /{action}?json=`: the body, a JSON object (else a 400 naming `json`)."""
    if json is None:
        raise InvalidRequest.field("json", "the json query parameter (the request body as JSON) is required")
    try:
        data = jsonlib.loads(json)
    except ValueError as exc:
        raise InvalidRequest.field("json", f"malformed JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidRequest.field("json", "must be a JSON object")
    return data


def _validated(model, fn):
    return lambda engine, data: fn(engine, validate(model, data))


# (action, run) of the GET ?json= forms but GET /route's (its own entry, answered by the fast dispatch)
GET_ACTIONS = (
    ("isochrone", lambda engine, data: engine.isochrone(data)),
    ("optimized_route", _optimised),
    *((a, _validated(m, fn)) for a, m, fn, _s, _r in POSTS if a != "optimized_route"),
)
_BODY_MODELS = {"route": "RouteRequest", "isochrone": "IsochroneRequest", "optimized_route": "OptimisedRouteRequest",
                **{a: m.__name__ for a, m, _fn, _s, _r in POSTS if a != "optimized_route"}}


def get_doc(action: str) -> dict:
    # `json` is the POST body serialised: the document says so with a content-typed parameter
    return dict(summary=f"Valhalla {action} with the body as the json query parameter", responses=_ERRORS,
                openapi_extra={"parameters": [{
                    "name": "json", "in": "query", "required": True,
                    "description": f"The request body as JSON (the body of POST /{action})",
                    "content": {"application/json": {
                        "schema": {"$ref": f"#/components/schemas/{_BODY_MODELS[action]}"}}}}]})
