"""The road graph of a bundle, memory-mapped from `<bundle>/graph/*.npy` (see docs/graph.md)."""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path

import numpy as np

from geoengine.errors import BundleError
from geoengine.graph import tags as T

# The graph stage's format, written by geoengine.graph.build (which imports it from here, so that opening a
# bundle does not import the build and its osmium).
GRAPH_FORMAT = 2

ARRAYS = (
    "node_lon", "node_lat", "node_osm_id", "node_out_offsets", "node_out_edges",
    "seg_u", "seg_v", "seg_length", "seg_way", "seg_class", "seg_flags", "seg_surface", "seg_sac",
    "seg_name", "seg_ref", "seg_limits", "shape_offsets", "shape_lon", "shape_lat",
    "edge_src", "edge_dst", "edge_access", "edge_dest_only", "edge_speed", "edge_signals", "edge_bearing_start",
    "edge_bearing_end", "restr_from", "restr_to", "restr_only", "restr_modes",
)
# Arrays a graph of this format may lack (written by newer builds; None when absent):
# shape_osm_id int64[shape points]: the OSM node id of each shape point (segment speeds by node pair).
# edge_obstacle_s float32[E]: the seconds of OSRM car.lua's obstacles each directed edge passes (signals,
# stop and give-way signs by direction, gates; tags.car_obstacle), which the motor costings add.
# seg_car_lua bool[S]: whether OSRM's car.lua keeps the segment's way in its graph (tags.in_car_lua_graph):
# the roads the motor modes' turn model counts at a junction.
OPTIONAL_ARRAYS = ("shape_osm_id", "edge_obstacle_s", "seg_car_lua")


class Graph:
    """Directed road graph. Vertices: junction nodes 0..N-1. Edges: 0..E-1, E = 2*S, where segment
    k = e // 2 is a piece of one OSM way between junctions; edge 2k runs along the way's node order,
    2k+1 against it; `e ^ 1` is the reverse edge. Per-segment arrays (`seg_*`) are indexed by e >> 1,
    per-edge arrays (`edge_*`) by e. All arrays are read-only memory maps.
    """

    node_lon: np.ndarray
    node_lat: np.ndarray
    node_osm_id: np.ndarray
    node_out_offsets: np.ndarray
    node_out_edges: np.ndarray
    seg_u: np.ndarray
    seg_v: np.ndarray
    seg_length: np.ndarray
    seg_way: np.ndarray
    seg_class: np.ndarray
    seg_flags: np.ndarray
    seg_surface: np.ndarray
    seg_sac: np.ndarray
    seg_name: np.ndarray
    seg_ref: np.ndarray
    seg_limits: np.ndarray
    shape_offsets: np.ndarray
    shape_lon: np.ndarray
    shape_lat: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    edge_access: np.ndarray
    edge_dest_only: np.ndarray
    edge_speed: np.ndarray
    edge_signals: np.ndarray
    edge_bearing_start: np.ndarray
    edge_bearing_end: np.ndarray
    restr_from: np.ndarray
    restr_to: np.ndarray
    restr_only: np.ndarray
    restr_modes: np.ndarray
    # Optional: grades from the bundle's DEM, put on by `geoengine.elevation.grades.attach_grades` (which
    # also sets meta["grades"]); None on a graph without them. Per segment (forward direction):
    # seg_climb, seg_descent float32[S] metres, seg_grade float32[S, 2]; per directed edge float32[E]:
    edge_climb: np.ndarray | None = None  # metres climbed travelling the edge
    edge_descent: np.ndarray | None = None  # metres descended
    edge_up_grade: np.ndarray | None = None  # climb-weighted mean grade of its rising stretches (0.1 = 10 %)
    edge_down_grade: np.ndarray | None = None  # the same of its falling stretches (positive)
    seg_climb: np.ndarray | None = None
    seg_descent: np.ndarray | None = None
    seg_grade: np.ndarray | None = None
    shape_osm_id: np.ndarray | None = None  # OPTIONAL_ARRAYS
    edge_obstacle_s: np.ndarray | None = None  # OPTIONAL_ARRAYS
    seg_car_lua: np.ndarray | None = None  # OPTIONAL_ARRAYS

    def __init__(self, path: Path, arrays: dict[str, np.ndarray], meta: dict, strings_blob: bytes):
        self.path = path
        self.meta = meta
        for name, arr in arrays.items():
            setattr(self, name, arr)
        self._blob = strings_blob

    @classmethod
    def open(cls, path: str | Path) -> Graph:
        """Open `<bundle>/graph` (the folder the `graph` stage wrote); arrays are memory-mapped, so
        opening costs milliseconds. Raises BundleError naming a missing file or a format mismatch."""
        path = Path(path)
        meta_path = path / "graph.json"
        if not meta_path.exists():
            raise BundleError(f"{path} has no graph.json: build the bundle with the 'graph' stage")
        meta = json.loads(meta_path.read_text())
        if meta.get("format") != GRAPH_FORMAT:
            raise BundleError(f"graph in {path} has format {meta.get('format')}; this geoengine reads {GRAPH_FORMAT}")
        arrays = {}
        for name in ARRAYS:
            f = path / f"{name}.npy"
            if not f.exists():
                raise BundleError(f"graph in {path} is incomplete: {f.name} is missing; rebuild the bundle")
            # a plain ndarray view of the mapped file: indexing an np.memmap runs Python code per call
            # (its __getitem__ and __array_finalize__), which the request path pays many times
            arrays[name] = np.load(f, mmap_mode="r").view(np.ndarray)
        for name in OPTIONAL_ARRAYS:
            f = path / f"{name}.npy"
            if f.exists():
                arrays[name] = np.load(f, mmap_mode="r").view(np.ndarray)
        blob = (path / "strings.bin").read_bytes()
        return cls(path, arrays, meta, blob)

    # -- sizes -------------------------------------------------------------------------------------
    @property
    def n_nodes(self) -> int:
        return int(self.node_lon.shape[0])

    @property
    def n_edges(self) -> int:
        return int(self.edge_src.shape[0])

    @property
    def n_segments(self) -> int:
        return int(self.seg_u.shape[0])

    # -- per-edge views (numpy, vectorised) -----------------------------------------------------------
    @cached_property
    def edge_length(self) -> np.ndarray:
        """float64[E] metres."""
        return np.repeat(np.asarray(self.seg_length), 2)

    @cached_property
    def edge_seg(self) -> np.ndarray:
        return np.arange(self.n_edges, dtype=np.int64) >> 1

    def edge_attr(self, seg_array: np.ndarray) -> np.ndarray:
        """Broadcast a per-segment array to per-edge (length E)."""
        return np.repeat(np.asarray(seg_array), 2, axis=0)

    @cached_property
    def edge_flags(self) -> np.ndarray:
        return self.edge_attr(self.seg_flags)

    @cached_property
    def edge_class(self) -> np.ndarray:
        return self.edge_attr(self.seg_class)

    def mode_mask(self, mode: str | int) -> np.ndarray:
        """bool[E]: edges that `mode` ('auto', 'pedestrian', ... or a bit) may travel in their direction."""
        bit = T.MODE_BITS[mode] if isinstance(mode, str) else int(mode)
        return (np.asarray(self.edge_access) & bit) != 0

    # -- strings and shapes for reporting a path -----------------------------------------------------
    @cached_property
    def strings(self) -> list[str]:
        return self._blob.decode("utf-8").split("\x00")

    def edge_name(self, e: int) -> str:
        return self.strings[int(self.seg_name[int(e) >> 1])]

    def edge_ref(self, e: int) -> str:
        return self.strings[int(self.seg_ref[int(e) >> 1])]

    def edge_way(self, e: int) -> int:
        return int(self.seg_way[int(e) >> 1])

    def edge_shape(self, e: int, start: float = 0.0, end: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        """(lon, lat) of directed edge `e` from fraction `start` to fraction `end` of its length
        (fractions along the edge's own direction)."""
        e = int(e)
        k = e >> 1
        a, b = int(self.shape_offsets[k]), int(self.shape_offsets[k + 1])
        lon = np.asarray(self.shape_lon[a:b])
        lat = np.asarray(self.shape_lat[a:b])
        if e & 1:
            lon, lat = lon[::-1], lat[::-1]
        if start <= 0.0 and end >= 1.0:
            return lon.copy(), lat.copy()
        return cut_polyline(lon, lat, start, end)

    def path_shape(self, edges, first_start: float = 0.0, last_end: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        """Concatenated (lon, lat) of a path of directed edges; the first edge starts at fraction
        `first_start`, the last ends at `last_end`; shared junction points appear once."""
        edges = [int(e) for e in edges]
        lons, lats = [], []
        for i, e in enumerate(edges):
            s = first_start if i == 0 else 0.0
            t = last_end if i == len(edges) - 1 else 1.0
            lo, la = self.edge_shape(e, s, t)
            if i:
                lo, la = lo[1:], la[1:]
            lons.append(lo)
            lats.append(la)
        if not lons:
            return np.zeros(0), np.zeros(0)
        return np.concatenate(lons), np.concatenate(lats)

    def path_info(self, edges) -> dict:
        """Per-edge attributes of a path of directed edges, for reports and maneuvers: arrays `way`,
        `length_m`, `class` (names in tags.CLASS_NAMES), `flags`, `bearing_start`, `bearing_end`,
        `speed_kph`, and lists `name`, `ref` (strings, "" when untagged)."""
        e = np.asarray(edges, dtype=np.int64)
        k = e >> 1
        strings = self.strings
        return {
            "edge": e,
            "way": np.asarray(self.seg_way)[k],
            "length_m": np.asarray(self.seg_length)[k],
            "class": np.asarray(self.seg_class)[k],
            "flags": np.asarray(self.seg_flags)[k],
            "bearing_start": np.asarray(self.edge_bearing_start)[e],
            "bearing_end": np.asarray(self.edge_bearing_end)[e],
            "speed_kph": np.asarray(self.edge_speed)[e],
            "name": [strings[i] for i in np.asarray(self.seg_name)[k].tolist()],
            "ref": [strings[i] for i in np.asarray(self.seg_ref)[k].tolist()],
        }

    def edges_of_way(self, way_id: int) -> np.ndarray:
        """Directed edge ids of an OSM way (both directions; not all need be accessible)."""
        segs = np.flatnonzero(np.asarray(self.seg_way) == way_id)
        return np.sort(np.concatenate([2 * segs, 2 * segs + 1]))

    def node_of_osm(self, osm_id: int) -> int | None:
        pos = int(np.searchsorted(self.node_osm_id, osm_id))
        if pos < self.n_nodes and int(self.node_osm_id[pos]) == osm_id:
            return pos
        return None

    def restrictions_for(self, mode: str | int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(from edges, to edges, only flags) of the turn restrictions that apply to `mode`."""
        bit = T.MODE_BITS[mode] if isinstance(mode, str) else int(mode)
        sel = (np.asarray(self.restr_modes) & bit) != 0
        return np.asarray(self.restr_from)[sel], np.asarray(self.restr_to)[sel], np.asarray(self.restr_only)[sel]


def cut_polyline(lon: np.ndarray, lat: np.ndarray, start: float, end: float) -> tuple[np.ndarray, np.ndarray]:
    """The part of a polyline between fractions `start` <= `end` of its length (planar interpolation,
    lengths measured on the local equirectangular projection)."""
    from geoengine.geo import haversine_m

    start = min(max(start, 0.0), 1.0)
    end = min(max(end, start), 1.0)
    d = haversine_m(lat[:-1], lon[:-1], lat[1:], lon[1:])
    cum = np.concatenate([[0.0], np.cumsum(d)])
    total = cum[-1]
    if total <= 0:
        return lon[:1].copy(), lat[:1].copy()

    def at(f):
        x = f * total
        i = int(np.clip(np.searchsorted(cum, x, side="right") - 1, 0, len(d) - 1))
        t = 0.0 if d[i] <= 0 else (x - cum[i]) / d[i]
        return lon[i] + t * (lon[i + 1] - lon[i]), lat[i] + t * (lat[i + 1] - lat[i]), i

    x0, y0, i0 = at(start)
    x1, y1, i1 = at(end)
    mid_lon = lon[i0 + 1 : i1 + 1]
    mid_lat = lat[i0 + 1 : i1 + 1]
    return np.concatenate([[x0], mid_lon, [x1]]), np.concatenate([[y0], mid_lat, [y1]])
