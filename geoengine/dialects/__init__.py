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


class DialectError(Exception):
    """An answer in a dialect's own error shape: HTTP `status` (400 by default) with the dialect's `body()`."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.message = message
        self.status = status
