"""The routing services: one module per operation, each with its typed request (and response schema)
models, used by the library (`Engine`), the CLI and the HTTP façade alike.

- `route` (typed `Route` / `RouteResult`), `route_options`, `alternates`, `matrix`, `optimised_route`,
  `isochrone`, `matching`, `directions`.
- `documents/`: the spec's documents from the typed results (the /route trip, /v1/routing/directions).

The search layer every service shares (profiles, snapping, shortest pieces, tables) is
`geoengine.routing.router`. Services import `geoengine.routing`, never the other way round, and hold no
Numba kernel; see docs/architecture.md.
"""
