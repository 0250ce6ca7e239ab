"""The endpoints the fast dispatch answers, each declared once.

An entry gives the path and methods, the parse step (path, query string, body and headers to a typed
request, or None: the FastAPI route then decides, with its 400 problem bodies), the engine call with
its formatter (to a framed answer, server/framing.py), whether it may run on the event loop (`inline`:
else the thread pool with GEOENGINE_REQUEST_TIMEOUT), the response model it documents and the quota
class the gateway counts it in (gateway/keys.py `path_scopes`).

Both fast paths read this table and nothing else to dispatch: `HotPath` (ASGI, inside admission)
answers every entry; `FrontDoor` (below ASGI, server/protocol.py) answers the entries whose request
is inline and which need no ASGI scope. The FastAPI routes of the same paths document them and answer
what a parse step declines; tests/server/test_endpoint_table.py walks the table against them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import ValidationError

from geoengine.errors import GeoengineError
from geoengine.server.framing import Answer, body_answer, error_answer, json_answer


@dataclass(frozen=True)
class Request:
    """What a parse step reads: the path's parameters, the query string, the body (POST), the headers."""

    params: tuple
    query: bytes
    body: bytes | None
    headers: list
    scope: dict | None = None  # the ASGI scope (HotPath), None below ASGI


@dataclass(frozen=True)
class Endpoint:
    name: str
    path: str  # as FastAPI declares it
    methods: tuple[str, ...]
    match: Callable[[str], tuple | None]  # path -> path parameters, or None
    parse: Callable[[Request], object | None]  # -> typed request, or None (the FastAPI route decides)
    call: Callable[[object, object], Answer | None]  # (app state, typed request) -> answer
    inline: Callable[[object], bool] = field(default=lambda req: True)
    quota: str = "non_tile"  # tile | non_tile | routing (gateway/keys.py path_scopes)
    model: object = None  # the response model the FastAPI route documents
    below_asgi: bool = True  # FrontDoor answers it too (False: it needs the ASGI scope, or is never inline)
    cached: bool = False  # answers kept by path and query string (server/answers.py)
    on_error: Callable[[GeoengineError, object], Answer] = field(default=lambda exc, req: error_answer(exc))


# ---------------------------------------------------------------------------------------- helpers
def _exact(path: str):
    return lambda p: () if p == path else None


def _query(req: Request) -> dict | None:
    from geoengine.server.routes.search import _plain_query

    return _plain_query({"query_string": req.query})


def _doc(fn):
    """A document-returning call as an answer: its domain errors as problem bodies."""
    def call(state, request):
        try:
            doc = fn(state.engine, request)
        except GeoengineError as exc:
            return error_answer(exc)
        return None if doc is None else json_answer(doc)

    return call


def _model(name: str):
    def parse(req: Request):
        import importlib

        module, cls = name.rsplit(".", 1)
        try:
            return getattr(importlib.import_module(module), cls).model_validate_json(req.body)
        except (ValidationError, ValueError):
            return None

    return parse


def _cheap_route(req) -> bool:
    return len(req.locations) <= 2 and not req.alternates and not req.avoid_polygons


# ---------------------------------------------------------------------------------------- entries
def _search_entry(path: str, fn_name: str) -> Endpoint:
    def call(state, params):
        from geoengine.server.routes import search

        return _doc(getattr(search, fn_name))(state, params)

    return Endpoint(f"GET {path}", path, ("GET",), _exact(path), _query, call, cached=True)


def _nominatim_match(p: str):
    return () if p in ("/search", "/reverse") else None


def _nominatim_parse(req: Request):
    from geoengine.server.routes import nominatim

    path = req.params[0]
    if not nominatim.fast_path(path, req.query):
        return None
    return path, req.query, nominatim.header(req.headers, b"accept-language")


def _nominatim_call(state, request):
    from geoengine.server.routes import nominatim

    status, ctype, body = nominatim.cached_answer(state, *request)
    return body_answer(body, status, (b"content-type", ctype))


def _osrm_match(p: str):
    from geoengine.server.routes import osrm

    return osrm.parse_path(p)


def _osrm_parse(req: Request):
    query = _query(req)
    return None if query is None else (*req.params, query)


def _osrm_call(state, request):
    from geoengine.server.routes import osrm

    status, doc = osrm.answer(state.engine, *request)
    return json_answer(doc, status)


def _osrm_error(exc, request):
    """The thread pool's timeout as OSRM's {code, message}."""
    from geoengine.dialects import osrm as O

    err = O.from_engine_error(exc, request[0])
    return json_answer(err.body(), err.status)


def _osrm_inline(request) -> bool:
    from geoengine.server.routes import osrm

    return osrm.inline(request[0], request[3], request[4])


def _valhalla_get(req: Request):
    from geoengine.server.routes import valhalla

    query = _query(req)
    body = None if query is None else valhalla.json_param(query)
    return None if body is None else _model("geoengine.services.route.RouteRequest")(
        Request(req.params, b"", body, req.headers))


def _elevation(engine, params: dict):
    """GET /elevation's body for exactly `lat` and `lon` given as plain decimals within range; None for
    the route to answer (validation, problem bodies)."""
    from geoengine.server.routes.search import _number

    if len(params) != 2:
        return None
    lat, lon = _number(params, "lat", -90, 90), _number(params, "lon", -180, 180)
    if lat is None or lon is None or lat is False or lon is False:
        return None
    return {"lat": lat, "lon": lon, "elevation_m": round(engine.elevation_at(lon=lon, lat=lat), 1)}


def _health_parse(req: Request):
    return None if req.query else {}


def _health(engine, _params):
    from geoengine.server.routes import system

    return system.health_doc(engine)


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


def _tile_call(state, request):
    from geoengine.server.routes.tiles import tile_answer

    return tile_answer(state.engine, *request)


def _meta_match(p: str):
    if p == "/sources":
        return (None,)
    if p.startswith("/tiles/") and p.count("/") == 2 and len(p) > 7:
        return (p[7:],)
    return None


def _meta_parse(req: Request):
    from starlette.requests import Request as StarletteRequest

    from geoengine.server.routes.tiles import base_url

    if req.query or req.scope is None:
        return None
    return req.params[0], base_url(StarletteRequest(req.scope))


def _meta(engine, request):
    from geoengine.server.routes import tiles

    source, base = request
    return tiles.sources_doc(engine, base) if source is None else tiles.tilejson_doc(engine, source, base)


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET|HEAD tile", "/tiles/{source}/{z}/{x}/{y}", ("GET", "HEAD"), _tile_match, _tile_parse, _tile_call,
             quota="tile"),
    Endpoint("GET /sources|TileJSON", "/tiles/{source}", ("GET",), _meta_match, _meta_parse, _doc(_meta),
             quota="tile", below_asgi=False),
    # nominatim first: /search with `format` is Nominatim's, any other /search the spec's
    Endpoint("GET /search|/reverse (Nominatim)", "/reverse", ("GET",), lambda p: (p,) if _nominatim_match(p)
             is not None else None, _nominatim_parse, _nominatim_call),
    _search_entry("/search", "_fast_search"),
    _search_entry("/search/reverse", "_fast_reverse"),
    Endpoint("GET /elevation", "/elevation", ("GET",), _exact("/elevation"), _query, _doc(_elevation)),
    Endpoint("GET /health", "/health", ("GET",), _exact("/health"), _health_parse, _doc(_health)),
    Endpoint("GET /route?json=", "/route", ("GET",), _exact("/route"), _valhalla_get,
             _doc(lambda engine, req: engine.route(req)), inline=_cheap_route, quota="routing"),
    Endpoint("GET OSRM", "/{service}/v1/{profile}/{coordinates}", ("GET",), _osrm_match, _osrm_parse, _osrm_call,
             inline=_osrm_inline, quota="routing", on_error=_osrm_error),
    Endpoint("POST /route", "/route", ("POST",), _exact("/route"), _model("geoengine.services.route.RouteRequest"),
             _doc(lambda engine, req: engine.route(req)), inline=_cheap_route, quota="routing"),
    Endpoint("POST /matrix", "/matrix", ("POST",), _exact("/matrix"), _model("geoengine.services.matrix.MatrixRequest"),
             _doc(lambda engine, req: engine.matrix_request(req)), inline=lambda req: False, quota="routing",
             below_asgi=False),
)


def candidates(method: str, path: str):
    """The entries for `method path`, in order, with the path's parameters: the first whose parse step
    accepts the request answers it (/search is Nominatim's with `format`, else the spec's)."""
    for ep in ENDPOINTS:
        if method in ep.methods:
            params = ep.match(path)
            if params is not None:
                yield ep, params


def prepare(state, method: str, path: str, query: bytes, body: bytes | None, headers, scope=None, cands=None):
    """(entry, typed request, None) of the first entry whose parse step accepts the request, or
    (entry, None, answer) for an answer kept in the answer cache; None when no entry takes it (the
    FastAPI routes answer it)."""
    for ep, params in candidates(method, path) if cands is None else cands:
        if scope is None and not ep.below_asgi:
            return None
        if ep.cached:
            kept = state.answers.get(state.engine, path, query)
            if kept is not None:  # the same query answered before, by this engine (server/answers.py)
                return ep, None, body_answer(kept)
        req = ep.parse(Request(params, query, body, headers, scope))
        if req is not None:
            return ep, req, None
    return None


def keep(state, ep: Endpoint, path: str, query: bytes, answer: Answer | None) -> Answer | None:
    """`answer`, kept in the answer cache when the entry's answers are."""
    if ep.cached and answer is not None and answer[0] == 200:
        state.answers.put(state.engine, path, query, answer[2])
    return answer
