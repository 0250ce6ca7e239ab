"""The input contract of the narrative layer: `PathInfo`, one routed leg or route as plain arrays.

The router fills a `PathInfo` from the edges it traversed; `build_maneuvers` reads nothing else. Every
per-edge array has the same length E (the number of traversed edges, in travel order). Edge `i` covers
the shape points `shape_begin[i] .. shape_end[i]` (inclusive) of the full route shape `lon`/`lat`; the
edges of a route usually share their joining point (`shape_end[i] == shape_begin[i + 1]`), but that is not
required.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from .geometry import side_of_point

__all__ = ["RoadClass", "ROAD_CLASS_BY_HIGHWAY", "road_class_of", "Stop", "STOP_KINDS", "PathInfo"]


class RoadClass(IntEnum):
    """Road class codes (uint8) of `PathInfo.road_class`. `*_link` ways map to their class plus `is_link`."""

    MOTORWAY = 0
    TRUNK = 1
    PRIMARY = 2
    SECONDARY = 3
    TERTIARY = 4
    UNCLASSIFIED = 5
    RESIDENTIAL = 6
    SERVICE = 7
    LIVING_STREET = 8
    TRACK = 9
    PATH = 10  # path, footway, cycleway, pedestrian, bridleway
    STEPS = 11
    FERRY = 12


#: OSM `highway=*` value -> (road class, is_link)
ROAD_CLASS_BY_HIGHWAY: dict[str, tuple[RoadClass, bool]] = {
    "motorway": (RoadClass.MOTORWAY, False),
    "motorway_link": (RoadClass.MOTORWAY, True),
    "trunk": (RoadClass.TRUNK, False),
    "trunk_link": (RoadClass.TRUNK, True),
    "primary": (RoadClass.PRIMARY, False),
    "primary_link": (RoadClass.PRIMARY, True),
    "secondary": (RoadClass.SECONDARY, False),
    "secondary_link": (RoadClass.SECONDARY, True),
    "tertiary": (RoadClass.TERTIARY, False),
    "tertiary_link": (RoadClass.TERTIARY, True),
    "unclassified": (RoadClass.UNCLASSIFIED, False),
    "road": (RoadClass.UNCLASSIFIED, False),
    "residential": (RoadClass.RESIDENTIAL, False),
    "service": (RoadClass.SERVICE, False),
    "living_street": (RoadClass.LIVING_STREET, False),
    "track": (RoadClass.TRACK, False),
    "path": (RoadClass.PATH, False),
    "footway": (RoadClass.PATH, False),
    "cycleway": (RoadClass.PATH, False),
    "pedestrian": (RoadClass.PATH, False),
    "bridleway": (RoadClass.PATH, False),
    "steps": (RoadClass.STEPS, False),
}

#: road classes that make a `*_link` a motorway ramp (ramp on / exit / merge)
HIGHWAY_CLASSES = (RoadClass.MOTORWAY, RoadClass.TRUNK)


def road_class_of(highway: str | None, route: str | None = None) -> tuple[RoadClass, bool]:
    """(class, is_link) of an OSM way from its `highway` (or `route=ferry`) tag; unknown -> UNCLASSIFIED."""
    if route == "ferry":
        return RoadClass.FERRY, False
    return ROAD_CLASS_BY_HIGHWAY.get(highway or "", (RoadClass.UNCLASSIFIED, False))


STOP_KINDS = ("via", "through", "break", "break_through")


@dataclass
class Stop:
    """An intermediate stop of the route, located at the END of edge `edge` (between `edge` and `edge + 1`).

    `kind` is the routing location type. `side` (left/right/None) is where the stop lies relative to the
    direction of travel; give it directly, or give `point` (the requested lon, lat) and it is computed from
    the geometry of edge `edge`. `index` is the 1-based number of the stop among the route's locations
    (the origin is 0); when None it is its rank in `PathInfo.stops` plus one.
    """

    edge: int
    kind: str = "via"
    side: str | None = None
    point: tuple[float, float] | None = None
    index: int | None = None
    name: str | None = None


def _side(point, lon, lat, b, e) -> str | None:
    return side_of_point(float(point[0]), float(point[1]), lon[b:e + 1], lat[b:e + 1])


@dataclass
class PathInfo:
    """One routed leg or route. See the module docstring and docs/narrative.md for the contract.

    Per-edge arrays (length E): shape_begin, shape_end (int64 indices into lon/lat), length_m, time_s
    (float64), road_class (uint8 `RoadClass`), is_roundabout, is_ferry, is_link (bool), node_degree
    (int32: edges meeting at the node where the edge STARTS, counting this edge and the one we came from;
    2 means a plain bend, >= 3 a junction), and the lists name / ref (str, "" when absent).

    `destination_side` / `origin_side` ("left", "right" or None): side of the road the destination / origin
    lies on, relative to the direction of travel. Give them, or give `destination_point` / `origin_point`
    (requested lon, lat before snapping) and they are computed from the geometry of the last / first edge.
    """

    lon: np.ndarray
    lat: np.ndarray
    shape_begin: np.ndarray
    shape_end: np.ndarray
    length_m: np.ndarray
    time_s: np.ndarray
    name: list[str]
    ref: list[str]
    road_class: np.ndarray
    is_roundabout: np.ndarray
    is_ferry: np.ndarray
    is_link: np.ndarray
    node_degree: np.ndarray
    stops: list[Stop] = field(default_factory=list)
    destination_side: str | None = None
    origin_side: str | None = None
    destination_point: tuple[float, float] | None = None
    origin_point: tuple[float, float] | None = None
    #: optional: per edge, bearings (degrees) of the OTHER edges leaving the start node (not the one taken,
    #: not the one we came from). When given, forks are told from plain junctions exactly.
    other_bearings: list[list[float]] | None = None

    def __post_init__(self) -> None:
        self.lon = np.ascontiguousarray(self.lon, dtype=np.float64)
        self.lat = np.ascontiguousarray(self.lat, dtype=np.float64)
        if self.lon.ndim != 1 or self.lon.shape != self.lat.shape or self.lon.size < 2:
            raise ValueError("lon and lat must be 1-D arrays of equal length >= 2")
        self.shape_begin = np.asarray(self.shape_begin, dtype=np.int64)
        self.shape_end = np.asarray(self.shape_end, dtype=np.int64)
        self.length_m = np.asarray(self.length_m, dtype=np.float64)
        self.time_s = np.asarray(self.time_s, dtype=np.float64)
        self.road_class = np.asarray(self.road_class, dtype=np.uint8)
        self.is_roundabout = np.asarray(self.is_roundabout, dtype=bool)
        self.is_ferry = np.asarray(self.is_ferry, dtype=bool)
        self.is_link = np.asarray(self.is_link, dtype=bool)
        self.node_degree = np.asarray(self.node_degree, dtype=np.int32)
        self.name = ["" if n is None else str(n) for n in self.name]
        self.ref = ["" if r is None else str(r) for r in self.ref]
        n = self.shape_begin.size
        if n == 0:
            raise ValueError("a path needs at least one edge")
        arrays = ("shape_end", "length_m", "time_s", "road_class", "is_roundabout", "is_ferry", "is_link",
                  "node_degree")
        for a in arrays:
            if getattr(self, a).shape != (n,):
                raise ValueError(f"{a} has shape {getattr(self, a).shape}, expected ({n},)")
        if len(self.name) != n or len(self.ref) != n:
            raise ValueError(f"name and ref need {n} entries")
        if self.other_bearings is not None and len(self.other_bearings) != n:
            raise ValueError(f"other_bearings needs {n} entries")
        npts = self.lon.size
        if (self.shape_begin < 0).any() or (self.shape_end >= npts).any() or (self.shape_end < self.shape_begin).any():
            raise ValueError("shape_begin/shape_end must satisfy 0 <= begin <= end < len(lon)")
        if (np.diff(self.shape_begin) < 0).any():
            raise ValueError("edges must be in travel order (shape_begin non-decreasing)")
        for s in self.stops:
            if not 0 <= s.edge < n:
                raise ValueError(f"stop edge {s.edge} outside 0..{n - 1}")
            if s.kind not in STOP_KINDS:
                raise ValueError(f"stop kind {s.kind!r} not one of {STOP_KINDS}")
            if s.side is None and s.point is not None:
                s.side = _side(s.point, self.lon, self.lat, self.shape_begin[s.edge], self.shape_end[s.edge])
        for a in ("destination_side", "origin_side"):
            if getattr(self, a) not in (None, "left", "right"):
                raise ValueError(f"{a} must be 'left', 'right' or None")
        if self.destination_side is None and self.destination_point is not None:
            self.destination_side = _side(self.destination_point, self.lon, self.lat,
                                          self.shape_begin[-1], self.shape_end[-1])
        if self.origin_side is None and self.origin_point is not None:
            self.origin_side = _side(self.origin_point, self.lon, self.lat, self.shape_begin[0], self.shape_end[0])

    @property
    def n_edges(self) -> int:
        return int(self.shape_begin.size)
