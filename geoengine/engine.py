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


def _age_s(stamp: str | None) -> float | None:
    """Seconds from an ISO 8601 UTC timestamp to now (None when absent or unreadable)."""
    if not stamp:
        return None
    import datetime as dt

    try:
        when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return round((dt.datetime.now(dt.UTC) - when).total_seconds(), 1)


class Engine:
    def __init__(self, bundle: Bundle, settings: Settings | None = None):
        self.bundle = bundle
        self.settings = settings or Settings.from_env()
        self.started = time.monotonic()
        self._lock = threading.RLock()

    @classmethod
    def open(cls, path: str | Path, settings: Settings | None = None) -> Engine:
        return cls(Bundle.open(path), settings=settings)

    def __reduce__(self):
        """Pickling keeps only the bundle path and settings: unpickling reopens the bundle (memory-mapped,
        milliseconds), so multiprocessing, joblib and Dask workers can take an Engine."""
        return (reopen, (str(self.bundle.path), self.settings))

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
            "speeds": self.speeds_info(),
            "profiles": self.profiles_info(),
            # the OSM data's age (geoengine update keeps them current): ISO 8601, the replication
            # sequence number, seconds since the data's timestamp; None where the extract says nothing
            "data_timestamp": m.get("data_timestamp"),
            "replication_sequence": m.get("replication_sequence"),
            "data_age_s": _age_s(m.get("data_timestamp")),
        }

    def uptime_seconds(self) -> float:
        return time.monotonic() - self.started

    def require_stage(self, name: str, what: str) -> Path:
        if not self.bundle.has_stage(name):
            raise Unavailable(f"{what} is not available: bundle {self.bundle.path} was built without the '{name}' stage")
        return self.bundle.path / name

    def warm(self) -> None:
        """Open every component the bundle has and customise the car over the whole graph (the server's
        start-up: the first request is fast). `geoengine warm`, which only fills the compile cache, runs
        the request paths on a small bundle cut out of this one instead (geoengine.analysis.warm)."""
        self.elevation(lon=[0.0], lat=[0.0])  # elevation: map the DEM tiles, load the compiled sampler
        if self.bundle.has_stage("search"):
            self.search_index.warm()
            from geoengine.search.geocode import geocoder_for

            geocoder_for(self.search_index).warm()  # its tables, before the first geocoding request
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
        """The bundle's `geoengine.routing.router.Router`; Unavailable without a graph stage."""
        from geoengine.routing.router import Router

        ch_dir = self.bundle.path / "routing" if self.bundle.has_stage("routing") else None
        with self._lock:
            return Router(self.graph, self.snapper, ch_dir, cch_cache_bytes=self.settings.cch_cache_bytes,
                          speed_store=self.speed_store, time_of_day=self.time_of_day,
                          speeds_spare=self.settings.speeds_spare)

    # -- measured speeds (geoengine/traffic; docs/traffic.md) -----------------------------------------
    @cached_property
    def speed_store(self):
        """The bundle's measured speeds (`geoengine.traffic.SpeedStore`), stored beside the bundle in
        `<bundle>.speeds/` (the bundle folder itself is never written), or in Settings.speeds_dir."""
        from geoengine.traffic import SpeedStore

        return SpeedStore(self.bundle.path, self.bundle.manifest.get("created"), self.settings.speeds_dir)

    def apply_speeds(self, source, *, form: str | None = None, label: str | None = None) -> dict:
        """Measured speeds for the motor costings (auto, auto_shorter, bus, taxi, truck, motorcycle,
        motor_scooter), each capped by its own top speed: `source` a path to OSRM's segment speed file
        (from_osm_node_id,to_osm_node_id,speed_kmh[,rate]) or to the per-way form
        (way_id,speed_kmh[,direction]), CSV bytes, or a pandas DataFrame with those columns. Checked
        whole first (SpeedFileError naming the first bad line; nothing applied), then stored beside the
        bundle, where every process serving it picks them up before its next request. Routes, matrices,
        isochrones, optimised routes and both dialects answer with them from the next call on. Returns
        what /health shows: generation, source (`label` if given), sha256, form, rows, edges, applied_at."""
        self.require_stage("graph", "routing")
        info = self.speed_store.apply(self.graph, source, form, label)
        if "router" in self.__dict__:
            self.router.sync_speeds()
        return info

    @cached_property
    def time_of_day(self):
        """The bundle's time-of-day profiles (`geoengine.traffic.timeofday.TimeOfDay` over a
        `ProfileStore`), stored beside the measured speeds (docs/traffic.md)."""
        from geoengine.traffic.profiles import ProfileStore
        from geoengine.traffic.timeofday import TimeOfDay

        return TimeOfDay(ProfileStore(self.bundle.path, self.bundle.manifest.get("created"), self.settings.speeds_dir))

    def apply_profiles(self, source, *, label: str | None = None) -> dict:
        """Time-of-day speed profiles (7 days x 96 quarter hours) for the motor costings, from a profile
        file (docs/traffic.md: named profiles and the ways or node pairs that take them, or each row's own
        672 speeds): path, bytes or text. Checked whole first (SpeedFileError naming the first bad line;
        nothing applied), then stored beside the bundle. Routes, matrices and isochrones with a
        `date_time` use them from the next call on. Returns what /health shows under `profiles`."""
        self.require_stage("graph", "routing")
        info = self.time_of_day.store.apply(self.graph, source, label=label)
        self.time_of_day.sync(self.graph)
        return info

    def reset_profiles(self) -> dict:
        """No time-of-day profiles (a new generation without a file; every process switches)."""
        info = self.time_of_day.store.reset()
        self.time_of_day.sync(self.graph)
        return info

    def profiles_info(self) -> dict | None:
        """The time-of-day profiles in force (None: none ever applied; `file` null after a reset)."""
        if not self.bundle.has_stage("graph"):
            return None
        return self.time_of_day.store.read_info()

    def reset_speeds(self) -> dict:
        """Back to the costings' profile speeds (stored as a new generation; every process switches)."""
        info = self.speed_store.reset()
        if "router" in self.__dict__:
            self.router.sync_speeds()
        return info

    def speeds_info(self) -> dict | None:
        """The measured speeds in force (None: the profile speeds; after a reset, `file` is null)."""
        if not self.bundle.has_stage("graph"):
            return None
        return self.speed_store.read_info()

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
        from geoengine.services.documents.trip import route_document
        from geoengine.validation import validate

        req = validate(route.RouteRequest, request, **fields)
        return route_document(route.run(self, req), alternates_requested=bool(req.alternates))

    def matrix(self, sources, targets, costing: str = "auto", costing_options=None, *, unsnappable: str = "raise",
               date_time=None):
        """Many-to-many travel times and distances for notebooks: `sources`, `targets` as arrays of
        (lon, lat) rows. Returns a MatrixResult with numpy arrays `time_s`, `distance_m` [N, M] (inf where
        no route), the snapped `sources`, `targets`, and `snapped` / `snap_distance_m` (per sources and
        targets). `unsnappable="nan"`: points with no road in reach get NaN rows/columns instead of
        failing the call (docs/analysis.md). `.to_pandas()` via geoengine.to_pandas. `date_time`
        ({"type": 0|1|3, "value": "YYYY-MM-DDTHH:MM"}): the departure's quarter hour selects the
        time-of-day profile speeds (docs/traffic.md)."""
        from geoengine.services import unsnappable as U
        from geoengine.services.route_options import selection

        U.check_mode(unsnappable)
        src = _rows(sources, "sources")
        dst = _rows(targets, "targets")
        sel = selection(date_time)
        if sel is not None and sel.kind == 2:
            from geoengine.errors import InvalidRequest

            raise InvalidRequest.field("date_time.type", "a matrix takes a departure time (type 0, 1 or 3), not arrive_by (2)")
        return U.matrix(self.router, src, dst, costing, costing_options, unsnappable, bucket=sel)

    def matrix_request(self, request=None, **fields) -> dict:
        """The /matrix document for a `MatrixRequest` (or dict / keyword fields)."""
        from geoengine.services import matrix
        from geoengine.validation import validate

        return matrix.matrix_document(self.router, validate(matrix.MatrixRequest, request, **fields))

    def route_many(self, origins, destinations, costing: str = "auto", costing_options=None, *,
                   unsnappable: str = "raise", geometry: bool = False):
        """Batch form: the route from origins[i] to destinations[i] for every i (arrays of (lon, lat)
        rows). Returns a RouteManyResult: `time_s`, `distance_m` float64 arrays (inf where there is no
        route, NaN for a point off the network with `unsnappable="nan"`), `snapped`, `snap_distance_m`,
        and with `geometry=True` one shapely LineString per pair; it unpacks as (time_s, distance_m)."""
        from geoengine.services import unsnappable as U

        U.check_mode(unsnappable)
        o = _rows(origins, "origins")
        d = _rows(destinations, "destinations")
        if o.shape != d.shape:
            from geoengine.errors import InvalidRequest

            raise InvalidRequest.field("destinations", "origins and destinations must have the same length")
        return U.route_many(self.router, o, d, costing, costing_options, unsnappable, geometry)

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

    def isochrones(self, origins, contours, costing: str = "auto", costing_options=None, *,
                   polygons: bool = True, denoise: float = 1.0, generalize=None, as_frame: bool = False,
                   progress=None):
        """Isochrones of many origins in one call: `origins` (n, 2) rows of (lon, lat), `contours` like
        /isochrone's ([{"time": 10}, {"distance": 5}] or plain numbers = minutes). Each origin is one
        compiled reach search + contouring, spread over both cores. Returns a list of FeatureCollections
        (one per origin, in order), or with `as_frame=True` one GeoDataFrame (EPSG:4326) with an `origin`
        column. See docs/analysis.md."""
        from geoengine.services.batch_iso import isochrones

        return isochrones(self, origins, contours, costing, costing_options, polygons=polygons,
                          denoise=denoise, generalize=generalize, as_frame=as_frame, progress=progress)
    # -- end of isochrones block ---------------------------------------------------------------------
    # -- analysis (geoengine/analysis; docs/analysis.md) ----------------------------------------------
    def network(self, costing: str = "auto", costing_options=None):
        """The routable network of `costing` as documented arrays (`geoengine.routing.network.Network`:
        nodes lon/lat/osm_id, edges src/dst/length_m/time_s/cost) with .to_networkx(), .to_scipy(),
        .to_igraph() and .turns() (the edge-based graph the router searches). Cached per costing for the
        default options."""
        from geoengine.routing.network import Network

        router = self.router
        options = router.parse_options(costing, costing_options)
        prof = router.profile(costing, options)
        with self._lock:
            cache = self._components.setdefault("networks", {})
            key = (costing, id(prof))
            net = cache.get(key)
            if net is None or net.profile is not prof:
                net = cache[key] = Network(self.graph, prof)
            return net

    def accessibility(self, pois, costing: str = "auto", *, max_time_s=None, max_distance_m=None,
                      aggregation: str = "count", weights=None, at="nodes", costing_options=None):
        """pandana-style aggregation of POIs ((n, 2) lon/lat rows, or a GeoDataFrame of points) within
        `max_time_s` or `max_distance_m` of every junction (`at="nodes"`) or of given (lon, lat) points:
        "count", or "sum" / "mean" / "min" / "max" of `weights` (one per POI). Returns an
        AccessibilityResult (value, count, node, snap_distance_m; .to_pandas()). See docs/analysis.md."""
        from geoengine.routing.access import accessibility

        return accessibility(self.network(costing, costing_options), pois, max_time_s=max_time_s,
                             max_distance_m=max_distance_m, aggregation=aggregation, weights=weights, at=at)

    def nearest_pois(self, points, pois, k: int = 1, costing: str = "auto", *, max_time_s=None,
                     max_distance_m=None, costing_options=None):
        """The k nearest POIs of each point over the network within the limit: NearestPoisResult with
        distance [n, k] (seconds or metres, inf where fewer in reach) and poi [n, k] (indices, -1)."""
        from geoengine.routing.access import nearest_pois

        return nearest_pois(self.network(costing, costing_options), points, pois, k, max_time_s=max_time_s,
                            max_distance_m=max_distance_m)
    # -- end of analysis ------------------------------------------------------------------------------

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

    def elevation(self, points=None, *old_order, lon=None, lat=None):
        """Heights in metres at points given as (lon, lat) rows (`engine.elevation([[1.52, 42.51], ...])`)
        or as `lon=`, `lat=` arrays by name (the result is shaped like `lat`); NaN outside the DEM coverage
        and where the DEM has only voids around a point. Two positional arrays were the old
        `elevation(lats, lons)` order and raise InvalidRequest (ambiguous): name them."""
        from geoengine.elevation import query

        lons, lats = _lon_lat(points, old_order, lon, lat, "elevation")
        return query.heights(self._elevation, lats, lons)

    def elevation_at(self, *point, lon=None, lat=None) -> float:
        """Height in metres at one point: `elevation_at(lon=..., lat=...)` or `elevation_at((lon, lat))`;
        InvalidRequest for impossible coordinates or two positional numbers (the old (lat, lon) order),
        OutsideCoverage when the bundle's DEM has no height there."""
        from geoengine.elevation import query

        x, y = _one_lon_lat(point, lon, lat, "elevation_at")
        return query.height_at(self._elevation, y, x, bundle_name=str(self.bundle.path))

    def elevation_profile(self, points=None, *old_order, lon=None, lat=None, encoded_polyline=None,
                          precision: int = 6, max_points=None, lats=None, lons=None):
        """Heights and cumulative great-circle distances along a shape given as (lon, lat) rows, as
        `lon=`/`lat=` arrays (`lons=`/`lats=` are accepted too) or as an encoded polyline (exactly one).
        `max_points` defaults to Settings.elevation_max_points."""
        from geoengine.elevation import query

        lon = lons if lon is None else lon
        lat = lats if lat is None else lat
        if points is None and lon is None and lat is None and not old_order:
            xs = ys = None
        else:
            xs, ys = _lon_lat(points, old_order, lon, lat, "elevation_profile")
        return query.profile(
            self._elevation,
            lats=ys,
            lons=xs,
            encoded_polyline=encoded_polyline,
            precision=precision,
            max_points=self.settings.elevation_max_points if max_points is None else max_points,
            bundle_name=str(self.bundle.path),
        )

    def elevation_request(self, request=None, **fields) -> dict:
        """The /elevation document of an `ElevationRequest` (or dict / keyword fields: `shape` or
        `encoded_polyline`, `range`): `{"height": [...]}`, or `{"range_height": [[m, height], ...]}`;
        NaN where the DEM has no height."""
        from geoengine.services.elevation import ElevationRequest, profile_document
        from geoengine.validation import validate

        return profile_document(self, validate(ElevationRequest, request, **fields))

    # -- end of elevation ------------------------------------------------------------------------------
    # -- search (geoengine.search) ------------------------------------------------------------------
    @cached_property
    def search_index(self):
        """The bundle's search index (memory-mapped); UpstreamError when its files cannot be read."""
        from geoengine.search.index import SearchIndex

        return SearchIndex(self.require_stage("search", "search"))

    def search(self, q: str, types=None, lat: float | None = None, lon: float | None = None, size: int = 10,
               categories=None, bbox=None, countries=None) -> dict:
        """Autocomplete search: {query, total, took_ms, results: [Search Result dict]}; see docs/search.md.
        Filters: `categories` (preset ids, tags or category words), `bbox` (min_lon,min_lat,max_lon,max_lat),
        `countries` (ISO 3166-1 alpha-2 codes); each a comma-separated string or a list."""
        return self.search_index.search(q, types=types, lat=lat, lon=lon, size=size, categories=categories, bbox=bbox,
                                        countries=countries)

    def reverse(self, *point, lon=None, lat=None, radius="2km", size: int = 5, types=None, categories=None,
                zoom=None, lang=None):
        """Nearest documents to a point, nearest first, each with distance_m: {lat, lon, took_ms, results};
        `categories` keeps documents of those categories ("nearest pharmacy"). The point:
        `reverse(lon=..., lat=...)` or `reverse((lon, lat))`; two positional numbers were the old
        reverse(lat, lon) order and raise InvalidRequest (ambiguous): name them.

        With `zoom` (0-18, Nominatim's reverse): `Places` of at most one Place, the object of that level at
        the point: 18 the nearest address (with its house number), 16-17 the street, 14-15 the suburb or
        neighbourhood, 12-13 the village or town, 10 the city, 8 the county, 5-6 the state, 3-4 the country."""
        x, y = _one_lon_lat(point, lon, lat, "reverse")
        if zoom is None:
            return self.search_index.reverse(y, x, radius=radius, size=size, types=types, categories=categories)
        from geoengine.search.geocode import Places, check_zoom, geocoder_for, reverse_row
        from geoengine.search.requests import _check_point

        z = check_zoom(zoom)
        y, x = _check_point(y, x, required=True)
        geo = geocoder_for(self.search_index)
        hit = reverse_row(geo, y, x, z)
        if hit is None:
            return Places()
        row, hn, dist = hit
        return Places([geo.place(row, lang=lang, housenumber=hn, distance_m=dist)])

    def geocode(self, q=None, *, street=None, city=None, county=None, state=None, country=None, postalcode=None,
                amenity=None, limit=10, lang=None, viewbox=None, bounded=False, countrycodes=None, layer=None,
                feature_type=None, exclude_place_ids=None, lat=None, lon=None, location_bias_scale=None,
                osm_tag=None, dedupe=True):
        """Geocode an address or place as people type it, or by structured fields: `Places` best first
        (see docs/search.md, Geocoding). `q` free form ("Meritxell 11 Andorra la Vella", "restaurants in
        Vaduz", "[amenity=pharmacy] Vaduz", "47.16 N 9.51 E") or the structured `street` (with its number),
        `city`, `county`, `state`, `country`, `postalcode`, `amenity` (not both). Filters: `viewbox`
        (x1,y1,x2,y2; a bias unless `bounded`), `countrycodes`, `layer` (address, poi, railway, natural,
        manmade), `feature_type` (country, state, city, settlement), `exclude_place_ids`; `lat`/`lon` a
        location bias (`location_bias_scale` 0-1: how far it reaches), `osm_tag` Photon's filters (key:value,
        key, :value, !-negated; a string or a list). Bad arguments
        raise InvalidRequest naming the field."""
        from geoengine.search.geocode import Places, geocoder_for

        geo = geocoder_for(self.search_index)
        found = geo.geocode(q, street=street, city=city, county=county, state=state, country=country,
                            postalcode=postalcode, amenity=amenity, limit=limit, lang=lang, viewbox=viewbox,
                            bounded=bounded, countrycodes=countrycodes, layer=layer, feature_type=feature_type,
                            exclude_place_ids=exclude_place_ids, lat=lat, lon=lon,
                            location_bias_scale=location_bias_scale, osm_tag=osm_tag, dedupe=dedupe)
        return Places(geo.place(row, lang=lang, housenumber=hn, score=score, distance_m=dist)
                      for row, score, hn, dist in found)

    def lookup(self, ids, *, lang=None):
        """`Places` of OSM ids in Nominatim's osm_ids form ("N123,W456,R789" or a list), in the order
        given; ids the bundle does not hold are left out."""
        from geoengine.search.geocode import Places, geocoder_for, lookup_rows

        geo = geocoder_for(self.search_index)
        return Places(geo.place(row, lang=lang) for row in lookup_rows(self.search_index, ids))

    def place(self, doc_id: str) -> dict:
        """One document by id or canonical id (NotFound when missing); `score` is null; with its full
        details (names, categories, address, osm, tags, geometry, merged): see docs/search.md."""
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


_OLD_ORDER = ("two positional coordinates are ambiguous: {name} used to take (lat, lon) and now takes "
              "(lon, lat); pass them by name (lon=..., lat=...) or as (lon, lat) rows")


def _rows(points, field: str):
    """float64 (n, 2) (lon, lat) rows of a batch call's `field` (a flat (lon, lat) pair is one row): at
    least one, else InvalidRequest naming the field (never numpy's ValueError)."""
    import numpy as np

    from geoengine.errors import InvalidRequest

    try:
        arr = np.asarray(points, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidRequest.field(field, "must be (lon, lat) rows of numbers") from None
    if arr.size == 0:
        raise InvalidRequest.field(field, "must hold at least one (lon, lat) point")
    if arr.size % 2 or (arr.ndim > 1 and arr.shape[-1] != 2):
        raise InvalidRequest.field(field, f"must be (lon, lat) rows, got shape {arr.shape}")
    return arr.reshape(-1, 2)


def _lon_lat(points, old_order, lon, lat, name: str):
    """(lons, lats) float64 arrays of a call taking (lon, lat) rows or lon=/lat= keywords."""
    import numpy as np

    from geoengine.errors import InvalidRequest

    if old_order:
        raise InvalidRequest.field("lat", _OLD_ORDER.format(name=name))
    if points is not None:
        if lon is not None or lat is not None:
            raise InvalidRequest.field("points", "give (lon, lat) rows or lon= and lat=, not both")
        try:
            a = np.asarray(points, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidRequest.field("points", "must be (lon, lat) rows of numbers") from None
        if a.ndim == 1 and a.shape[0] == 2:
            a = a.reshape(1, 2)
        if a.ndim != 2 or a.shape[1] != 2:
            raise InvalidRequest.field("points", f"must be (lon, lat) rows, shape (n, 2); got shape {a.shape}")
        return a[:, 0], a[:, 1]
    if lon is None or lat is None:
        raise InvalidRequest.field("lat" if lat is None else "lon", "give (lon, lat) rows or both lon= and lat=")
    return lon, lat


def _one_lon_lat(point, lon, lat, name: str) -> tuple:
    """(lon, lat) of a call taking one point as lon=/lat= keywords or one (lon, lat) pair."""
    from geoengine.errors import InvalidRequest

    if len(point) > 1:
        raise InvalidRequest.field("lat", _OLD_ORDER.format(name=name))
    if point:
        if lon is not None or lat is not None:
            raise InvalidRequest.field("lon", "give one (lon, lat) pair or lon= and lat=, not both")
        try:
            lon, lat = point[0]
        except (TypeError, ValueError):
            raise InvalidRequest.field("lon", f"{name} takes one (lon, lat) pair or lon=, lat= by name") from None
    if lon is None or lat is None:
        raise InvalidRequest.field("lat" if lat is None else "lon", "give both lon= and lat=")
    return lon, lat


def reopen(path: str, settings):
    """Unpickle an Engine: one per bundle path and settings in each process (workers reuse it)."""
    key = (path, settings)
    engine = _REOPENED.get(key)
    if engine is None:
        engine = _REOPENED[key] = Engine.open(path, settings=settings)
    return engine


_REOPENED: dict = {}
