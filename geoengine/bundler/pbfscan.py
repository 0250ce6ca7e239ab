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
from numba import njit


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


def packed_uvarint(data: bytes) -> np.ndarray:
    """Decode a packed repeated (u)int32/64 field of non-negative values (vectorised; as uint64)."""
    b = np.frombuffer(data, dtype=np.uint8)
    if len(b) == 0:
        return np.zeros(0, dtype=np.uint64)
    ends = np.flatnonzero(b < 0x80)
    starts = np.r_[0, ends[:-1] + 1]
    k = np.arange(len(b)) - np.repeat(starts, ends - starts + 1)
    parts = (b & 0x7F).astype(np.uint64) << (7 * k).astype(np.uint64)
    return np.add.reduceat(parts, starts)


def packed_sint64(data: bytes) -> np.ndarray:
    """Decode a packed repeated sint64 field (vectorised)."""
    u = packed_uvarint(data)
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


def _fixed(offset: int, granularity: int, values: np.ndarray) -> np.ndarray:
    """int32 fixed-point 1e-7 degrees as osmium stores them (nanodegrees truncated toward zero)."""
    nano = offset + granularity * values
    return (np.sign(nano) * (np.abs(nano) // 100)).astype(np.int32)


@njit(cache=True, nogil=True)
def varint_at(buf, pos):
    result = np.int64(0)
    shift = 0
    while True:
        b = np.int64(buf[pos])
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


@njit(cache=True, nogil=True)
def skip_at(buf, pos, wire):
    if wire == 0:
        _, pos = varint_at(buf, pos)
    elif wire == 2:
        ln, pos = varint_at(buf, pos)
        pos += ln
    elif wire == 1:
        pos += 8
    elif wire == 5:
        pos += 4
    else:
        return -1
    return pos


@njit(cache=True, nogil=True)
def message_at(buf, pos):
    """The field at buf[pos:]: (its number, its payload's start, its end) for a length-delimited one; other
    fields are skipped, as (-1, end, end); (-2, -1, -1) on a wire type protobuf does not have."""
    key, pos = varint_at(buf, pos)
    w = key & 7
    if w != 2:
        pos = skip_at(buf, pos, w)
        if pos < 0:
            return -2, -1, -1
        return -1, pos, pos
    ln, pos = varint_at(buf, pos)
    return key >> 3, pos, pos + ln


@njit(cache=True, nogil=True)
def group_objects(buf, g0, g1, field, ids, versions, ends, refs, n, nr):
    """Every length-delimited `field` (3: Way, 4: Relation) of the PrimitiveGroup buf[g0:g1]: its id
    (field 1) at ids[n], its Info's version (field 4, its field 1) at versions[n] unless `versions` is
    empty, and, for ways when `refs` is not empty, its node refs (field 8: packed, zigzag, delta)
    appended at refs[nr] (ends[k + 1]: the end of way k's refs). Returns (n, nr) after them, or (-1, -1)
    on a wire type protobuf does not have."""
    want_refs = field == 3 and len(refs) > 0
    pos = g0
    while pos < g1:
        f, pos, end = message_at(buf, pos)
        if f == -2:
            return -1, -1
        if f == field:
            oid = np.int64(0)
            ver = np.int64(0)
            p = pos
            while p < end:
                k2, p = varint_at(buf, p)
                f2 = k2 >> 3
                w2 = k2 & 7
                if f2 == 1 and w2 == 0:
                    oid, p = varint_at(buf, p)
                elif f2 == 4 and w2 == 2:
                    ln2, p = varint_at(buf, p)
                    e2 = p + ln2
                    q = p
                    while q < e2:
                        k3, q = varint_at(buf, q)
                        if (k3 >> 3) == 1 and (k3 & 7) == 0:
                            ver, q = varint_at(buf, q)
                        else:
                            q = skip_at(buf, q, k3 & 7)
                            if q < 0:
                                return -1, -1
                    p = e2
                elif want_refs and f2 == 8 and w2 == 2:
                    ln2, p = varint_at(buf, p)
                    e2 = p + ln2
                    acc = np.int64(0)
                    while p < e2:
                        v, p = varint_at(buf, p)
                        acc += (v >> 1) ^ -(v & 1)
                        refs[nr] = acc
                        nr += 1
                else:
                    p = skip_at(buf, p, w2)
                    if p < 0:
                        return -1, -1
            ids[n] = oid
            if len(versions):
                versions[n] = ver
            n += 1
            if want_refs:
                ends[n] = nr
        pos = end
    return n, nr


@njit(cache=True, nogil=True)
def group_way_refs(buf, g0, g1, ids, ends, refs, nw, nr):
    """group_objects for the ways' ids and node refs (no versions)."""
    return group_objects(buf, g0, g1, 3, ids, ids[:0], ends, refs, nw, nr)


class Collector:
    """The objects scan_pbf(keep=True) hands over, a block at a time (`add`), kept in memory: per type
    ("n", "w", "r") the arrays "id" and "version" in file order, and for nodes "x" and "y"
    (geoengine.bundler.middle.StoreWriter takes the same calls and writes them to disk instead)."""

    def __init__(self):
        self.parts: dict[str, list[tuple]] = {"n": [], "w": [], "r": []}

    def add(self, t: str, ids, versions, x=None, y=None) -> None:
        self.parts[t].append((ids, versions, x, y))

    def objects(self) -> dict[str, dict[str, np.ndarray]]:
        out = {}
        for t, parts in self.parts.items():
            def cat(k, dt, parts=parts):
                return np.concatenate([p[k] for p in parts]).astype(dt, copy=False) if parts else np.zeros(0, dt)

            out[t] = {"id": cat(0, np.int64), "version": cat(1, np.int32)}
            if t == "n":
                out[t]["x"], out[t]["y"] = cat(2, np.int32), cat(3, np.int32)
        return out


def scan_pbf(path: str | Path, keep: bool = False, sink=None) -> dict | None:
    """{"nodes", "ways", "relations", "bbox" (the nodes' [min_lon, min_lat, max_lon, max_lat] or None)}
    of a PBF file, or None when the file is not a PBF this reader knows. Every block's objects go to
    `sink.add(type, ids, versions[, x, y])` when a sink is given (x, y: int32 1e-7 degrees, osmium's
    fixed point); with `keep`, to a Collector whose arrays are returned as "objects"."""
    path = Path(path)
    collector = Collector() if keep else None
    sink = sink if sink is not None else collector
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
            buf = None
            for g0, g1 in groups:
                if g0 == g1:
                    continue
                first = _varint(data, g0)[0] >> 3
                if first in (3, 4):  # a group of ways or of relations (a group holds one kind)
                    if buf is None:
                        buf = np.frombuffer(data, dtype=np.uint8)
                    cap = (g1 - g0) // 4 + 1
                    ids, vers = np.empty(cap, np.int64), np.empty(cap, np.int64)
                    n, _ = group_objects(buf, g0, g1, first, ids, vers, ids[:0], ids[:0], 0, 0)
                    if n < 0:
                        raise ValueError("unsupported protobuf wire type")
                    if first == 3:
                        ways += n
                    else:
                        relations += n
                    if sink is not None:
                        sink.add("w" if first == 3 else "r", ids[:n].copy(), vers[:n].copy())
                    continue
                group = data[g0:g1]
                lats, lons = [], []
                for f, _w, v in _fields(group):
                    if f == 2:  # DenseNodes
                        dense = group[v[0]:v[1]]
                        ids = ver = None
                        for ff, _ww, vv in _fields(dense):
                            if ff == 1:
                                ids = np.cumsum(packed_sint64(dense[vv[0]:vv[1]]))
                                nodes += len(ids)
                            elif ff == 5 and sink is not None:  # DenseInfo: its version (field 1)
                                info = dense[vv[0]:vv[1]]
                                for f3, _w3, v3 in _fields(info):
                                    if f3 == 1:
                                        ver = packed_uvarint(info[v3[0]:v3[1]])
                            elif ff == 8:
                                lats.append(np.cumsum(packed_sint64(dense[vv[0]:vv[1]])))
                            elif ff == 9:
                                lons.append(np.cumsum(packed_sint64(dense[vv[0]:vv[1]])))
                        if sink is not None and ids is not None:
                            sink.add("n", ids, ver if ver is not None and len(ver) == len(ids) else np.zeros(len(ids), np.int64),
                                     _fixed(lon_off, gran, lons[-1]), _fixed(lat_off, gran, lats[-1]))
                    elif f == 1:  # a plain Node
                        nodes += 1
                        node = group[v[0]:v[1]]
                        vals = {ff: vv for ff, _ww, vv in _fields(node)}
                        lats.append(np.asarray([_zigzag(vals.get(8, 0))]))
                        lons.append(np.asarray([_zigzag(vals.get(9, 0))]))
                        if sink is not None:
                            version = 0
                            if 4 in vals:
                                info = node[vals[4][0]:vals[4][1]]
                                version = next((vv for ff, _ww, vv in _fields(info) if ff == 1), 0)
                            sink.add("n", np.asarray([_zigzag(vals.get(1, 0))], np.int64), np.asarray([version], np.int64),
                                     _fixed(lon_off, gran, lons[-1]), _fixed(lat_off, gran, lats[-1]))
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
    out = {"nodes": nodes, "ways": ways, "relations": relations, "bbox": bbox}
    if collector is not None:
        out["objects"] = collector.objects()
    return out
