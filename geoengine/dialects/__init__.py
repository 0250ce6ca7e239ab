"""Other engines' APIs over the one `Engine` (as OSRM's api/ and Valhalla's tyr sit above their engines).

Each dialect parses its peer's requests into the engine's typed requests, makes the engine calls and
renders the peer's response shapes and error codes. No HTTP here: the thin routes are in
`geoengine.server.routes`. The layers point downhill: server -> dialects -> engine -> services; nothing
below `Engine` imports this package (tests/test_architecture.py).

- `valhalla`: Valhalla's actions besides /route (/sources_to_targets, /trace_attributes, /height,
  /locate, ...): request models, engine calls, Valhalla's response shapes (docs/valhalla.md).
- `osrm`: OSRM's HTTP API v1 (route, table, match, nearest, trip): URL and query parsing, engine calls,
  OSRM's response shapes and error codes (docs/osrm.md).
- `nominatim`: Nominatim's v1 API (/search with `format`, /reverse, /lookup, /details, /status):
  Nominatim's parameters, response formats and error objects (docs/geocoding.md).
- `photon`: Photon's /api and /reverse (served under /photon): its GeoJSON and {"message"} errors.
"""


from __future__ import annotations

import functools
from typing import Any, NamedTuple

from geoengine.errors import GeoengineError, InvalidRequest


class Reply(NamedTuple):
    """A dialect's answer: HTTP status, document (JSON, or text), media type (None: application/json)."""

    status: int
    doc: Any
    media_type: str | None = None


class DialectError(Exception):
    """An answer in a dialect's own error shape: HTTP `status` (400 by default) with the dialect's `body()`."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.message = message
        self.status = status

    @classmethod
    def of(cls, exc: GeoengineError, *args) -> DialectError:
        """A domain error of the engine in this dialect's shape (its endpoint's arguments `args`): the
        error's status, with its fields' messages (an invalid request's) or its detail."""
        fields = exc.errors if isinstance(exc, InvalidRequest) else ()
        return cls("; ".join(e.message for e in fields) or exc.detail, exc.status)

    def reply(self) -> Reply:
        return Reply(self.status, self.body())


def replies(error: type[DialectError]):
    """A dialect endpoint returning a `Reply`, whose refusals, its own and the engine's (`error.of`),
    are its peer's error replies."""
    def wrap(endpoint):
        @functools.wraps(endpoint)
        def replying(*args) -> Reply:
            try:
                return endpoint(*args)
            except DialectError as exc:
                return exc.reply()
            except GeoengineError as exc:
                return error.of(exc, *args).reply()

        return replying

    return wrap
