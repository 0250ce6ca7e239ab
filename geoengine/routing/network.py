"""The routable road network of one costing as plain, documented arrays (`Engine.network`).

A `Network` is the junction-level graph analysts know from OSMnx and pandana:

- nodes: every junction of the bundle's graph, `node_id` = its index, with `lon`, `lat`, `osm_id` and
  `in_component` (True for the junctions of the largest strongly connected part the router snaps to);
- edges: every directed road edge the costing may travel in its direction, with `src`, `dst` (node ids),
  `length_m`, `time_s`, `cost` (what routing minimises, seconds scaled by the costing's preferences, or
  metres with `shortest`), `edge_id` (the bundle graph's directed edge) and `way_id` (OSM way).

Parallel edges (two roads between the same junctions) are kept; the exports below keep the cheapest one
for each weight where the target format cannot hold parallel edges (scipy CSR sums duplicates, so it is
built from the per-(src, dst) minimum).

Turn restrictions and turn penalties are NOT in a junction graph: shortest paths on it equal the
router's where neither applies (pedestrian costing, or any costing with `shortest`), and may be a little
shorter elsewhere. `Network.turns()` gives the edge-based graph the router itself searches (vertices =
directed road edges, arcs = allowed turns), whose shortest paths are the router's exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

WEIGHTS = ("cost", "time_s", "length_m")


@dataclass
class TurnGraph:
    """The edge-based graph the router searches for one profile.

    Vertex v = directed road edge v of the bundle graph. Arc k runs from the vertex owning it in the CSR
    (`offsets[v]:offsets[v+1]`) to `targets[k]`; `cost[k]` is the cost of entering and travelling the
    target edge including the turn penalty, `time_s[k]`, `length_m[k]` its time (with the mode's turn
    delay) and length. A path from a road edge a to a road edge b therefore costs the sum of its arcs,
    plus the part of a still to travel (source side) and minus nothing on b (arcs charge whole edges)."""

    offsets: np.ndarray
    targets: np.ndarray
    cost: np.ndarray
    time_s: np.ndarray
    length_m: np.ndarray

    @property
    def n_vertices(self) -> int:
        return int(len(self.offsets) - 1)

    def to_scipy(self, weight: str = "cost"):
        """scipy.sparse.csr_array [V, V] of `weight` ("cost", "time_s" or "length_m")."""
        w = _weight(self, weight)
        n = self.n_vertices
        src = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.offsets))
        return _csr(src, self.targets, w, n)


class Network:
    """Routable network of one costing (see the module docstring for every array)."""

    def __init__(self, graph, profile):
        self._graph = graph
        self.profile = profile
        self.costing = profile.costing
        usable = np.flatnonzero(profile.usable)
        self.edge_id = usable.astype(np.int64)
        self.src = np.asarray(graph.edge_src, dtype=np.int64)[usable]
        self.dst = np.asarray(graph.edge_dst, dtype=np.int64)[usable]
        self.length_m = np.asarray(profile.length, dtype=np.float64)[usable]
        self.time_s = np.asarray(profile.time, dtype=np.float64)[usable]
        self.cost = np.asarray(profile.cost, dtype=np.float64)[usable]
        self.way_id = np.asarray(graph.seg_way, dtype=np.int64)[usable >> 1]
        self.lon = np.asarray(graph.node_lon, dtype=np.float64)
        self.lat = np.asarray(graph.node_lat, dtype=np.float64)
        self.osm_id = np.asarray(graph.node_osm_id, dtype=np.int64)

    # -- sizes and documented arrays ------------------------------------------------------------------
    @property
    def n_nodes(self) -> int:
        return int(len(self.lon))

    @property
    def n_edges(self) -> int:
        return int(len(self.src))

    @cached_property
    def in_component(self) -> np.ndarray:
        """bool[N]: junctions touched by an edge of the largest strongly connected part of the turn graph
        (where the router snaps locations); analysis snaps points and POIs to these."""
        comp = np.flatnonzero(np.asarray(self.profile.component))
        mask = np.zeros(self.n_nodes, dtype=bool)
        mask[np.asarray(self._graph.edge_src, dtype=np.int64)[comp]] = True
        mask[np.asarray(self._graph.edge_dst, dtype=np.int64)[comp]] = True
        return mask

    def nodes(self) -> dict[str, np.ndarray]:
        """Node arrays by name: node_id, lon, lat, osm_id, in_component."""
        return {"node_id": np.arange(self.n_nodes, dtype=np.int64), "lon": self.lon, "lat": self.lat,
                "osm_id": self.osm_id, "in_component": self.in_component}

    def edges(self) -> dict[str, np.ndarray]:
        """Edge arrays by name: src, dst, length_m, time_s, cost, edge_id, way_id."""
        return {"src": self.src, "dst": self.dst, "length_m": self.length_m, "time_s": self.time_s,
                "cost": self.cost, "edge_id": self.edge_id, "way_id": self.way_id}

    def __repr__(self) -> str:
        return f"Network(costing={self.costing!r}, nodes={self.n_nodes}, edges={self.n_edges})"

    # -- exports ----------------------------------------------------------------------------------------
    def to_scipy(self, weight: str = "cost"):
        """scipy.sparse.csr_array [N, N]: entry (u, v) = the smallest `weight` ("cost", "time_s",
        "length_m") of the edges u -> v. Feed it to scipy.sparse.csgraph (dijkstra, ...)."""
        return _csr(self.src, self.dst, _weight(self, weight), self.n_nodes)

    def to_networkx(self, multigraph: bool = True):
        """networkx.MultiDiGraph (or DiGraph keeping the cheapest parallel edge by cost): nodes carry
        x (lon), y (lat), osm_id, in_component; edges carry length_m, time_s, cost, edge_id, way_id
        (the OSMnx naming of x/y, so OSMnx-style code reads it)."""
        import networkx as nx

        g = nx.MultiDiGraph() if multigraph else nx.DiGraph()
        g.graph.update({"crs": "EPSG:4326", "costing": self.costing})
        comp = self.in_component
        g.add_nodes_from(
            (i, {"x": x, "y": y, "osm_id": o, "in_component": c})
            for i, x, y, o, c in zip(range(self.n_nodes), self.lon.tolist(), self.lat.tolist(),
                                     self.osm_id.tolist(), comp.tolist(), strict=True))
        order = np.arange(self.n_edges)
        if not multigraph:  # per (src, dst) the most expensive first, so the cheapest parallel edge wins
            order = np.lexsort((-self.cost, self.dst, self.src))
        cols = [a[order].tolist() for a in (self.src, self.dst, self.length_m, self.time_s, self.cost,
                                            self.edge_id, self.way_id)]
        g.add_edges_from((u, v, {"length_m": ln, "time_s": t, "cost": c, "edge_id": e, "way_id": w})
                         for u, v, ln, t, c, e, w in zip(*cols, strict=True))
        return g

    def to_igraph(self):
        """igraph.Graph (directed; python-igraph must be installed): vertex attributes lon, lat, osm_id,
        in_component; edge attributes length_m, time_s, cost, edge_id, way_id. Vertex i = node i."""
        try:
            import igraph as ig
        except ImportError as exc:  # optional, not part of the analysis extra
            from geoengine.errors import Unavailable

            raise Unavailable("to_igraph needs python-igraph: pip install igraph") from exc
        g = ig.Graph(n=self.n_nodes, edges=np.column_stack([self.src, self.dst]).tolist(), directed=True)
        g.vs["lon"] = self.lon.tolist()
        g.vs["lat"] = self.lat.tolist()
        g.vs["osm_id"] = self.osm_id.tolist()
        g.vs["in_component"] = self.in_component.tolist()
        for name, arr in self.edges().items():
            if name not in ("src", "dst"):
                g.es[name] = arr.tolist()
        return g

    def turns(self) -> TurnGraph:
        """The edge-based graph the router searches (`TurnGraph`): its shortest paths are the router's."""
        from geoengine.routing.profile import unpack

        off, tgt, w, packed = self.profile.turn_csr()
        t, ln = unpack(packed)
        return TurnGraph(np.asarray(off, np.int64), np.asarray(tgt, np.int64), np.asarray(w, np.float64), t, ln)

    def nearest_nodes(self, lons, lats, *, field: str = "points"):
        """(node ids int64[n], distances m float64[n]) of the nearest in-component junction of each
        (lon, lat) point (KD-tree on a local equirectangular projection)."""
        lons, lats = np.asarray(lons, np.float64), np.asarray(lats, np.float64)
        tree, ids, kx, ky = self._kdtree
        d, i = tree.query(np.column_stack([lons * kx, lats * ky]))
        return ids[i], np.asarray(d, np.float64)

    @cached_property
    def _kdtree(self):
        from scipy.spatial import cKDTree

        ids = np.flatnonzero(self.in_component)
        lat0 = float(np.mean(self.lat[ids])) if len(ids) else 0.0
        ky = 6371008.8 * np.pi / 180.0
        kx = ky * np.cos(np.radians(lat0))
        return cKDTree(np.column_stack([self.lon[ids] * kx, self.lat[ids] * ky])), ids, kx, ky


def _weight(obj, weight: str) -> np.ndarray:
    if weight not in WEIGHTS:
        from geoengine.errors import InvalidRequest

        raise InvalidRequest.field("weight", f"unknown weight '{weight}'; use one of: {', '.join(WEIGHTS)}")
    return getattr(obj, weight)


def _csr(src, dst, w, n):
    """CSR [n, n] with the minimum weight per (src, dst); zero weights kept as explicit entries."""
    import scipy.sparse as sp

    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    w = np.asarray(w, np.float64)
    order = np.lexsort((w, dst, src))
    s, d, ww = src[order], dst[order], w[order]
    first = np.ones(len(s), dtype=bool)
    first[1:] = (s[1:] != s[:-1]) | (d[1:] != d[:-1])
    s, d, ww = s[first], d[first], ww[first]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(s, minlength=n), out=indptr[1:])
    # csgraph treats explicit zeros as edges of weight 0 only for csr input given with explicit entries
    return sp.csr_array((ww, d, indptr), shape=(n, n))
