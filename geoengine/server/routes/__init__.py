"""Route modules of the façade. Each defines `router = APIRouter(...)`; app.py includes them in order."""

ROUTE_MODULES: list[str] = [
    "geoengine.server.routes.system",
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
    "geoengine.server.routes.traffic",
]
