"""The front door: the cheapest requests answered in the HTTP protocol, below ASGI.

What a cached tile cost the server before this (py-spy, wrk c=16, one worker): uvicorn building an
ASGI scope, a `RequestResponseCycle` and an asyncio task per request, then six middleware layers
(forwarded headers, web access, gateway, fault guard, body limit, hot path), each an `await` with its
own scan of the headers, for a tile whose bytes were already in memory. `FrontDoor` answers, from the
protocol's parser callbacks (`server/protocol.py`), the requests whose answer needs none of that:

    GET|HEAD /tiles/{source}/{z}/{x}/{y}     tile bytes, 204, 304, or the tile endpoint's problem body
    GET /search, GET /search/reverse         plainly valid queries (as the hot path; answers kept in
                                             server/answers.py by path and query string)
    GET /search?format=.., GET /reverse      the Nominatim dialect (routes/nominatim.py `cached_answer`)
    GET /elevation?lat=..&lon=..             plain decimal coordinates within range
    GET /health                              without a query string
    GET /route/v1/{profile}/{a};{b}, GET /nearest/v1/{profile}/{a}
                                             the OSRM dialect, two coordinates without alternatives,
                                             plain query string (routes/osrm.py `inline`)
    POST /route                              a body `RouteRequest` accepts, two locations, no alternates
    GET /route?json={body}                   the same, the body as Valhalla's query parameter

and only when every rule the middleware would apply is decided by a dictionary read:

- the request carries `X-Gateway-Key` (not a publishable `pk_` key) and the right `X-Gateway-Host`,
  and the key's record is in the gateway's in-process cache (`CachedKeyStore.peek`: same lifetime,
  same revocation rule, only the key's hash kept); a key not in the cache goes through the gateway,
  which reads the store and fills the cache;
- the path is not counted by the key's plan (a counted request goes through the gateway, which keeps
  quotas exact);
- no `Origin` header (CORS and publishable keys are the web-access layer's), no forwarded header from
  a trusted proxy, no body on a GET, a JSON (or undeclared) body within the body limit on a POST;
- the endpoint's bundle group is not marked damaged (the fault guard's 503 comes from the app).

Anything else, and any request the engine answers with something unexpected, goes to the ASGI
application exactly as before: the front door never decides what the application would have decided
differently. The answers are the same bytes the hot path writes (the same functions make them), with
uvicorn's default headers, its access-log line, keep-alive and pipelining order.
"""

from __future__ import annotations

import hmac
import logging

from pydantic import ValidationError

from geoengine.errors import GeoengineError
from geoengine.server.hotpath import dumps, plain_elevation
from geoengine.server.problems import PROBLEM_JSON
from geoengine.server.routes.tiles import CACHE_CONTROL, MEDIA_TYPES, _accepts_gzip

log = logging.getLogger("geoengine.server")

_JSON = [(b"content-type", b"application/json")]
_PROBLEM = (b"content-type", PROBLEM_JSON.encode())
# request bodies of this API are JSON; these declared types are read as JSON too (BodyLimitMiddleware)
_JSON_TYPES = (b"", b"application/json", b"application/x-www-form-urlencoded", b"text/plain")
_FORWARDED = (b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host", b"x-forwarded-prefix", b"forwarded")

Answer = tuple[int, list | bytes, bytes]  # (status, raw header list or a prebuilt header block, body)
# headers that send a tile request down the general path (the app's layers, or the endpoint's full rules)
_TILE_SLOW = frozenset({b"if-none-match", b"origin", b"content-length", b"transfer-encoding", *_FORWARDED})
_OSRM_PREFIXES = ("/route/", "/nearest/")  # the OSRM dialect's services that may be cheap (routes/osrm.py)
_HEAD_204 = b"cache-control: " + CACHE_CONTROL.encode() + b"\r\n"
_MAX_HEADS = 65_536  # prebuilt tile header blocks kept (about 200 bytes each)
_MEMO_ENTRIES = 65_536  # remembered tile responses: at most this many, and this many bytes (then cleared)
_MEMO_BYTES = 64 << 20


def find(app) -> FrontDoor | None:
    """The front door installed on an ASGI application (looked through wrappers), or None."""
    for _ in range(8):
        if app is None:
            return None
        state = getattr(app, "state", None)
        door = getattr(state, "front_door", None) if state is not None else None
        if isinstance(door, FrontDoor):
            return door
        app = getattr(app, "app", None)
    return None


class _Request:
    """What the front door reads of one request's headers (one scan)."""

    __slots__ = ("key", "host", "accept", "inm", "ctype", "length", "veto", "forwarded")

    def __init__(self, headers):
        self.key = self.host = self.accept = self.inm = self.ctype = self.length = None
        self.veto = self.forwarded = False
        for name, value in headers:
            if name == b"x-gateway-key":
                self.key = value
            elif name == b"x-gateway-host":
                self.host = value
            elif name == b"accept-encoding":
                self.accept = value
            elif name == b"if-none-match":
                self.inm = value
            elif name == b"content-type":
                self.ctype = value
            elif name == b"content-length":
                self.length = value
            elif name == b"origin" or name == b"transfer-encoding":
                self.veto = True  # CORS and publishable keys: the web-access layer; a streamed body: the app
            elif name in _FORWARDED:
                self.forwarded = True


class FrontDoor:
    """Decides, per request, whether it can be answered below ASGI, and answers it."""

    def __init__(self, app, keystore, gateway_host: str, max_body_bytes: int, trusted_proxies: bool):
        from geoengine.server.routes import nominatim, osrm, search, system, tiles, valhalla
        from geoengine.services.route import RouteRequest

        self.state = app.state
        self.keystore = keystore  # a CachedKeyStore
        self.host = gateway_host.strip().lower().encode()
        self.max_body = int(max_body_bytes)
        self.trusted_proxies = trusted_proxies
        self._tile = tiles.tile_answer
        self._search = {"/search": search._fast_search, "/search/reverse": search._fast_reverse}
        self._health = system.health_doc
        self._osrm_mod = osrm
        self._json_param = valhalla.json_param
        self._nominatim = nominatim
        self._plain_query = search._plain_query
        self._route_model = RouteRequest
        self.answered = 0  # requests answered here (tests, benchmarks)
        self._host_raw = self.host  # the header value as clients usually send it
        self._tiles_counted: dict[str, bool] = {}  # plan -> whether tile reads count against it
        self._gzip_ok: dict[bytes, bool] = {}  # Accept-Encoding value -> gzip accepted
        self._heads: dict[tuple[str, str], bytes] = {}  # (etag, format) -> prebuilt 200 header block
        # raw tile requests answered here, by the BLAKE2b digest of their bytes (never the bytes: they
        # hold the key): see `remember`, `recall` and server/protocol.py
        self.memo: dict[bytes, list] = {}
        self.memo_bytes = 0
        self.recalled = 0  # requests answered from `memo` (tests, benchmarks)
        self.last_tile = None  # what the last `_tile_core` answer was decided with

    # -- admission: the middleware's rules, decided without I/O --------------------------------------
    def _admit(self, path: str, req: _Request) -> bool:
        if req.veto or req.key is None or req.host is None or (req.forwarded and self.trusted_proxies):
            return False
        if not hmac.compare_digest(req.host.strip().lower(), self.host):
            return False  # the gateway writes the 401/403
        key = req.key.decode("latin-1")
        if key.startswith("pk_"):
            return False
        record = self.keystore.peek(key)
        if record is None or self.keystore.counts(record, path):
            return False
        watch = getattr(self.state, "bundle_watch", None)
        return watch is None or not watch.broken

    # -- tiles: the most frequent request of a map server ----------------------------------------------
    def _tile_fast(self, parts: list[str], headers) -> Answer | None | bool:
        """A plain cached-key tile request answered with a prebuilt header block; None when the app
        must answer, False when the general path (every rule of the tile endpoint) should decide."""
        key = host = accept = None
        for name, value in headers:
            if name == b"x-gateway-key":
                key = value
            elif name == b"x-gateway-host":
                host = value
            elif name == b"accept-encoding":
                accept = value
            elif name in _TILE_SLOW:
                return False
        return self._tile_core(parts, key, host, accept)

    def tile_fields(self, path: str, key, host, accept) -> Answer | None | bool:
        """`_tile_fast` for the protocol's raw path, which found the header values itself (and none of
        the other headers of _TILE_SLOW)."""
        parts = path[7:].split("/")
        if len(parts) != 4 or not all(parts):
            return None
        return self._tile_core(parts, key, host, accept)

    def _tile_core(self, parts: list[str], key, host, accept) -> Answer | None | bool:
        if key is None or host is None:
            return None
        if not hmac.compare_digest(host, self._host_raw) and not hmac.compare_digest(host.strip().lower(), self.host):
            return None
        k = key.decode("latin-1")
        if k.startswith("pk_"):
            return None
        hit = self.keystore.peek_entry(k)
        if hit is None:
            return None
        record, expires = hit
        counted = self._tiles_counted.get(record.plan)
        if counted is None:
            counted = self._tiles_counted[record.plan] = self.keystore.counts(record, "/tiles/_/0/0/0")
        if counted:
            return None
        watch = getattr(self.state, "bundle_watch", None)
        if watch is not None and watch.broken:
            return None
        source, zs, xs, ys = parts
        if ys.endswith((".pbf", ".mvt")):
            ys = ys[:-4]
        if not (zs.isascii() and zs.isdigit() and xs.isascii() and xs.isdigit() and ys.isascii() and ys.isdigit()
                and len(xs) <= 12 and len(ys) <= 12 and len(zs) <= 12):
            return False
        tiles = self.state.engine.tiles
        token = tiles.token(source)  # read before the tile: a clear in between makes the answer's token stale
        try:
            tile = tiles.tile(source, int(zs), int(xs), int(ys))
        except GeoengineError:
            return False  # the endpoint's problem body, from the general path
        self.last_tile = (tiles, source, token, expires)
        if tile is None:
            return 204, _HEAD_204, b""
        if tile.gzip:
            ok = self._gzip_ok.get(accept)
            if ok is None:
                ok = _accepts_gzip(None if accept is None else accept.decode("latin-1"))
                if len(self._gzip_ok) < 64:
                    self._gzip_ok[accept] = ok
            if not ok:
                return False  # decompressed for this client: the general path
        head = self._heads.get((tile.etag, tile.format))
        if head is None:
            if len(self._heads) >= _MAX_HEADS:
                self._heads.clear()
            ctype = b"application/x-protobuf" if tile.format == "pbf" else \
                MEDIA_TYPES.get(tile.format, "application/octet-stream").encode()
            head = b"".join((b"cache-control: ", CACHE_CONTROL.encode(), b"\r\netag: ", tile.etag.encode(),
                             b"\r\nvary: Accept-Encoding\r\n", b"content-encoding: gzip\r\n" if tile.gzip else b"",
                             b"content-type: ", ctype, b"\r\ncontent-length: ", str(len(tile.data)).encode(), b"\r\n"))
            self._heads[(tile.etag, tile.format)] = head
        return 200, head, tile.data

    # -- remembered answers: a repeated tile request answered from its bytes ----------------------------
    def remember(self, digest: bytes, response: bytes, defaults, parts) -> None:
        """Keep the response to a raw tile request whose digest is `digest`, under what `_tile_core`
        decided it with (`last_tile`): the key's cache entry and its expiry, the tile service and its
        token. `defaults`: uvicorn's default-header list it was written with; `parts`: (status line,
        header block, body, is HEAD) to write it again when that list changes (the date)."""
        tiles, source, token, expires = self.last_tile
        if token is None:
            return
        if len(self.memo) >= _MEMO_ENTRIES or self.memo_bytes + len(response) > _MEMO_BYTES:
            self.memo.clear()
            self.memo_bytes = 0
        old = self.memo.get(digest)
        if old is not None:
            self.memo_bytes -= len(old[0])
        self.memo[digest] = [response, defaults, parts, expires, self.keystore.epoch, tiles, source, token]
        self.memo_bytes += len(response)

    def recall(self, digest: bytes):
        """The remembered entry for a raw request's digest when every rule it was answered under still
        holds (the key's cache entry unexpired and not forgotten, no clear of the source since the tile
        was read, the same engine, its bundle not damaged); else None (the request goes the full way)."""
        e = self.memo.get(digest)
        if e is None:
            return None
        ks = self.keystore
        state = self.state
        watch = getattr(state, "bundle_watch", None)
        tiles = e[5]
        if (e[3] <= ks.clock() or e[4] != ks.epoch or state.engine.tiles is not tiles
                or (watch is not None and watch.broken) or tiles.token(e[6]) != e[7]):
            del self.memo[digest]
            self.memo_bytes -= len(e[0])
            return None
        return e

    # -- GET / HEAD ----------------------------------------------------------------------------------
    def get(self, method: str, path: str, query: bytes, headers) -> Answer | None:
        """The answer to a GET or HEAD without a body, or None for the application to give."""
        if path.startswith("/tiles/"):
            parts = path[7:].split("/")
            if len(parts) != 4 or not all(parts):
                return None
            fast = self._tile_fast(parts, headers)
            if fast is not False:
                return fast
            req = _Request(headers)
            if req.length is not None or not self._admit(path, req):
                return None
            return self._tile(self.state.engine, *parts,
                              None if req.accept is None else req.accept.decode("latin-1"),
                              None if req.inm is None else req.inm.decode("latin-1"))
        if method != "GET":
            return None
        if (path == "/reverse" or path == "/search") and self._nominatim.fast_path(path, query):
            return self._nominatim_get(path, query, headers)
        answer = self._search.get(path)
        if answer is None:
            if path.startswith(_OSRM_PREFIXES):
                return self._osrm(path, query, headers)
            if path == "/route":
                return self._route_get(path, query, headers)
            if path == "/health":
                if query:
                    return None
                answer = self._health
            elif path != "/elevation":
                return None
            else:
                answer = self._elevation
        req = _Request(headers)
        if req.length is not None or not self._admit(path, req):
            return None
        engine = self.state.engine
        cache = self.state.answers if path.startswith("/search") else None
        if cache is not None:
            body = cache.get(engine, path, query)
            if body is not None:  # the same query answered before, by this engine (server/answers.py)
                return 200, [*_JSON, (b"content-length", str(len(body)).encode())], body
        params = self._plain_query({"query_string": query})
        if params is None:
            return None
        out = self._json(answer, engine, params)
        if cache is not None and out is not None and out[0] == 200:
            cache.put(engine, path, query, out[2])
        return out

    def _elevation(self, engine, params: dict):
        return plain_elevation(engine, params)

    def _nominatim_get(self, path: str, query: bytes, headers) -> Answer | None:
        """The Nominatim dialect's /search (with `format`) and /reverse (routes/nominatim.py)."""
        req = _Request(headers)
        if req.length is not None or not self._admit(path, req):
            return None
        status, ctype, body = self._nominatim.cached_answer(self.state, path, query,
                                                            self._nominatim.header(headers, b"accept-language"))
        return status, [(b"content-type", ctype), (b"content-length", str(len(body)).encode())], body

    def _route_get(self, path: str, query: bytes, headers) -> Answer | None:
        """Valhalla's `GET /route?json={body}`: the body `post` would answer, given as the only parameter."""
        req = _Request(headers)
        if req.length is not None or not self._admit(path, req):
            return None
        params = self._plain_query({"query_string": query})
        body = None if params is None else self._json_param(params)
        return None if body is None else self.post(path, body)

    def _osrm(self, path: str, query: bytes, headers) -> Answer | None:
        """An OSRM dialect request cheap enough for the event loop (routes/osrm.py `inline`)."""
        osrm = self._osrm_mod
        parts = osrm.parse_path(path)
        if parts is None:
            return None
        req = _Request(headers)
        if req.length is not None or not self._admit(path, req):
            return None
        params = self._plain_query({"query_string": query})
        if params is None or not osrm.inline(parts[0], parts[3], params):
            return None  # the hot path, in the thread pool
        status, doc = osrm.answer(self.state.engine, *parts, params)
        body = dumps(doc)
        return status, [*_JSON, (b"content-length", str(len(body)).encode())], body

    # -- POST /route -----------------------------------------------------------------------------------
    def post_wanted(self, path: str, headers) -> bool:
        """Whether to collect this POST's body for `post` (decided when its headers are complete)."""
        if path != "/route":
            return False
        req = _Request(headers)
        if req.length is None or not self._admit(path, req):
            return False
        try:
            if not 0 < int(req.length) <= self.max_body:
                return False
        except ValueError:
            return False
        ctype = b"" if req.ctype is None else req.ctype.split(b";")[0].strip().lower()
        return ctype in _JSON_TYPES

    def post(self, path: str, body: bytes) -> Answer | None:
        try:
            request = self._route_model.model_validate_json(body)
        except (ValidationError, ValueError):
            return None  # the FastAPI route writes the 400 problem body
        if len(request.locations) > 2 or request.alternates or request.avoid_polygons:
            return None  # heavier: the thread pool with the request timeout
        return self._json(lambda engine, req: engine.route(req), self.state.engine, request)

    # -- answers ---------------------------------------------------------------------------------------
    def _json(self, answer, engine, arg) -> Answer | None:
        try:
            doc = answer(engine, arg)
        except GeoengineError as exc:
            body = dumps(exc.to_problem())
            extra = [(k.lower().encode(), str(v).encode()) for k, v in (exc.headers or {}).items()]
            return exc.status, [_PROBLEM, (b"content-length", str(len(body)).encode()), *extra], body
        if doc is None:
            return None
        body = dumps(doc)
        return 200, [*_JSON, (b"content-length", str(len(body)).encode())], body
