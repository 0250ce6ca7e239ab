"""Real Andorra ways read with osmium, and PathInfo built from a chain of them (test helper)."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np
import osmium

from geoengine.narrative import PathInfo, road_class_of

CAR_HIGHWAYS = {"motorway", "motorway_link", "trunk", "trunk_link", "primary", "primary_link", "secondary",
                "secondary_link", "tertiary", "tertiary_link", "unclassified", "residential", "living_street",
                "service", "road"}


@dataclass
class Way:
    id: int
    tags: dict
    nodes: list[int]
    coords: list[tuple[float, float]]

    @property
    def name(self) -> str:
        return self.tags.get("name", "")


class OsmWays:
    def __init__(self, pbf):
        self.ways: dict[int, Way] = {}
        for o in osmium.FileProcessor(str(pbf)).with_locations().with_filter(osmium.filter.KeyFilter("highway")):
            if o.is_way() and o.tags.get("highway") in CAR_HIGHWAYS:
                self.ways[o.id] = Way(o.id, dict(o.tags), [n.ref for n in o.nodes],
                                      [(n.lon, n.lat) for n in o.nodes])
        # degree: number of way segments meeting at a node
        self.degree: Counter = Counter()
        self.ways_at: dict[int, list[int]] = defaultdict(list)
        for w in self.ways.values():
            for k, n in enumerate(w.nodes):
                self.degree[n] += (1 if k in (0, len(w.nodes) - 1) else 2)
                if w.id not in self.ways_at[n]:
                    self.ways_at[n].append(w.id)
            if len(w.nodes) > 2 and w.nodes[0] == w.nodes[-1]:
                self.degree[w.nodes[0]] += 0  # closed ring: start and end each counted once, i.e. 2


def bearing(a, b) -> float:
    lon1, lat1, lon2, lat2 = map(math.radians, (a[0], a[1], b[0], b[1]))
    y = math.sin(lon2 - lon1) * math.cos(lat2)
    x = math.cos(lat1) * math.sin(lat2) - math.sin(lat1) * math.cos(lat2) * math.cos(lon2 - lon1)
    return math.degrees(math.atan2(y, x)) % 360


def haversine(a, b) -> float:
    lon1, lat1, lon2, lat2 = map(math.radians, (a[0], a[1], b[0], b[1]))
    h = math.sin((lat2 - lat1) / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    return 2 * 6371008.8 * math.asin(math.sqrt(h))


def path_from(osm: OsmWays, sections: list[tuple[int, int, int]], split_at_junctions: bool = True,
              **kw) -> PathInfo:
    """PathInfo of a chain of way sections (way id, from node position, to node position; from > to walks the
    way backwards). Edges are split at junction nodes (degree >= 3) like a routing graph's."""
    lon: list[float] = []
    lat: list[float] = []
    nodes_seq: list[int] = []
    edges = []  # (begin, end, way)
    for wid, a, b in sections:
        w = osm.ways[wid]
        step = 1 if b >= a else -1
        idx = list(range(a, b + step, step))
        if lon:
            assert nodes_seq[-1] == w.nodes[idx[0]], "sections must connect"
            idx = idx[1:]
            begin = len(lon) - 1
        else:
            begin = 0
        for k in idx:
            lon.append(w.coords[k][0])
            lat.append(w.coords[k][1])
            nodes_seq.append(w.nodes[k])
            pos = len(lon) - 1
            if pos > begin and (pos == len(lon) - 1 and k == idx[-1] or
                                (split_at_junctions and osm.degree[w.nodes[k]] >= 3)):
                edges.append((begin, pos, w))
                begin = pos
    sb = np.array([e[0] for e in edges])
    se = np.array([e[1] for e in edges])
    length = np.array([sum(haversine((lon[i], lat[i]), (lon[i + 1], lat[i + 1])) for i in range(b, e))
                       for b, e in zip(sb, se, strict=True)])
    classes = [road_class_of(e[2].tags.get("highway")) for e in edges]
    return PathInfo(
        lon=np.array(lon), lat=np.array(lat), shape_begin=sb, shape_end=se, length_m=length,
        time_s=length / 10.0, name=[e[2].name for e in edges], ref=[e[2].tags.get("ref", "") for e in edges],
        road_class=[int(c) for c, _ in classes], is_link=[lk for _, lk in classes],
        is_roundabout=[e[2].tags.get("junction") == "roundabout" for e in edges],
        is_ferry=[False] * len(edges),
        node_degree=[osm.degree[nodes_seq[b]] for b in sb], **kw)


def segment_graph(osm: OsmWays):
    """networkx graph of the car ways: one edge per way segment, weight = length in metres, attr way id."""
    import networkx as nx

    g = nx.Graph()
    for w in osm.ways.values():
        for k in range(len(w.nodes) - 1):
            u, v = w.nodes[k], w.nodes[k + 1]
            if u != v:
                g.add_edge(u, v, weight=haversine(w.coords[k], w.coords[k + 1]), way=w.id)
    return g


def path_from_nodes(osm: OsmWays, g, nodes: list[int], **kw) -> PathInfo:
    """PathInfo of a node route through `segment_graph`; edges split at junctions and where the way changes."""
    coord = {}
    for w in osm.ways.values():
        for n, c in zip(w.nodes, w.coords, strict=True):
            coord[n] = c
    lon = [coord[n][0] for n in nodes]
    lat = [coord[n][1] for n in nodes]
    seg_way = [g[u][v]["way"] for u, v in zip(nodes, nodes[1:], strict=False)]
    sb, se, ways = [], [], []
    begin = 0
    for k in range(1, len(nodes)):
        last = k == len(nodes) - 1
        if last or osm.degree[nodes[k]] >= 3 or seg_way[k] != seg_way[k - 1]:
            sb.append(begin)
            se.append(k)
            ways.append(osm.ways[seg_way[k - 1]])
            begin = k
    length = np.array([sum(g[nodes[i]][nodes[i + 1]]["weight"] for i in range(b, e)) for b, e in zip(sb, se, strict=True)])
    classes = [road_class_of(w.tags.get("highway")) for w in ways]
    return PathInfo(
        lon=np.array(lon), lat=np.array(lat), shape_begin=sb, shape_end=se, length_m=length, time_s=length / 10.0,
        name=[w.name for w in ways], ref=[w.tags.get("ref", "") for w in ways],
        road_class=[int(c) for c, _ in classes], is_link=[lk for _, lk in classes],
        is_roundabout=[w.tags.get("junction") == "roundabout" for w in ways], is_ferry=[False] * len(ways),
        node_degree=[osm.degree[nodes[b]] for b in sb], **kw)
