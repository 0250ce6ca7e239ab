"""Dialects: the Valhalla and OSRM HTTP APIs served from the same engine calls as the spec endpoints.

Each dialect module parses its wire format into the engine's request models, makes the engine call(s)
and renders the result in the dialect's response shape. They never see HTTP: `geoengine.server.routes.
valhalla` and `.osrm` are the thin HTTP routes. See docs/valhalla.md and docs/osrm.md.
"""
