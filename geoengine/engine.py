"""The Engine: one object per bundle, serving the library API, the HTTP façade and the CLI alike.

Components (router, geocoder, tiles, elevation) are opened lazily from the bundle's stage folders
the first time they are used, and raise `Unavailable` when the bundle lacks their stage.
"""

from __future__ import annotations

import threading
import time
from functools import cached_property
from pathlib import Path

from geoengine import __version__
from geoengine.bundle import Bundle
from geoengine.config import Settings
from geoengine.errors import Unavailable


class Engine:
    def __init__(self, bundle: Bundle, settings: Settings | None = None):
        self.bundle = bundle
        self.settings = settings or Settings.from_env()
        self.started = time.monotonic()
        self._lock = threading.RLock()

    @classmethod
    def open(cls, path: str | Path, settings: Settings | None = None) -> Engine:
        return cls(Bundle.open(path), settings=settings)

    # -- metadata -------------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        return self.bundle.path

    @property
    def bbox(self):
        return self.bundle.bbox

    def info(self) -> dict:
        m = self.bundle.manifest
        return {
            "bundle": str(self.bundle.path),
            "region": m.get("region"),
            "bbox": m.get("bbox"),
            "built": m.get("created"),
            "built_by": m.get("geoengine_version"),
            "geoengine_version": __version__,
            "stages": sorted(self.bundle.stages),
        }

    def uptime_seconds(self) -> float:
        return time.monotonic() - self.started

    def require_stage(self, name: str, what: str) -> Path:
        if not self.bundle.has_stage(name):
            raise Unavailable(f"{what} is not available: bundle {self.bundle.path} was built without the '{name}' stage")
        return self.bundle.path / name

    def warm(self) -> None:
        """Open every component the bundle has (used by the server at start-up)."""
        self.elevation([0.0], [0.0])  # elevation: map the DEM tiles, load the compiled sampler
        if self.bundle.has_stage("search"):
            self.search_index.warm()
        if self.bundle.has_stage("graph"):
            self.router.warm()
            from geoengine.services.isochrone import warm as warm_isochrone

            warm_isochrone(self.router)
            self.matcher.warm(self.router.profile("auto"))
        if self.bundle.has_stage("tiles") or self.settings.tiles_dir:
            self.tiles  # noqa: B018 - opening is the point

    @cached_property
    def _components(self) -> dict:
        return {}

    # -- road graph, costing, snapping (graph helper; the router builds on these) -------------------
    @cached_property
    def graph(self):
        """The bundle's road graph (`geoengine.graph.Graph`, memory-mapped); Unavailable without it.
        Carries the segment grades from the DEM when the bundle has them (`meta["grades"]`)."""
        from geoengine.elevation.grades import attach_grades
        from geoengine.graph import Graph

        graph = Graph.open(self.require_stage("graph", "routing"))
        attach_grades(graph, self.bundle.path)
        return graph

    @cached_property
    def snapper(self):
        """Spatial index over the graph's edges (`geoengine.routing.snap.Snapper`), built on first use."""
        from geoengine.routing.snap import Snapper

        with self._lock:
            return Snapper(self.graph)

    def costings(self) -> list[str]:
        """Names of the costings (travel modes) the engine offers."""
        from geoengine.costing import COSTINGS

        return list(COSTINGS)

    def costing_options(self, costing: str) -> dict:
        """Option schema of one costing (body of GET /costing/options/{costing})."""
        from geoengine.costing import costing_options_schema

        return costing_options_schema(costing)
    # -- end of road graph block --------------------------------------------------------------------
    # -- routing: the router (search layer) and the services (geoengine/services; docs/routing.md) ------
    @cached_property
    def router(self):
        """The bundle's `geoengine.services.router.Router`; Unavailable without a graph stage."""
        from geoengine.services.router import Router

        ch_dir = self.bundle.path / "routing" if self.bundle.has_stage("routing") else None
        with self._lock:
            return Router(self.graph, self.snapper, ch_dir)

    def compute_route(self, request=None, **fields):
        """The typed result of a route request (`geoengine.services.route.RouteResult`: the best `Route`
        first, then its alternates), with the options alternates, linear_references,
        elevation_interval and date_time applied. Same arguments as `route`."""
        from geoengine.services import route
        from geoengine.validation import validate

        return route.run(self, validate(route.RouteRequest, request, **fields))

    def route(self, request=None, **fields) -> dict:
        """A route between two or more locations: `engine.route(locations=[{"lon":..,"lat":..}, ...],
        costing="auto", costing_options={...}, directions_options={...}, shape_format=...)` or a
        `RouteRequest` / dict. Returns the trip document of POST /route (`compute_route` gives the
        typed result)."""
        from geoengine.services import route
        from geoengine.services.dialects.trip import route_document
        from geoengine.validation import validate

        req = validate(route.RouteRequest, request, **fields)
        return route_document(route.run(self, req), alternates_requested=bool(req.alternates))

    def matrix(self, sources, targets, costing: str = "auto", costing_options=None):
        """Many-to-many travel times and distances for notebooks: `sources`, `targets` as arrays of
        (lon, lat) rows. Returns a MatrixResult with numpy arrays `time_s`, `distance_m` [N, M] (inf where
        no route) and the snapped `sources`, `targets`."""
        return self.router.matrix(sources, targets, costing, costing_options)

    def matrix_request(self, request=None, **fields) -> dict:
        """The /matrix document for a `MatrixRequest` (or dict / keyword fields)."""
        from geoengine.services import matrix
        from geoengine.validation import validate

        return matrix.matrix_document(self.router, validate(matrix.MatrixRequest, request, **fields))

    def route_many(self, origins, destinations, costing: str = "auto", costing_options=None):
        """Batch form: the route from origins[i] to destinations[i] for every i (arrays of (lon, lat)
        rows). Returns (time_s, distance_m) float64 arrays, inf where there is no route."""
        import numpy as np

        o = np.asarray(origins, dtype=np.float64).reshape(-1, 2)
        d = np.asarray(destinations, dtype=np.float64).reshape(-1, 2)
        if o.shape != d.shape:
            from geoengine.errors import InvalidRequest

            raise InvalidRequest.field("destinations", "origins and destinations must have the same length")
        return self.router.route_many(o, d, costing, costing_options)

    def isochrone(self, request=None, **fields) -> dict:
        """Reachability contours of one location: `engine.isochrone(locations=[{"lon":..,"lat":..}],
        costing="auto", contours=[{"time": 10}, {"distance": 5}], polygons=True, denoise=1.0,
        generalize=None, show_locations=True)` or an `IsochroneRequest` / dict. Returns the GeoJSON
        FeatureCollection of POST /isochrone."""
        from geoengine.services.isochrone import IsochroneRequest, isochrone
        from geoengine.validation import validate

        return isochrone(self.router, validate(IsochroneRequest, request, **fields))

    def isochrone_reach(self, lon: float, lat: float, costing: str = "auto", costing_options=None, *,
                        metric: str = "time", limit: float = 600.0):
        """Per-edge reach arrays for notebooks (`geoengine.routing.isochrone.Reach`): where each directed
        edge is entered and finished, in seconds (metric "time") or metres ("distance"), within `limit`."""
        from geoengine.services.isochrone import reach

        return reach(self.router, lon, lat, costing, costing_options, metric=metric, limit=limit)

    @cached_property
    def matcher(self):
        """The bundle's `geoengine.routing.matching.Matcher` (HMM map matching over the router)."""
        from geoengine.routing.matching import Matcher

        router = self.router
        with self._lock:
            return Matcher(router)

    def map_match(self, request=None, **fields) -> dict:
        """Match a GPS trace to the roads: `engine.map_match(shape=[{"lon":..,"lat":..}, ...] or
        encoded_polyline=..., shape_match="map_snap", costing="auto", trace_options={...})` or a
        `MapMatchRequest` / dict. Returns the /map_match document (a /route-shaped `trip`)."""
        from geoengine.services.matching import MapMatchRequest, map_match_document
        from geoengine.validation import validate

        return map_match_document(self.matcher, validate(MapMatchRequest, request, **fields))

    def trace_attributes(self, request=None, **fields) -> dict:
        """Like `map_match`, but returns the /map_match/attributes document: matched `edges` (names,
        length, speed, road_class, way_id, shape indices), `matched_points` and the encoded `shape`."""
        from geoengine.services.matching import MapMatchRequest, attributes_document
        from geoengine.validation import validate

        return attributes_document(self.matcher, validate(MapMatchRequest, request, **fields))

    def match_trace(self, lons, lats, costing: str = "auto", costing_options=None, **trace_options):
        """Notebook form: arrays of lon, lat -> `MatchResult` (numpy arrays per point, matched sections).
        `trace_options`: search_radius, gps_accuracy, breakage_distance, interpolation_distance, and
        mode ('map_snap' or 'edge_walk')."""
        router = self.router
        prof = router.profile(costing, router.parse_options(costing, costing_options))
        return self.matcher.match(prof, lons, lats, **trace_options)

    def directions(self, request=None, **fields) -> dict:
        """POST /v1/routing/directions: `engine.directions(waypoints=[{"lon":..,"lat":..}, ...],
        profile="driving", geometry="geojson", alternatives=False, steps=True, language="en")` or a
        `DirectionsRequest` / dict. Returns {routes: [...], waypoints: [...]}."""
        from geoengine.services.directions import DirectionsRequest, directions
        from geoengine.validation import validate

        return directions(self, validate(DirectionsRequest, request, **fields))

    def optimised_route(self, request=None, **fields) -> dict:
        """POST /optimised_route: the best visiting order of the locations (first and last fixed) and the
        trip through them in that order: `engine.optimised_route(locations=[...], costing="auto")`."""
        from geoengine.services.optimised_route import OptimisedRouteRequest, optimised_route
        from geoengine.validation import validate

        return optimised_route(self, validate(OptimisedRouteRequest, request, **fields))

    def route_with_options(self, request=None, **fields) -> dict:
        """The same as `route` (kept for callers of the earlier name)."""
        return self.route(request, **fields)
    # -- end of routing block ------------------------------------------------------------------------

    # -- elevation (geoengine/elevation; docs/elevation.md) -------------------------------------------
    @cached_property
    def _elevation(self):
        """The bundle's ElevationModel, or None when it was built without a DEM."""
        if not self.bundle.has_stage("elevation"):
            return None
        from geoengine.elevation.model import ElevationModel

        return ElevationModel.open(self.bundle.path / "elevation")

    def elevation(self, lats, lons):
        """Heights in metres (float64 array shaped like `lats`) at the given points; NaN outside the
        DEM coverage and where the DEM has only voids around a point."""
        from geoengine.elevation import query

        return query.heights(self._elevation, lats, lons)

    def elevation_at(self, lat: float, lon: float) -> float:
        """Height in metres at one point; InvalidRequest for impossible coordinates, OutsideCoverage
        when the bundle's DEM has no height there."""
        from geoengine.elevation import query

        return query.height_at(self._elevation, lat, lon, bundle_name=str(self.bundle.path))

    def elevation_profile(self, lats=None, lons=None, *, encoded_polyline=None, precision: int = 6, max_points=None):
        """Heights and cumulative great-circle distances along a shape given as coordinates or as an
        encoded polyline (exactly one). `max_points` defaults to Settings.elevation_max_points."""
        from geoengine.elevation import query

        return query.profile(
            self._elevation,
            lats=lats,
            lons=lons,
            encoded_polyline=encoded_polyline,
            precision=precision,
            max_points=self.settings.elevation_max_points if max_points is None else max_points,
            bundle_name=str(self.bundle.path),
        )

    # -- end of elevation ------------------------------------------------------------------------------
    # -- search (geoengine.search) ------------------------------------------------------------------
    @cached_property
    def search_index(self):
        """The bundle's search index (memory-mapped); UpstreamError when its files cannot be read."""
        from geoengine.search.index import SearchIndex

        return SearchIndex(self.require_stage("search", "search"))

    def search(self, q: str, types=None, lat: float | None = None, lon: float | None = None, size: int = 10) -> dict:
        """Autocomplete search: {query, total, took_ms, results: [Search Result dict]}; see docs/search.md."""
        return self.search_index.search(q, types=types, lat=lat, lon=lon, size=size)

    def reverse(self, lat: float, lon: float, radius="2km", size: int = 5, types=None) -> dict:
        """Nearest documents to a point, nearest first, each with distance_m: {lat, lon, took_ms, results}."""
        return self.search_index.reverse(lat, lon, radius=radius, size=size, types=types)

    def place(self, doc_id: str) -> dict:
        """One document by id or canonical id (NotFound when missing); `score` is null."""
        return self.search_index.place(doc_id)

    # -- end search ---------------------------------------------------------------------------------
    # -- tiles (geoengine/tiles) ------------------------------------------------------------------
    @cached_property
    def tiles(self):
        """The TileService: every .mbtiles/.pmtiles of the bundle's `tiles/` folder and of
        Settings.tiles_dir is a source (id = file stem); tile bytes are cached within
        Settings.tile_cache_bytes. See docs/tiles.md."""
        from geoengine.tiles.service import TileService
        from geoengine.tiles.sources import discover

        folders = []
        if self.bundle.has_stage("tiles"):
            folders.append(self.bundle.path / "tiles")
        if self.settings.tiles_dir:
            folders.append(self.settings.tiles_dir)
        return TileService(discover(folders), self.settings.tile_cache_bytes)

    # -- end tiles --------------------------------------------------------------------------------
