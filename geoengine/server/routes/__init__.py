"""Route modules of the façade. Each defines `router = APIRouter(...)`; app.py includes them in order."""

ROUTE_MODULES: list[str] = [
    "geoengine.server.routes.system",
    # before search and valhalla: its raw /search and /status routes send a request with Nominatim's
    # `format` parameter to the Nominatim dialect, any other to the spec's /search or Valhalla's /status
    "geoengine.server.routes.nominatim",
    "geoengine.server.routes.routing",
    "geoengine.server.routes.isochrone",
    "geoengine.server.routes.elevation",
    "geoengine.server.routes.search",
    "geoengine.server.routes.tiles",
    "geoengine.server.routes.matching",
    "geoengine.server.routes.directions",
    "geoengine.server.routes.optimised_route",
    "geoengine.server.routes.valhalla",
    "geoengine.server.routes.osrm",
    "geoengine.server.routes.photon",
    "geoengine.server.routes.traffic",
]
