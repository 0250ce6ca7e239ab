"""Serializers: one typed result, rendered per dialect (as Valhalla's tyr does). Pure functions from the
services' typed results to JSON-ready documents; no HTTP here.

- `trip`: the POST /route, /optimised_route and /map_match trip document (Valhalla's trip shape).
- `directions`: the POST /v1/routing/directions document.
- `valhalla`: Valhalla's other actions (/sources_to_targets, /trace_attributes, /height, /locate, ...):
  request models, the engine calls and Valhalla's response shapes (docs/valhalla.md).
- `osrm`: OSRM's HTTP API v1 (route, table, match, nearest, trip): URL and query parsing, the engine
  calls and OSRM's response shapes and error codes (docs/osrm.md).

The thin HTTP routes of the last two are `geoengine.server.routes.valhalla` and `.osrm`.
"""
