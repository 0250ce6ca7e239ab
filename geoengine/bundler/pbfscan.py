"""Count the objects of an OSM PBF file and find its nodes' bounding box, a block at a time.

The `source` stage needs the node/way/relation counts and, when the header has no box, the nodes'
bbox. Feeding every node through a Python callback costs seconds per million nodes; this reads the
file's blobs directly (https://wiki.openstreetmap.org/wiki/PBF_Format): each zlib blob is inflated,
dense nodes' packed id/lat/lon varints are decoded with numpy (one vector operation per block of about
8,000 nodes), ways and relations are counted by walking their group's top-level fields. Anything it
does not know (another compression, a non-PBF file) returns None and the caller falls back to osmium.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes):
    """(field number, wire type, value or (start, end) of a length-delimited payload)."""
    pos, n = 0, len(buf)
    while pos < n:
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            val, pos = _varint(buf, pos)
            yield field, wire, val
        elif wire == 2:
            ln, pos = _varint(buf, pos)
            yield field, wire, (pos, pos + ln)
            pos += ln
        elif wire == 1:
            yield field, wire, struct.unpack_from("<q", buf, pos)[0]
            pos += 8
        elif wire == 5:
            yield field, wire, struct.unpack_from("<i", buf, pos)[0]
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def _zigzag(v):
    return (v >> 1) ^ -(v & 1)


def _degrees(offset: int, granularity: int, value: int) -> float:
    """Degrees as osmium reports them: nanodegrees truncated to its 1e-7 fixed point."""
    nano = offset + granularity * value
    fixed = abs(nano) // 100 * (1 if nano >= 0 else -1)
    return fixed / 1e7


def packed_sint64(data: bytes) -> np.ndarray:
    """Decode a packed repeated sint64 field (vectorised)."""
    b = np.frombuffer(data, dtype=np.uint8)
    if len(b) == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.flatnonzero(b < 0x80)
    starts = np.r_[0, ends[:-1] + 1]
    k = np.arange(len(b)) - np.repeat(starts, ends - starts + 1)
    parts = (b & 0x7F).astype(np.uint64) << (7 * k).astype(np.uint64)
    u = np.add.reduceat(parts, starts)
    return (u >> np.uint64(1)).astype(np.int64) ^ -(u & np.uint64(1)).astype(np.int64)


def _blobs(path: Path):
    """(type, decompressed payload) of each blob; raises ValueError on an unsupported blob."""
    with open(path, "rb") as fh:
        while True:
            head = fh.read(4)
            if not head:
                return
            if len(head) < 4:
                raise ValueError("truncated blob header")
            (hlen,) = struct.unpack(">I", head)
            if hlen > 64 * 1024:
                raise ValueError("not an OSM PBF file")
            header = fh.read(hlen)
            btype, size = None, None
            for f, _w, v in _fields(header):
                if f == 1:
                    btype = header[v[0]:v[1]].decode("ascii", "replace")
                elif f == 3:
                    size = v
            if btype is None or size is None:
                raise ValueError("not an OSM PBF file")
            blob = fh.read(size)
            data = None
            for f, _w, v in _fields(blob):
                if f == 1:
                    data = blob[v[0]:v[1]]
                elif f == 3:
                    data = zlib.decompress(blob[v[0]:v[1]])
                elif f in (4, 5, 6, 7):
                    raise ValueError(f"unsupported blob compression (field {f})")
            if data is None:
                raise ValueError("empty blob")
            yield btype, data


def scan_pbf(path: str | Path) -> dict | None:
    """{"nodes", "ways", "relations", "bbox" (the nodes' [min_lon, min_lat, max_lon, max_lat] or None)}
    of a PBF file, or None when the file is not a PBF this reader knows."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
        if len(head) < 4 or struct.unpack(">I", head)[0] > 64 * 1024:
            return None
        nodes = ways = relations = 0
        lo = [np.inf, np.inf]
        hi = [-np.inf, -np.inf]
        for btype, data in _blobs(path):
            if btype != "OSMData":
                continue
            gran, lat_off, lon_off = 100, 0, 0
            groups = []
            for f, _w, v in _fields(data):
                if f == 2:
                    groups.append(v)
                elif f == 17:
                    gran = v
                elif f == 19:
                    lat_off = v
                elif f == 20:
                    lon_off = v
            for g0, g1 in groups:
                group = data[g0:g1]
                lats, lons = [], []
                for f, _w, v in _fields(group):
                    if f == 2:  # DenseNodes
                        dense = group[v[0]:v[1]]
                        for ff, _ww, vv in _fields(dense):
                            if ff == 1:
                                nodes += len(packed_sint64(dense[vv[0]:vv[1]]))
                            elif ff == 8:
                                lats.append(np.cumsum(packed_sint64(dense[vv[0]:vv[1]])))
                            elif ff == 9:
                                lons.append(np.cumsum(packed_sint64(dense[vv[0]:vv[1]])))
                    elif f == 1:  # a plain Node
                        nodes += 1
                        node = group[v[0]:v[1]]
                        vals = {ff: vv for ff, _ww, vv in _fields(node)}
                        lats.append(np.asarray([_zigzag(vals.get(8, 0))]))
                        lons.append(np.asarray([_zigzag(vals.get(9, 0))]))
                    elif f == 3:
                        ways += 1
                    elif f == 4:
                        relations += 1
                for arrs, off, i in ((lons, lon_off, 0), (lats, lat_off, 1)):
                    for a in arrs:
                        if len(a):
                            lo[i] = min(lo[i], _degrees(off, gran, int(a.min())))
                            hi[i] = max(hi[i], _degrees(off, gran, int(a.max())))
    except (ValueError, zlib.error, struct.error, IndexError, OSError):
        return None
    bbox = [lo[0], lo[1], hi[0], hi[1]] if nodes and np.isfinite(lo[0]) else None
    return {"nodes": nodes, "ways": ways, "relations": relations, "bbox": bbox}
