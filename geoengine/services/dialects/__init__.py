"""Serializers: one typed result, rendered per dialect (as Valhalla's tyr does). Pure functions from the
services' typed results to JSON-ready documents; no HTTP here.

- `trip`: the POST /route, /optimised_route and /map_match trip document (Valhalla's trip shape).
- `directions`: the POST /v1/routing/directions document.
"""
