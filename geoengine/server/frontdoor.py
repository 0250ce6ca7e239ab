"""The front door: the cheapest requests answered in the HTTP protocol, below ASGI.

What a cached tile cost the server before this (py-spy, wrk c=16, one worker): uvicorn building an
ASGI scope, a `RequestResponseCycle` and an asyncio task per request, then six middleware layers
(forwarded headers, web access, gateway, fault guard, body limit, hot path), each an `await` with its
own scan of the headers, for a tile whose bytes were already in memory. `FrontDoor` answers, from the
protocol's parser callbacks (`server/protocol.py`), the requests whose answer needs none of that:

    GET|HEAD /tiles/{source}/{z}/{x}/{y}     tile bytes, 204, 304, or the tile endpoint's problem body
                                             (plain ones with a prebuilt header block)
    every entry of the endpoint table        whose parse step accepts the request and whose request
    (server/endpoints.py)                    is inline (a plain search, a point-to-point route, ...)

and only when admission (server/admission.py `quick`) decides every rule without I/O:

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

import logging

from geoengine.errors import GeoengineError
from geoengine.server import endpoints
from geoengine.server.admission import Heads
from geoengine.server.framing import (
    NO_TILE,
    Answer,
    head_block,
    tile_headers,
)
from geoengine.server.routes.tiles import _accepts_gzip

log = logging.getLogger("geoengine.server")

_HEAD_204 = head_block(NO_TILE)
_MAX_HEADS = 65_536  # prebuilt tile header blocks kept (about 200 bytes each)


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


class FrontDoor:
    """Decides, per request, whether it can be answered below ASGI, and answers it."""

    def __init__(self, app, admission):
        from geoengine.server.routes import tiles

        self.state = app.state
        self.admission = admission  # every rule of the layers above (server/admission.py)
        self.keystore = admission.keystore  # a CachedKeyStore
        self._tile_answer = tiles.tile_answer
        self.answered = 0  # requests answered here (tests, benchmarks)
        self._gzip_ok: dict[bytes, bool] = {}  # Accept-Encoding value -> gzip accepted
        self._heads: dict[tuple[str, str], bytes] = {}  # (etag, format) -> prebuilt 200 header block

    # -- admission: the layers' rules, decided without I/O (server/admission.py) ----------------------
    def _admit(self, path: str, headers, body: bool = False):
        return self.admission.quick(path, headers if type(headers) is Heads else Heads(headers), body)

    # -- tiles: the most frequent request of a map server ----------------------------------------------
    def _tile(self, path: str, headers) -> Answer | None:
        """A tile request: a plain one answered with a prebuilt header block, one with If-None-Match or
        a client that does not take gzip with the endpoint's whole behaviour (`tile_answer`); None when
        the app must answer."""
        parts = path[7:].split("/")
        if len(parts) != 4 or not all(parts):
            return None
        heads = Heads(headers)
        hit = self._admit(path, heads)
        if hit is None:
            return None
        accept, inm = heads.accept, heads.inm
        fast = None if inm is not None else self._plain_tile(parts, accept)
        if fast is not None:
            return fast
        return self._tile_answer(self.state.engine, *parts, None if accept is None else accept.decode("latin-1"),
                                 None if inm is None else inm.decode("latin-1"))

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
            return None  # the endpoint's problem body, from `tile_answer`
        if tile is None:
            return 204, _HEAD_204, b""
        if tile.gzip:
            ok = self._gzip_ok.get(accept)
            if ok is None:
                ok = _accepts_gzip(None if accept is None else accept.decode("latin-1"))
                if len(self._gzip_ok) < 64:
                    self._gzip_ok[accept] = ok
            if not ok:
                return None  # decompressed for this client: `tile_answer`
        head = self._heads.get((tile.etag, tile.format))
        if head is None:
            if len(self._heads) >= _MAX_HEADS:
                self._heads.clear()
            head = head_block(tile_headers(tile.format, tile.etag, len(tile.data), tile.gzip))
            self._heads[(tile.etag, tile.format)] = head
        return 200, head, tile.data

    # -- the endpoint table (server/endpoints.py) ------------------------------------------------------
    def get(self, method: str, path: str, query: bytes, headers) -> Answer | None:
        """The answer to a GET or HEAD without a body, or None for the application to give."""
        if path.startswith("/tiles/") and path.count("/") == 5:
            return self._tile(path, headers)
        cands = list(endpoints.candidates(method, path))
        if not cands or self._admit(path, headers) is None:
            return None
        return self._answer(method, path, query, None, headers, cands)

    def post_wanted(self, path: str, headers) -> bool:
        """Whether to collect this POST's body for `post` (decided when its headers are complete)."""
        return (any(ep.below_asgi for ep, _ in endpoints.candidates("POST", path))
                and self._admit(path, headers, body=True) is not None)

    def post(self, path: str, body: bytes) -> Answer | None:
        return self._answer("POST", path, b"", body, [])

    def _answer(self, method: str, path: str, query: bytes, body: bytes | None, headers, cands=None) -> Answer | None:
        state = self.state
        prep = endpoints.prepare(state, method, path, query, body, headers, cands=cands)
        if prep is None:
            return None
        ep, req, answer = prep
        if answer is not None:
            return answer
        if not ep.inline(req):
            return None  # the thread pool: HotPath
        return endpoints.keep(state, ep, path, query, ep.call(state, req))
