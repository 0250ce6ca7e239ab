"""Every endpoint of the server, each declared once in `TABLE`; the FastAPI routes, and so /openapi.json,
are generated from it (`router`), and the one fast dispatcher reads it (server/dispatch.py: `candidates`).

An entry gives the path and methods; the FastAPI parse step (`route`: a function whose parameters
FastAPI validates and documents, returning the typed request; its refusals are the 400 problem bodies)
and the fast one (`parse`: path parameters, query string, body and headers to the same typed request,
or None: the FastAPI route then decides); the engine call with its formatter (`run`, to a document, or
`call`, to a framed answer, server/framing.py); whether it may run on the event loop (`inline`: else
the thread pool with GEOENGINE_REQUEST_TIMEOUT); its documentation (`tag`, `doc`: the summary,
description and responses, `model`: the 200 response model); and what admission reads of a path
(`classify`): the quota class the gateway counts it in, the publishable-key scope that may call it,
whether a missing key is a 401 (else 403) and the bundle group whose damage makes it a 503. The gateway
keeps no path list: this module hands it `path_class` (gateway/keys.py `classify_paths`).

The fast dispatcher (server/dispatch.py) reads this table and nothing else: it answers every entry with
a `parse` step, below ASGI (server/protocol.py) those whose request is inline and needs no ASGI scope.
tests/server/test_endpoint_table.py walks the table against the routes.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import anyio
from fastapi import APIRouter, Depends
from fastapi import Request as HttpRequest
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.responses import Response
from starlette.routing import Match, compile_path

from geoengine import gateway
from geoengine.dialects import valhalla as V
from geoengine.errors import BackendTimeout, GeoengineError
from geoengine.server.framing import Answer, error_answer, json_answer, send_answer
from geoengine.server.routes import elevation as EL
from geoengine.server.routes import nominatim as NO
from geoengine.server.routes import osrm as OS
from geoengine.server.routes import photon as PH
from geoengine.server.routes import routing as RO
from geoengine.server.routes import search as SE
from geoengine.server.routes import system as SY
from geoengine.server.routes import tiles as TI
from geoengine.server.routes import valhalla as VA
from geoengine.services.directions import DirectionsRequest, DirectionsResponse
from geoengine.services.documents.trip import RouteResponse
from geoengine.services.elevation import ElevationRequest
from geoengine.services.isochrone import IsochroneRequest, IsochroneResponse
from geoengine.services.matching import MapMatchRequest, MapMatchResponse, TraceAttributesResponse
from geoengine.services.matrix import MatrixRequest, MatrixResponse
from geoengine.services.optimised_route import OptimisedRouteRequest, OptimisedRouteResponse
from geoengine.services.route import RouteRequest


class Request(NamedTuple):
    """What a fast parse step reads: the path's parameters, the query string, the body (POST), the headers
    (a named tuple: made for every request the dispatcher reads; 0.26 us against a frozen dataclass's
    0.65)."""

    params: tuple
    query: bytes
    body: bytes | None
    headers: list
    scope: dict | None = None  # the ASGI scope (inside ASGI), None below ASGI


def _always(req) -> bool:
    return True


def _never(req) -> bool:
    return False


@dataclass(frozen=True)
class Endpoint:
    name: str
    path: str  # as FastAPI declares it
    methods: tuple[str, ...]
    run: Callable | None = None  # (engine, typed request) -> document
    call: Callable | None = None  # (app state, typed request) -> framed answer; default: `run`'s document as JSON
    route: Callable | None = None  # the FastAPI parse step -> typed request (None: no parameters)
    parse: Callable[[Request], object | None] | None = None  # the fast parse step (None: FastAPI only)
    match: Callable[[str], tuple | None] | None = None  # path -> path parameters (default: the path exactly)
    inline: Callable[[object], bool] = _always
    quota: str | Callable[[str], str] = "non_tile"  # tile | non_tile | routing, or per path (gateway/keys.py)
    web: str | Callable[[str], str | None] | None = None  # the publishable-key scope that may call it (tiles, search)
    unauthorized: bool | Callable[[str], bool] = False  # a missing or bad key is a 401 (the spec's listings), else 403
    model: object = None  # the 200 response model documented (or `response_model` in `doc`: checked too)
    below_asgi: bool = True  # answered below ASGI too (False: it needs the ASGI scope, or is never inline)
    cached: bool = False  # answers kept by path and query string (server/answers.py)
    on_error: Callable[[GeoengineError, object], Answer] = lambda exc, req: error_answer(exc)
    when: Callable[[dict], bool] | None = None  # scope -> whether the route takes it (paths two APIs share)
    tag: str = ""
    doc: dict = field(default_factory=dict)  # add_api_route's summary, description, responses, ...
    paths: tuple = ()  # several routes of one entry: (path, route, doc) each (default: path, route, doc)

    def quota_of(self, path: str) -> str:
        """The quota class of one of the entry's paths (documented as `x-quota` in /openapi.json)."""
        return _of(self.quota, path)

    def __post_init__(self):
        if self.call is None:
            object.__setattr__(self, "call", _doc(self.run))
        if self.match is None and self.parse is not None:
            object.__setattr__(self, "match", lambda p, path=self.path: () if p == path else None)


# ---------------------------------------------------------------------------------------- helpers
def _of(value, path: str):
    """An entry's attribute for one of its paths: the value, or the value a per-path function gives."""
    return value(path) if callable(value) else value


def _doc(fn):
    """A document-returning call as an answer: its domain errors as problem bodies."""
    def call(state, request):
        try:
            doc = fn(state.engine, request)
        except GeoengineError as exc:
            return error_answer(exc)
        return None if doc is None else json_answer(doc)

    return call


def _query(req: Request) -> dict | None:
    return SE.plain_query(req.query)


def _model(model):
    """A fast parse step: the JSON body as `model`, or None (the FastAPI route gives the 400)."""
    def parse(req: Request):
        try:
            return model.model_validate_json(req.body)
        except (ValidationError, ValueError):
            return None

    return parse


def _body(model):
    """A FastAPI parse step: the request body as `model`."""
    def parse(body):
        return body

    parse.__signature__ = inspect.Signature([inspect.Parameter("body", inspect.Parameter.KEYWORD_ONLY,
                                                               annotation=model)])
    return parse


def _call(name: str, keywords: bool = False):
    """`engine.<name>(request)` as a run step (`keywords`: the request a dict of the call's keywords)."""
    if keywords:
        return lambda engine, kw: getattr(engine, name)(**kw)
    return lambda engine, req: getattr(engine, name)(req)


def _cheap_route(req) -> bool:
    return not isinstance(req, dict) and len(req.locations) <= 2 and not req.alternates and not req.avoid_polygons


def _post(name: str, path: str, model, run, tag: str, summary: str, responses: dict, quota="routing",
          out=None, unauthorized=False, **doc) -> Endpoint:
    """A POST endpoint of a JSON body, answered in the thread pool."""
    return Endpoint(name, path, ("POST",), run, route=_body(model), inline=_never, quota=quota, model=out, tag=tag,
                    unauthorized=unauthorized, doc={"summary": summary, "responses": responses, **doc})


def _get_action(action: str, run) -> Endpoint:
    """Valhalla's `GET /{action}?json={body}` (FastAPI only; GET /route's fast form is its own entry)."""
    return Endpoint(f"GET /{action}?json=", f"/{action}", ("GET",), run, route=VA.json_query, inline=_never,
                    quota="routing" if action in VA.ROUTING_ACTIONS else "non_tile", tag=VA.TAG, doc=VA.get_doc(action),
                    unauthorized=action in VA.UNAUTHORIZED_ACTIONS)


# ---------------------------------------------------------------------------------------- fast parse steps
def _osrm_parse(req: Request):
    query = _query(req)
    return None if query is None else (*req.params, query)


def _valhalla_get(req: Request):
    query = _query(req)
    body = None if query is None else VA.json_param(query)
    return None if body is None else _model(RouteRequest)(Request(req.params, b"", body, req.headers))


def _tile_match(p: str):
    if not p.startswith("/tiles/"):
        return None
    parts = p[7:].split("/")
    return tuple(parts) if len(parts) == 4 and all(parts) else None


def _tile_parse(req: Request):
    accept = inm = None
    for name, value in req.headers:
        if name == b"accept-encoding":
            accept = value.decode("latin-1")
        elif name == b"if-none-match":
            inm = value.decode("latin-1")
    return (*req.params, accept, inm)


def _meta_match(p: str):
    if p == "/sources":
        return (None,)
    if p.startswith("/tiles/") and p.count("/") == 2 and len(p) > 7:
        return (p[7:],)
    return None


def _meta_parse(req: Request):
    if req.query or req.scope is None:
        return None
    return req.params[0], TI.base_url(HttpRequest(req.scope))


def _search(fn):
    def parse(req: Request):
        params = _query(req)
        return None if params is None else fn(params)

    return parse


# ---------------------------------------------------------------------------------------- the table
_R, _S, _T = "Routing", "Search", "Tiles"
TABLE: tuple[Endpoint, ...] = (
    Endpoint("GET /health", "/health", ("GET",), SY.health_doc, parse=lambda req: None if req.query else {},
             tag="System", doc={"summary": "Liveness check", "response_model": SY.Health}),
    # the shared paths first: /search and /status with Nominatim's `format` are Nominatim's (`when`)
    Endpoint("GET /search|/reverse (Nominatim)", "/reverse", ("GET",), call=NO.call, route=NO.request,
             match=lambda p: (p,) if p in ("/search", "/reverse") else None, parse=NO.parse,
             when=NO.takes, web="search", tag=NO.TAG, doc=NO.REVERSE_DOC, paths=(("/reverse", NO.request, NO.REVERSE_DOC),
                                                                    ("/search", NO.request, NO.HIDDEN))),
    Endpoint("GET /lookup|/details|/status (Nominatim)", "/lookup", ("GET",), call=NO.call, route=NO.request,
             when=NO.takes, web=lambda p: None if p == "/status" else "search", tag=NO.TAG,
             paths=(("/lookup", NO.request, NO.LOOKUP_DOC),
                                               ("/details", NO.request, NO.DETAILS_DOC),
                                               ("/status", NO.request, NO.HIDDEN))),
    Endpoint("POST /route", "/route", ("POST",), _call("route"), route=_body(RouteRequest),
             parse=_model(RouteRequest), inline=_cheap_route, quota="routing", model=RouteResponse, tag=_R,
             doc={"summary": "Turn-by-turn route between two or more locations", "responses": {422: {
                 "description": "A location cannot be snapped (the detail names its index) or no route exists"}}}),
    Endpoint("POST /matrix", "/matrix", ("POST",), _call("matrix_request"),
             route=_body(MatrixRequest), parse=_model(MatrixRequest), inline=_never, quota="routing", unauthorized=True,
             model=MatrixResponse, below_asgi=False, tag=_R,
             doc={"summary": "Many-to-many travel times and distances",
                  "responses": {422: {"description": "A location cannot be snapped"},
                                503: {"description": "The bundle has no routing graph"}}}),
    Endpoint("GET /costings", "/costings", ("GET",), RO.costings, tag=_R, doc=RO.COSTINGS_DOC),
    Endpoint("GET /costing/options", "/costing/options/{costing}", ("GET",), RO.costing_options,
             route=RO.costing_param, tag=_R, doc=RO.OPTIONS_DOC),
    _post("POST /isochrone", "/isochrone", IsochroneRequest, _call("isochrone"), _R,
          "Reachability contours (time or distance) around one location", {
              400: {"description": "Not exactly one location, unknown costing or option, bad contours"},
              422: {"description": "The location cannot be snapped to a road of the costing"},
              503: {"description": "The bundle has no routing graph"}}, out=IsochroneResponse),
    Endpoint("GET /elevation", "/elevation", ("GET",), EL.point, route=EL.point_params,
             parse=lambda req: EL.plain_point(_query(req)), tag=EL.TAG, doc=EL.GET_DOC),
    Endpoint("POST /elevation", "/elevation", ("POST",), call=EL.profile_answer, route=_body(ElevationRequest),
             parse=_model(ElevationRequest), tag=EL.TAG, doc=EL.POST_DOC),
    Endpoint("GET /search", "/search", ("GET",), _call("search", True), route=SE.search_params,
             parse=_search(SE.plain_search), cached=True, model=SE.SearchResponse, web="search", tag=_S,
             doc={"summary": "Autocomplete search of places and POIs", "responses": SE.ERRORS}),
    Endpoint("GET /search/reverse", "/search/reverse", ("GET",), _call("reverse", True), route=SE.reverse_params,
             parse=_search(SE.plain_reverse), cached=True, model=SE.ReverseResponse, web="search", tag=_S,
             doc={"summary": "Nearest places and POIs to a coordinate", "responses": SE.ERRORS}),
    Endpoint("GET /search/detail", "/search/detail/{doc_id}", ("GET",), lambda engine, doc_id: engine.place(doc_id),
             route=SE.detail_param, model=SE.PlaceDetail, web="search", tag=_S, doc=SE.DETAIL_DOC),
    Endpoint("GET|HEAD tile", "/tiles/{source}/{z}/{x}/{y}", ("GET", "HEAD"),
             call=lambda state, req: TI.tile_answer(state.engine, *req), route=TI.tile_params, match=_tile_match,
             parse=_tile_parse, quota="tile", web="tiles", tag=_T, doc=TI.TILE_DOC),
    Endpoint("GET /sources|TileJSON", "/tiles/{source}", ("GET",), TI.meta, match=_meta_match, parse=_meta_parse,
             quota="tile", web="tiles", below_asgi=False, tag=_T, paths=(("/sources", TI.sources_params, TI.SOURCES_DOC),
                                                            ("/tiles/{source}", TI.tilejson_params, TI.TILEJSON_DOC))),
    Endpoint("POST /tiles/cache/clear", "/tiles/{source}/cache/clear", ("POST",), TI.clear, route=TI.clear_params,
             tag=_T, doc=TI.CLEAR_DOC),
    _post("POST /map_match", "/map_match", MapMatchRequest, _call("map_match"), "Map matching",
          "Match a GPS trace to the roads; the matched route", RO.MATCH_ERRORS, out=MapMatchResponse),
    _post("POST /map_match/attributes", "/map_match/attributes", MapMatchRequest, _call("trace_attributes"),
          "Map matching", "Match a GPS trace to the roads; matched edges and points", RO.MATCH_ERRORS,
          out=TraceAttributesResponse),
    _post("POST /v1/routing/directions", "/v1/routing/directions", DirectionsRequest, _call("directions"),
          "Directions", "Turn-by-turn directions between 2 to 25 waypoints", RO.DIRECTIONS_ERRORS, unauthorized=True,
          response_model=DirectionsResponse, response_model_exclude_none=True),
    _post("POST /optimised_route", "/optimised_route", OptimisedRouteRequest, _call("optimised_route"), _R,
          "Best visiting order of the stops (first and last fixed) and the trip in that order",
          RO.OPTIMISED_ERRORS, response_model=OptimisedRouteResponse, response_model_exclude_none=True),
    # the Valhalla dialect (docs/valhalla.md): its actions with its bodies, POST and GET ?json=
    *(_post(f"POST /{a}", f"/{a}", model, fn, VA.TAG, summary, responses,
            quota="routing" if a in VA.ROUTING_ACTIONS else "non_tile", unauthorized=a in VA.UNAUTHORIZED_ACTIONS)
      for a, model, fn, summary, responses in VA.POSTS),
    Endpoint("GET /status (Valhalla)", "/status", ("GET",), VA.status, route=VA.status_query, tag=VA.TAG,
             doc={"summary": "Valhalla status: version, data time, available actions"}),
    Endpoint("POST /status (Valhalla)", "/status", ("POST",), VA.status, route=_body(V.StatusRequest), tag=VA.TAG,
             doc={"summary": "Valhalla status (body {verbose})"}),
    Endpoint("GET /route?json=", "/route", ("GET",), _call("route"), route=VA.json_query, parse=_valhalla_get,
             inline=_cheap_route, quota="routing", tag=VA.TAG, doc=VA.get_doc("route")),
    *(_get_action(a, fn) for a, fn in VA.GET_ACTIONS),
    # the OSRM dialect (docs/osrm.md): one route per service
    Endpoint("GET OSRM", "/{service}/v1/{profile}/{coordinates}", ("GET",), call=OS.call, match=OS.parse_path,
             parse=_osrm_parse, inline=OS.inline, quota=OS.quota, unauthorized=OS.unauthorized,
             on_error=OS.error_answer, tag=OS.TAG,
             paths=tuple((f"/{s}/{{version}}/{{profile}}/{{coordinates}}", OS.params(s), OS.doc(s))
                         for s in OS.SERVICES)),
    # Photon under /photon (docs/geocoding.md); it ignores a trailing slash (Leaflet's serviceUrl has one)
    Endpoint("GET /photon", "/photon/api", ("GET",), call=PH.call, route=NO.request, web="search", tag=PH.TAG,
             paths=(("/photon/api", NO.request, PH.SEARCH_DOC), ("/photon/reverse", NO.request, PH.REVERSE_DOC),
                    ("/photon/api/", NO.request, NO.HIDDEN), ("/photon/reverse/", NO.request, NO.HIDDEN))),
    Endpoint("POST /admin/speeds", "/admin/speeds", ("POST",), RO.speeds, route=RO.speeds_params, inline=_never,
             tag="System", doc=RO.SPEEDS_DOC),
)
ENDPOINTS: tuple[Endpoint, ...] = tuple(ep for ep in TABLE if ep.parse is not None)  # the fast dispatch's


# ---------------------------------------------------------------------------------------- what admission reads
def _patterns() -> dict[str, list]:
    """First path segment -> (regex, entry, declared path, (quota class, publishable scope)) of every
    declared path, in the table's order."""
    out: dict[str, list] = {}
    for ep in TABLE:
        for path, _route, _doc in ep.paths or ((ep.path, None, None),):
            out.setdefault(path.split("/")[1], []).append((compile_path(path)[0].match, ep, path,
                                                           (ep.quota_of(path), _of(ep.web, path))))
    return out


_PATTERNS = _patterns()


def _matching(path: str, strip: bool = True):
    """(entry, declared path, (quota class, publishable scope)) of every declared path matching `path`."""
    p = path.rstrip("/") if strip else path
    return ((ep, declared, cls) for match, ep, declared, cls in _PATTERNS.get(p.split("/", 2)[1] if p[:1] == "/" else "", ())
            if match(p))


def methods(path: str) -> str:
    """The methods the table's routes answer on `path` exactly (HEAD with GET, as Starlette's routes):
    the `Allow` of a 405."""
    out = {m for ep, _declared, _cls in _matching(path, strip=False) for m in ep.methods}
    return ", ".join(sorted(out | ({"HEAD"} if "GET" in out else set())))


def classify(path: str) -> tuple[Endpoint, str, tuple[str, str | None]] | None:
    """The first entry whose declared path matches `path` (any method, a trailing slash ignored), with
    that declared path and its (quota class, publishable scope); None for a path the table does not declare."""
    return next(_matching(path), None)


_CLASSES: dict[str, tuple[str, str | None]] = {}  # path_class of the paths seen (admission asks per request)


def path_class(path: str) -> tuple[str, str | None]:
    """(quota class, publishable scope) of a request path: the pools the gateway counts it in, and which
    publishable keys may call it. A path the table does not declare is non_tile, for no publishable key."""
    cls = _CLASSES.get(path)
    if cls is None:
        hit = classify(path)
        cls = ("non_tile", None) if hit is None else hit[2]
        if len(path) <= 256:  # kept for the next request of the path: at most 16,384 paths of 256 bytes
            if len(_CLASSES) >= 16_384:
                _CLASSES.clear()
            _CLASSES[path] = cls
    return cls


def auth_status(path: str) -> int:
    """The status of a missing or invalid key: 401 on the spec's matrix and directions listings and
    their dialect twins (/sources_to_targets, OSRM's /table), 403 everywhere else."""
    hit = classify(path)
    return 401 if hit is not None and _of(hit[0].unauthorized, hit[1]) else 403


def group(path: str) -> str | None:
    """The bundle group a path reads (server/lifecycle.py GROUP_STAGES), or None."""
    hit = classify(path)
    if hit is None:
        return None
    ep, declared, _cls = hit
    if ep.quota_of(declared) == "routing" or ep.tag == _R:
        return "routing"
    if _of(ep.web, declared) == "search":
        return "search"
    return {_T: "tiles", EL.TAG: "elevation"}.get(ep.tag)


gateway.classify_paths(path_class)  # the gateway counts (and admits publishable keys) by this table


# ---------------------------------------------------------------------------------------- fast dispatch
def candidates(method: str, path: str):
    """The fast entries for `method path`, in order, with the path's parameters: the first whose parse
    step accepts the request answers it (/search is Nominatim's with `format`, else the spec's)."""
    for ep in ENDPOINTS:
        if method in ep.methods:
            params = ep.match(path)
            if params is not None:
                yield ep, params


async def in_thread(timeout: float, fn, *args):
    """The thread pool, bounded by GEOENGINE_REQUEST_TIMEOUT (then 504)."""
    try:
        with anyio.fail_after(timeout):
            return await anyio.to_thread.run_sync(functools.partial(fn, *args), abandon_on_cancel=True)
    except TimeoutError:
        raise BackendTimeout(f"the computation took longer than {timeout:g} s") from None


async def answer(state, ep: Endpoint, req) -> Answer | None:
    """The entry's framed answer to a typed request: on the event loop when `inline`, else in the thread pool."""
    try:
        if ep.inline(req):
            return ep.call(state, req)
        return await in_thread(state.settings.request_timeout_s, ep.call, state, req)
    except GeoengineError as exc:  # the thread pool's timeout
        return ep.on_error(exc, req)


# ---------------------------------------------------------------------------------------- FastAPI routes
class Framed(Response):
    """A framed answer (server/framing.py) as a Starlette response."""

    background = None

    def __init__(self, answer: Answer, head: bool = False):
        self.answer, self.head = answer, head

    async def __call__(self, scope, receive, send):
        await send_answer(send, self.answer, self.head)


class TableRoute(APIRoute):
    """A generated route; `when` (the entry's) may leave a request of its path to the next route."""

    when = None

    def matches(self, scope):
        if self.when is not None and scope["type"] == "http" and not self.when(scope):
            return Match.NONE, {}
        return super().matches(scope)


def _no_parameters():
    return None


def _handler(ep: Endpoint, parse):
    checked = "response_model" in ep.doc and ep.run is not None  # the document through its response model

    async def endpoint(request: HttpRequest, req=Depends(parse or _no_parameters)):
        state = request.app.state
        if not checked:
            return Framed(await answer(state, ep, req), request.method == "HEAD")
        engine = state.engine
        if ep.inline(req):
            return ep.run(engine, req)
        return await in_thread(state.settings.request_timeout_s, ep.run, engine, req)

    return endpoint


def router(out: APIRouter | None = None) -> APIRouter:
    """The FastAPI routes of every entry of the table, in its order, added to `out` (the app's own
    router: `create_app`) or to a new router."""
    out = APIRouter() if out is None else out
    for ep in TABLE:
        for path, parse, doc in ep.paths or ((ep.path, ep.route, ep.doc),):
            doc = dict(doc)
            if ep.model is not None:
                doc["responses"] = {200: {"model": ep.model}, **doc.get("responses", {})}
            endpoint = _handler(ep, parse)
            endpoint.__name__ = "".join(c if c.isalnum() else "_" for c in path).strip("_") or "root"
            shown, model = doc.pop("include_in_schema", True), doc.pop("response_model", None)
            doc["openapi_extra"] = {**doc.get("openapi_extra", {}), "x-quota": ep.quota_of(path)}
            for method in ep.methods:
                out.add_api_route(path, endpoint, methods=[method], tags=[ep.tag] if ep.tag else None,
                                  include_in_schema=shown and method != "HEAD", response_model=model,
                                  route_class_override=TableRoute, **doc)
                out.routes[-1].when = ep.when
    return out
