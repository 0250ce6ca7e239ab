"""The hot path: the cheap, frequent requests answered before FastAPI's router.

Measured with py-spy on `POST /route` (Andorra, one worker, wrk c=16): the engine's own work was 28 %
of the process's busy time; FastAPI's dependency solving and body validation 15 %, the thread-pool
hop 12 %, `jsonable_encoder` + `json.dumps` 10 %, the router and middleware layers the rest. For a
cached tile, search or point elevation the engine's share is smaller still.

`HotPath` is an ASGI middleware installed inside admission (server/admission.py: keys, quotas, body
limit and the rest). It answers the entries of the endpoint table (server/endpoints.py: tiles, sources
and TileJSON, search and reverse, the Nominatim dialect's /search and /reverse, point elevation and POST
/elevation, health, POST /route and its Valhalla GET form, POST /matrix, the OSRM dialect) without
Request/Response objects or dependency solving, when the entry's parse step accepts the request as it
stands.

Anything a parse step declines goes on to the application unchanged (a POST body is replayed), where
the route generated from the same entry gives the same answer and the 400 problem bodies. For a 100x100 /matrix, FastAPI's `jsonable_encoder` alone took about
100 times the engine's time (0.43 s against 4 ms); orjson writes the same document in a few
milliseconds (server/framing.py).

A point-to-point route (two locations, no alternates, no avoid polygons) runs on the event loop: it
costs a fraction of a millisecond of CPU, mostly under the GIL, less than the thread hop would; with
one worker process per core (`geoengine serve` default) the cores are used by processes. Heavier
route requests go to the thread pool with the GEOENGINE_REQUEST_TIMEOUT bound, as the FastAPI route
does. Responses are serialised with orjson.
"""

from __future__ import annotations

import logging

from geoengine.server import endpoints
from geoengine.server.framing import send_answer

log = logging.getLogger("geoengine.server")


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


class HotPath:
    """Answers the entries of the endpoint table (server/endpoints.py) before FastAPI's router."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]
        method = scope["method"]
        body = None
        if method == "POST":
            if next(endpoints.candidates(method, path), None) is None:
                return await self.app(scope, receive, send)
            body = await _read_body(receive)
            receive = _replay(body)
        state = scope["app"].state
        query = scope["query_string"]
        prep = endpoints.prepare(state, method, path, query, body, scope["headers"], scope)
        if prep is None:
            return await self.app(scope, receive, send)
        ep, req, answer = prep
        if answer is None:
            answer = endpoints.keep(state, ep, path, query, await endpoints.answer(state, ep, req))
        if answer is None:
            return await self.app(scope, receive, send)
        return await send_answer(send, answer, method == "HEAD")
