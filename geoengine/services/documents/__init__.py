"""The spec's own response documents, rendered from the services' typed results (pure functions, no HTTP):

- `trip`: the POST /route, /optimised_route and /map_match trip document (Valhalla's trip shape).
- `directions`: the POST /v1/routing/directions document.

Other engines' dialects (OSRM, Valhalla, Nominatim, Photon) sit above `Engine`, in `geoengine.dialects`.
"""
