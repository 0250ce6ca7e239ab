"""The one fast dispatcher of the endpoint table (server/endpoints.py), below FastAPI's router.

Measured with py-spy (Andorra, one worker, wrk c=16): on `POST /route` the engine's own work was 28 %
of the process's busy time, FastAPI's dependency solving and body validation 15 %, the thread-pool hop
12 %, `jsonable_encoder` + `json.dumps` 10 %, the router and middleware layers the rest; a cached tile
cost uvicorn's ASGI scope, request cycle and task, then the middleware layers, each an `await` with its
own scan of the headers, for bytes already in memory. `Dispatcher` answers a request from the table
without any of that: the entries whose parse step (path parameters, query string, body, headers) accepts
the request as it stands, through the entry's engine call and formatter, on the event loop when the
entry says `inline`, else in the thread pool with the GEOENGINE_REQUEST_TIMEOUT bound. It is entered in
one of two places, and decides the same way in both:

- below ASGI, from the HTTP protocol's parser callbacks (server/protocol.py: `get`, `post_wanted`,
  `post`), when admission decides every rule without I/O (server/admission.py `quick`: a key in the
  gateway's in-process cache, a path its plan does not count, no browser origin, no trusted forwarded
  header, a body within the limit, the group not damaged) and the request is inline and needs no ASGI
  scope. Plain tiles are answered there with a prebuilt header block;
- otherwise inside ASGI (`Middleware`, installed inside `AdmissionMiddleware`, so after every rule),
  the same table and the same calls, with the thread pool and the scope (the sources' base URL).

Anything a parse step declines, and any request the engine answers with something unexpected, goes to
the generated FastAPI route unchanged (a POST body is replayed), which gives the same answer and the 400
problem bodies. The answers are framed by server/framing.py; below ASGI they carry uvicorn's default
headers, its access-log line, keep-alive and pipelining order.
"""

from __future__ import annotations

from geoengine.errors import GeoengineError
from geoengine.server import endpoints
from geoengine.server.admission import Heads
from geoengine.server.framing import NO_TILE, Answer, body_answer, head_block, send_answer, tile_headers
from geoengine.server.routes.tiles import accepts_gzip

_HEAD_204 = head_block(NO_TILE)
_MAX_HEADS = 65_536  # prebuilt tile header blocks kept (about 200 bytes each)


def find(app) -> Dispatcher | None:
    """The dispatcher installed on an ASGI application (looked through wrappers), or None."""
    for _ in range(8):
        if app is None:
            return None
        state = getattr(app, "state", None)
        door = getattr(state, "front_door", None) if state is not None else None
        if isinstance(door, Dispatcher):
            return door
        app = getattr(app, "app", None)
    return None


class Dispatcher:
    """The table's dispatch: `answer` (either side), `get` / `post_wanted` / `post` (below ASGI)."""

    def __init__(self, state, admission):
        self.state = state
        self.admission = admission  # every rule before an endpoint (server/admission.py)
        self.keystore = admission.keystore  # a CachedKeyStore
        self.answered = 0  # requests answered below ASGI (tests, benchmarks)
        self._gzip_ok: dict[bytes, bool] = {}  # Accept-Encoding value -> gzip accepted
        self._heads: dict[tuple[str, str], bytes] = {}  # (etag, format) -> prebuilt 200 header block

    # -- the dispatch, either side of ASGI ---------------------------------------------------------
    def _prepare(self, method: str, path: str, query: bytes, body: bytes | None, headers, scope=None, cands=None):
        """(entry, typed request, None) of the first entry whose parse step accepts the request, or
        (entry, None, answer) for an answer kept in the answer cache; None when no entry takes it (the
        FastAPI route answers it). Below ASGI (`scope` None) an entry that needs the scope ends the search."""
        state = self.state
        for ep, params in endpoints.candidates(method, path) if cands is None else cands:
            if scope is None and not ep.below_asgi:
                return None
            if ep.cached:
                kept = state.answers.get(state.engine, path, query)
                if kept is not None:  # the same query answered before, by this engine (server/answers.py)
                    return ep, None, body_answer(kept)
            req = ep.parse(endpoints.Request(params, query, body, headers, scope))
            if req is not None:
                return ep, req, None
        return None

    def _keep(self, ep, path: str, query: bytes, answer: Answer | None) -> Answer | None:
        if ep.cached and answer is not None and answer[0] == 200:
            self.state.answers.put(self.state.engine, path, query, answer[2])
        return answer

    async def answer(self, method: str, path: str, query: bytes, body: bytes | None, headers, scope):
        """The table's answer inside ASGI (inline, or the thread pool), or None for the FastAPI route."""
        prep = self._prepare(method, path, query, body, headers, scope)
        if prep is None or prep[2] is not None:
            return None if prep is None else prep[2]
        ep, req, _ = prep
        return self._keep(ep, path, query, await endpoints.answer(self.state, ep, req))

    def _inline(self, method: str, path: str, query: bytes, body: bytes | None, headers, cands=None):
        """The table's answer below ASGI when the request is inline, else None (then `Middleware`)."""
        prep = self._prepare(method, path, query, body, headers, cands=cands)
        if prep is None or prep[2] is not None:
            return None if prep is None else prep[2]
        ep, req, _ = prep
        return self._keep(ep, path, query, ep.call(self.state, req)) if ep.inline(req) else None

    # -- below ASGI (server/protocol.py) -----------------------------------------------------------
    def _admit(self, path: str, headers, body: bool = False, session: bool = False):
        return self.admission.quick(path, headers if type(headers) is Heads else Heads(headers), body, session)

    def get(self, method: str, path: str, query: bytes, headers) -> Answer | None:
        """The answer to a GET or HEAD without a body, or None for the application to give."""
        if path.startswith("/tiles/") and path.count("/") == 5:
            return self._tile(path, headers)
        heads = Heads(headers)  # read once, from the raw path's dict or the parser's pairs
        if type(headers) is dict:  # the protocol's raw path: one value a name, in order
            headers = list(headers.items())
        cands = list(endpoints.candidates(method, path))
        if not cands or self._admit(path, heads) is None:
            return None
        return self._inline(method, path, query, None, headers, cands)

    def post_wanted(self, path: str, headers) -> bool:
        """Whether to collect this POST's body for `post` (decided when its headers are complete)."""
        return (any(ep.below_asgi for ep, _ in endpoints.candidates("POST", path))
                and self._admit(path, headers, body=True) is not None)

    def post(self, path: str, body: bytes) -> Answer | None:
        return self._inline("POST", path, b"", body, [])

    def _tile(self, path: str, headers) -> Answer | None:
        """A tile: a plain one with a prebuilt header block, one with If-None-Match or for a client that
        does not take gzip through the tile entry; None when the application must answer."""
        parts = path[7:].split("/")
        if len(parts) != 4 or not all(parts):
            return None
        heads = Heads(headers)
        if self._admit(path, heads, session=True) is None:  # a page session too: a tile is always answered
            return None
        accept, inm = heads.accept, heads.inm
        fast = None if inm is not None else self._plain_tile(parts, accept)
        if fast is not None:
            return fast
        return self._inline("GET", path, b"", None, list(headers.items()) if type(headers) is dict else headers)

    def _plain_tile(self, parts: list[str], accept) -> Answer | None:
        source, zs, xs, ys = parts
        if ys.endswith((".pbf", ".mvt")):
            ys = ys[:-4]
        if not (zs.isascii() and zs.isdigit() and xs.isascii() and xs.isdigit() and ys.isascii() and ys.isdigit()
                and len(xs) <= 12 and len(ys) <= 12 and len(zs) <= 12):
            return None
        try:
            tile = self.state.engine.tiles.tile(source, int(zs), int(xs), int(ys))
        except GeoengineError:
            return None  # the entry's problem body
        if tile is None:
            return 204, _HEAD_204, b""
        if tile.gzip:
            ok = self._gzip_ok.get(accept)
            if ok is None:
                ok = accepts_gzip(None if accept is None else accept.decode("latin-1"))
                if len(self._gzip_ok) < 64:
                    self._gzip_ok[accept] = ok
            if not ok:
                return None  # decompressed for this client: the entry
        head = self._heads.get((tile.etag, tile.format))
        if head is None:
            if len(self._heads) >= _MAX_HEADS:
                self._heads.clear()
            head = head_block(tile_headers(tile.format, tile.etag, len(tile.data), tile.gzip))
            self._heads[(tile.etag, tile.format)] = head
        return 200, head, tile.data


# -- inside ASGI ---------------------------------------------------------------------------------
class _Fallthrough(Exception):
    """Not a whole body: the application answers."""


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


class Middleware:
    """The dispatcher inside ASGI, installed inside admission (app.py): what was not answered below ASGI."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path, root = scope["path"], scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]
        method, body = scope["method"], None
        if method == "POST":
            if next(endpoints.candidates(method, path), None) is None:
                return await self.app(scope, receive, send)
            body = await _read_body(receive)
            receive = _replay(body)
        door = scope["app"].state.front_door
        answer = await door.answer(method, path, scope["query_string"], body, scope["headers"], scope)
        if answer is None:
            return await self.app(scope, receive, send)
        return await send_answer(send, answer, method == "HEAD")
