"""The hot path: the cheap, frequent requests answered before FastAPI's router.

Measured with py-spy on `POST /route` (Andorra, one worker, wrk c=16): the engine's own work was 28 %
of the process's busy time; FastAPI's dependency solving and body validation 15 %, the thread-pool
hop 12 %, `jsonable_encoder` + `json.dumps` 10 %, the router and middleware layers the rest. For a
cached tile, search or point elevation the engine's share is smaller still.

`HotPath` is an ASGI middleware installed inside the gateway (which still authenticates and counts
every request) and the body limit. It answers, without Request/Response objects, dependency solving
or a thread hop:

    GET|HEAD /tiles/{source}/{z}/{x}/{y}   the tile bytes (routes/tiles.py `send_tile`)
    GET /sources, GET /tiles/{source}      the source list and TileJSON (routes/tiles.py `*_doc`)
    GET /search, GET /search/reverse       plainly valid queries (routes/search.py `_fast_*`)
    GET /search?format=.., GET /reverse    the Nominatim dialect (routes/nominatim.py `cached_answer`)
    GET /elevation?lat=..&lon=..           plain decimal coordinates within range
    GET /health                            without a query string
    GET /{service}/v1/{profile}/{coords}   the OSRM dialect with a plain query string (routes/osrm.py
                                           `answer`; a two-coordinate route or a nearest on the event
                                           loop, the rest in the thread pool)
    POST /route                            a body that `RouteRequest` accepts as it stands
    GET /route?json={body}                 the same body as Valhalla's query parameter
    POST /matrix                           a body that `MatrixRequest` accepts as it stands

Anything it does not recognise as plainly valid goes on to the application unchanged (a /route body
is replayed), where the FastAPI route gives the same answer and the same 400 problem bodies as ever;
the FastAPI routes also document these endpoints. For a 100x100 /matrix, FastAPI's `jsonable_encoder`
alone took about 100 times the engine's time (0.43 s against 4 ms); orjson writes the same document in
a few milliseconds. Domain errors raised by an engine call become the
one problem body here.

A point-to-point route (two locations, no alternates, no avoid polygons) runs on the event loop: it
costs a fraction of a millisecond of CPU, mostly under the GIL, less than the thread hop would; with
one worker process per core (`geoengine serve` default) the cores are used by processes. Heavier
route requests go to the thread pool with the GEOENGINE_REQUEST_TIMEOUT bound, as the FastAPI route
does. Responses are serialised with orjson.
"""

from __future__ import annotations

import functools
import logging

import anyio
import orjson
from pydantic import ValidationError
from starlette.requests import Request

from geoengine.errors import BackendTimeout, GeoengineError
from geoengine.server.problems import PROBLEM_JSON

log = logging.getLogger("geoengine.server")

_JSON_CT = (b"content-type", b"application/json")
_PROBLEM_CT = (b"content-type", PROBLEM_JSON.encode())
_DUMPS_OPTS = orjson.OPT_SERIALIZE_NUMPY


def dumps(doc) -> bytes:
    """JSON bytes of a response document, as FastAPI's JSONResponse would write it (orjson; the
    standard library's encoder for what orjson refuses, such as non-string keys)."""
    try:
        return orjson.dumps(doc, option=_DUMPS_OPTS)
    except TypeError:
        import json

        from fastapi.encoders import jsonable_encoder

        return json.dumps(jsonable_encoder(doc), ensure_ascii=False, allow_nan=False,
                          separators=(",", ":")).encode()


async def send_json(send, status: int, body: bytes, content_type=_JSON_CT, extra=()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [content_type, (b"content-length", str(len(body)).encode()), *extra]})
    await send({"type": "http.response.body", "body": body})


async def send_error(send, exc: GeoengineError) -> None:
    extra = [(k.lower().encode(), str(v).encode()) for k, v in (exc.headers or {}).items()]
    await send_json(send, exc.status, dumps(exc.to_problem()), _PROBLEM_CT, extra)


class _Fallthrough(Exception):
    """The hot path does not answer this request: the application does."""


def _replay(body: bytes):
    """A `receive` that hands the already read body to the application once, then waits as uvicorn's
    does (a disconnect)."""
    sent = False

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive


async def _read_body(receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise _Fallthrough
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _cheap_route(req) -> bool:
    return len(req.locations) <= 2 and not req.alternates and not req.avoid_polygons


class HotPath:
    def __init__(self, app):
        self.app = app
        from geoengine.server.routes import nominatim, osrm, search, system, tiles, valhalla
        from geoengine.services.matrix import MatrixRequest
        from geoengine.services.route import RouteRequest

        # path -> (request model, engine method name, whether a request may run on the event loop)
        self._posts = {"/route": (RouteRequest, "route", _cheap_route),
                       "/matrix": (MatrixRequest, "matrix_request", None)}
        self._send_tile = tiles.send_tile
        self._tiles_mod = tiles
        self._plain_query = search._plain_query
        self._search = {"/search": search._fast_search, "/search/reverse": search._fast_reverse}
        self._health = system.health_doc
        self._osrm_mod = osrm
        self._osrm_path = osrm.parse_path
        self._osrm_prefixes = tuple(f"/{service}/" for service in osrm.O.SERVICES)
        self._json_param = valhalla.json_param
        self._nominatim = nominatim

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]
        method = scope["method"]
        if method == "GET" or method == "HEAD":
            if path.startswith("/tiles/"):
                parts = path[7:].split("/")
                if len(parts) == 4 and all(parts):
                    return await self._send_tile(scope, send, *parts)
                if len(parts) == 1 and parts[0] and method == "GET" and not scope["query_string"]:
                    return await self._tile_meta(scope, send, parts[0])
            elif path == "/sources" and method == "GET" and not scope["query_string"]:
                return await self._tile_meta(scope, send, None)
            elif method == "GET":
                answer = self._search.get(path)
                if (path == "/reverse" or answer is not None) and self._nominatim.fast_path(path, scope["query_string"]):
                    status, ctype, body = self._nominatim.cached_answer(
                        scope["app"].state, path, scope["query_string"],
                        self._nominatim.header(scope["headers"], b"accept-language"))
                    return await send_json(send, status, body, (b"content-type", ctype))
                if answer is not None:
                    if await self._query(scope, send, answer, path):
                        return None
                elif path == "/elevation":
                    if await self._query(scope, send, self._elevation):
                        return None
                elif path == "/route":  # Valhalla's GET /route?json={body}
                    params = self._plain_query(scope)
                    body = None if params is None else self._json_param(params)
                    if body is not None and await self._post(scope, send, body, *self._posts["/route"]):
                        return None
                elif path.startswith(self._osrm_prefixes):
                    osrm = self._osrm_path(path)
                    if osrm is not None and await self._osrm(scope, send, osrm):
                        return None
                elif path == "/health" and not scope["query_string"]:
                    try:
                        body = dumps(self._health(scope["app"].state.engine))
                    except GeoengineError as exc:
                        return await send_error(send, exc)
                    return await send_json(send, 200, body)
        elif method == "POST" and path in self._posts:
            body = await _read_body(receive)
            if await self._post(scope, send, body, *self._posts[path]):
                return None
            return await self.app(scope, _replay(body), send)
        return await self.app(scope, receive, send)

    # -- GET with a query string -----------------------------------------------------------------
    async def _query(self, scope, send, answer, cached_as: str | None = None) -> bool:
        """Answer a GET whose query string is plainly valid; `cached_as`: the path its answers are kept
        under in the search answer cache (server/answers.py), None for answers that are not kept."""
        state = scope["app"].state
        engine = state.engine
        cache = state.answers if cached_as is not None else None
        if cache is not None:
            body = cache.get(engine, cached_as, scope["query_string"])
            if body is not None:
                await send_json(send, 200, body)
                return True
        params = self._plain_query(scope)
        if params is None:
            return False
        try:
            doc = answer(engine, params)
        except GeoengineError as exc:
            await send_error(send, exc)
            return True
        if doc is None:
            return False
        body = dumps(doc)
        if cache is not None:
            cache.put(engine, cached_as, scope["query_string"], body)
        await send_json(send, 200, body)
        return True

    def _elevation(self, engine, params: dict):
        return plain_elevation(engine, params)

    # -- GET /sources, GET /tiles/{source} (TileJSON) ---------------------------------------------
    async def _tile_meta(self, scope, send, source: str | None) -> None:
        """The source list (`source` None) or a source's TileJSON, with the base URL the route
        would use (public URL setting, trusted forwarded headers, Host, root path)."""
        tiles = self._tiles_mod
        engine = scope["app"].state.engine
        base = tiles.base_url(Request(scope))
        try:
            doc = tiles.sources_doc(engine, base) if source is None else tiles.tilejson_doc(engine, source, base)
        except GeoengineError as exc:
            return await send_error(send, exc)
        return await send_json(send, 200, dumps(doc))

    # -- the OSRM dialect: GET /{service}/v1/{profile}/{coordinates} -------------------------------
    async def _osrm(self, scope, send, parts) -> bool:
        osrm = self._osrm_mod
        query = self._plain_query(scope)
        if query is None:
            return False  # a repeated parameter: the FastAPI route reads it as OSRM clients expect
        app = scope["app"]
        engine = app.state.engine
        service, version, profile, coordinates = parts
        if osrm.inline(service, coordinates, query):
            status, doc = osrm.answer(engine, service, version, profile, coordinates, query)
        else:
            try:
                status, doc = await _in_thread(app.state.settings.request_timeout_s, osrm.answer, engine, service,
                                               version, profile, coordinates, query)
            except GeoengineError as exc:  # the timeout
                err = osrm.O.from_engine_error(exc, service)
                status, doc = err.status, err.body()
        await send_json(send, status, dumps(doc))
        return True

    # -- POST /route, POST /matrix ---------------------------------------------------------------
    async def _post(self, scope, send, body: bytes, model, method: str, inline) -> bool:
        try:
            req = model.model_validate_json(body)
        except (ValidationError, ValueError):
            return False  # the FastAPI route gives the 400 problem body
        app = scope["app"]
        call = getattr(app.state.engine, method)
        try:
            if inline is not None and inline(req):
                doc = call(req)
            else:
                doc = await _in_thread(app.state.settings.request_timeout_s, call, req)
        except GeoengineError as exc:
            await send_error(send, exc)
            return True
        await send_json(send, 200, dumps(doc))
        return True


async def _in_thread(timeout: float, fn, *args):
    """As deps.run_engine: the thread pool, bounded by GEOENGINE_REQUEST_TIMEOUT (then 504)."""
    try:
        with anyio.fail_after(timeout):
            return await anyio.to_thread.run_sync(functools.partial(fn, *args), abandon_on_cancel=True)
    except TimeoutError:
        raise BackendTimeout(f"the computation took longer than {timeout:g} s") from None


def plain_elevation(engine, params: dict):
    """GET /elevation's body for exactly `lat` and `lon` given as plain decimals within range (the hot
    path and the front door); None for the route to answer (validation, problem bodies)."""
    from geoengine.server.routes.search import _number

    if len(params) != 2:
        return None
    lat, lon = _number(params, "lat", -90, 90), _number(params, "lon", -180, 180)
    if lat is None or lon is None or lat is False or lon is False:
        return None
    return {"lat": lat, "lon": lon, "elevation_m": round(engine.elevation_at(lon=lon, lat=lat), 1)}
