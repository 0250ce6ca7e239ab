"""OpenLR line location references (binary format version 3, base64) for the /route option
`linear_references`: one reference per traversed road edge, as Valhalla gives them.

Each reference has two location reference points (LRPs): the start and the end node of the whole edge,
with the edge's functional road class (FRC), form of way (FOW), bearing (the first LRP's along the edge,
the last LRP's looking back along it), the distance to the next point (the edge length) and, for the
first and last edge of a route, positive / negative offsets (share of the edge before the start or after
the end of the route, in 1/256 steps).

Layout (OpenLR white paper 1.5, binary physical format): status byte (version 3, line location); first
LRP: longitude and latitude as signed 24-bit integers (deg * 2^24 / 360, rounded away from zero),
attribute byte (orientation 2 bits | FRC 3 | FOW 3), attribute byte (LFRCNP 3 | bearing sector 5), DNP
byte (58.6 m intervals); last LRP: longitude and latitude relative to the previous LRP in 1e-5 degrees as
signed 16-bit integers, attribute byte, attribute byte (reserved | positive offset flag | negative offset
flag | bearing sector 5); then the offset bytes that are flagged.

Encoding is vectorised over all edges of a route (numpy); only the base64 text is made per edge.
"""

from __future__ import annotations

import base64

import numpy as np

from geoengine.graph import tags as T

VERSION = 3
LINE = 1
DNP_M = 58.6
SECTOR = 11.25

# FRC 0 (main roads) .. 7 (other), per road class name
_FRC = {"motorway": 0, "trunk": 1, "primary": 2, "secondary": 3, "tertiary": 4, "unclassified": 5,
        "residential": 5, "road": 5, "living_street": 5, "service": 6, "busway": 6}
FRC_OF_CLASS = np.array([_FRC.get(name, 7) for name in T.CLASS_NAMES], dtype=np.int64)
# FOW: 0 undefined, 1 motorway, 2 multiple carriageway, 3 single carriageway, 4 roundabout,
# 5 traffic square, 6 slip road, 7 other
_VEHICLE_ROADS = {"motorway", "trunk", "primary", "secondary", "tertiary", "unclassified", "residential", "service",
                  "living_street", "road", "busway", "track"}
_IS_ROAD = np.array([name in _VEHICLE_ROADS for name in T.CLASS_NAMES])
_DUAL_CANDIDATE = np.array([name in ("trunk", "primary", "secondary") for name in T.CLASS_NAMES])


def _round(x):
    """Round half away from zero."""
    x = np.asarray(x, dtype=np.float64)
    return (np.sign(x) * np.floor(np.abs(x) + 0.5)).astype(np.int64)


def _deg24(deg):
    deg = np.asarray(deg, dtype=np.float64)
    return _round(np.sign(deg) * 0.5 + deg * (1 << 24) / 360.0)


def _be(values, size: int) -> np.ndarray:
    """Two's complement big-endian bytes of int64 values: uint8[N, size]."""
    v = np.asarray(values, dtype=np.int64) % (1 << (8 * size))
    shifts = np.arange(size - 1, -1, -1) * 8
    return ((v[:, None] >> shifts[None, :]) & 0xFF).astype(np.uint8)


def _sector(bearing):
    return _round((np.asarray(bearing, dtype=np.float64) - SECTOR / 2.0) / SECTOR) & 0x1F


def encode_lines(lon0, lat0, lon1, lat1, frc0, fow0, bear0, lfrcnp, dnp_m, frc1, fow1, bear1,
                 poff=None, noff=None) -> list[bytes]:
    """Binary OpenLR line references with two LRPs each, vectorised over N lines (array arguments of
    length N; offsets are shares 0..1 or None)."""
    lon0 = np.atleast_1d(np.asarray(lon0, dtype=np.float64))
    n = len(lon0)
    poff = np.zeros(n) if poff is None else np.asarray(poff, dtype=np.float64)
    noff = np.zeros(n) if noff is None else np.asarray(noff, dtype=np.float64)

    def col(x):
        return np.broadcast_to(np.asarray(x), (n,)).astype(np.int64)

    status = np.full((n, 1), VERSION | (LINE << 3), dtype=np.uint8)
    first = np.hstack([
        _be(_deg24(lon0), 3), _be(_deg24(lat0), 3),
        _be((col(fow0) & 7) | ((col(frc0) & 7) << 3), 1),
        _be(_sector(bear0) | ((col(lfrcnp) & 7) << 5), 1),
        _be(np.clip(_round(np.asarray(dnp_m, dtype=np.float64) / DNP_M - 0.5), 0, 255), 1),
    ])
    pflag = poff > 0
    nflag = noff > 0
    last = np.hstack([
        _be(_round(1e5 * (np.asarray(lon1, dtype=np.float64) - lon0)), 2),
        _be(_round(1e5 * (np.asarray(lat1, dtype=np.float64) - np.asarray(lat0, dtype=np.float64))), 2),
        _be((col(fow1) & 7) | ((col(frc1) & 7) << 3), 1),
        _be(_sector(bear1) | (pflag.astype(np.int64) << 6) | (nflag.astype(np.int64) << 5), 1),
    ])
    core = np.hstack([status, first, last])
    pbyte = np.clip(_round(poff * 256 - 0.5), 0, 255).astype(np.uint8)
    nbyte = np.clip(_round(noff * 256 - 0.5), 0, 255).astype(np.uint8)
    out = []
    extra_rows = set(np.flatnonzero(pflag | nflag).tolist())
    for i in range(n):
        b = core[i].tobytes()
        if i in extra_rows:
            b += (bytes([pbyte[i]]) if pflag[i] else b"") + (bytes([nbyte[i]]) if nflag[i] else b"")
        out.append(b)
    return out


def decode(data: bytes | str) -> dict:
    """A binary (or base64) OpenLR line location: {"points": [{lon, lat, frc, fow, bearing[, lfrcnp, dnp]}],
    "poff", "noff"} (bearing, dnp and offsets as the middle of their interval). For tests and debugging."""
    raw = base64.b64decode(data) if isinstance(data, str) else bytes(data)

    def signed(b):
        v = int.from_bytes(b, "big")
        return v - (1 << (8 * len(b))) if v >= 1 << (8 * len(b) - 1) else v

    def attrs(a1, a2):
        return {"frc": (a1 >> 3) & 7, "fow": a1 & 7, "bearing": ((a2 & 0x1F) + 0.5) * SECTOR}

    if len(raw) < 16 or raw[0] & 7 != VERSION or (raw[0] >> 3) & 0xF != LINE:
        raise ValueError("not an OpenLR v3 line location")
    x, y = signed(raw[1:4]), signed(raw[4:7])
    lon = (x - np.sign(x) * 0.5) * 360.0 / (1 << 24)
    lat = (y - np.sign(y) * 0.5) * 360.0 / (1 << 24)
    pts = [{"lon": float(lon), "lat": float(lat), **attrs(raw[7], raw[8]), "lfrcnp": (raw[8] >> 5) & 7,
            "dnp": (raw[9] + 0.5) * DNP_M}]
    k = (len(raw) - 10 - 6) // 7  # intermediate LRPs
    i = 10
    for _ in range(k):
        lon += signed(raw[i:i + 2]) / 1e5
        lat += signed(raw[i + 2:i + 4]) / 1e5
        pts.append({"lon": float(lon), "lat": float(lat), **attrs(raw[i + 4], raw[i + 5]),
                    "lfrcnp": (raw[i + 5] >> 5) & 7, "dnp": (raw[i + 6] + 0.5) * DNP_M})
        i += 7
    lon += signed(raw[i:i + 2]) / 1e5
    lat += signed(raw[i + 2:i + 4]) / 1e5
    a2 = raw[i + 5]
    pts.append({"lon": float(lon), "lat": float(lat), **attrs(raw[i + 4], a2)})
    i += 6
    poff = noff = 0.0
    if a2 & 0x40:
        poff = (raw[i] + 0.5) / 256
        i += 1
    if a2 & 0x20:
        noff = (raw[i] + 0.5) / 256
        i += 1
    if i != len(raw):
        raise ValueError("OpenLR line location has a wrong length")
    return {"points": pts, "poff": poff, "noff": noff}


def edge_references(graph, edges, f_first: float = 0.0, f_last: float = 1.0) -> list[str]:
    """Base64 OpenLR references of the directed road `edges` of one path (in order); the first edge is
    entered at share `f_first` of its length, the last left at `f_last` (positive / negative offsets)."""
    e = np.asarray(edges, dtype=np.int64)
    if len(e) == 0:
        return []
    src = np.asarray(graph.edge_src)[e]
    dst = np.asarray(graph.edge_dst)[e]
    nlon, nlat = np.asarray(graph.node_lon), np.asarray(graph.node_lat)
    klass = np.asarray(graph.edge_class)[e].astype(np.int64)
    flags = np.asarray(graph.edge_flags)[e].astype(np.int64)
    frc = FRC_OF_CLASS[klass]
    access = np.asarray(graph.edge_access)
    oneway = (access[e ^ 1] & T.MODE_BITS["auto"]) == 0
    fow = np.where(_IS_ROAD[klass], 3, 7)
    fow = np.where(_DUAL_CANDIDATE[klass] & oneway, 2, fow)
    fow = np.where(klass == T.CLASS["motorway"], 1, fow)
    fow = np.where((flags & T.F_LINK) != 0, 6, fow)
    fow = np.where((flags & T.F_ROUNDABOUT) != 0, 4, fow)
    b0 = np.asarray(graph.edge_bearing_start)[e]
    b1 = (np.asarray(graph.edge_bearing_end)[e] + 180.0) % 360.0
    length = np.asarray(graph.edge_length)[e]
    poff = np.zeros(len(e))
    noff = np.zeros(len(e))
    poff[0] = max(0.0, float(f_first))
    noff[-1] = max(0.0, 1.0 - float(f_last))
    if len(e) == 1:
        # both offsets on one edge must leave a non-empty location
        noff[0] = min(noff[0], max(0.0, 1.0 - poff[0] - 1.0 / 256))
    raw = encode_lines(nlon[src], nlat[src], nlon[dst], nlat[dst], frc, fow, b0, frc, length, frc, fow, b1,
                       poff, noff)
    return [base64.b64encode(b).decode("ascii") for b in raw]


def route_linear_references(router, prof, pieces) -> list[str]:
    """OpenLR references of every edge of a route given as pieces (Leg objects), in travel order."""
    out: list[str] = []
    for p in pieces:
        out.extend(edge_references(router.graph, p.edges, p.f_first, p.f_last))
    return out
