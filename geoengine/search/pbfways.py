"""The tags of chosen ways of the search stage's kept ways' files (search/records.py: uncompressed PBFs of
ways that osmium wrote), read from the PBF's bytes by compiled loops: an update wants a few thousand of the
region's kept ways, and handing every kept way to Python through pyosmium to pick them cost about 1.7 us a
way (0.1 s at 16 copies of Liechtenstein, tens of seconds for a large country). Here a way reaches Python
only when it is wanted; the rest costs its protobuf walk in Numba."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numba import njit

from geoengine.bundler.pbfscan import _blobs, _fields, message_at, skip_at, varint_at


@njit(cache=True, nogil=True)
def group_way_tags(buf, g0, g1, wanted, ids, kv_ends, keys, vals, n, nk):
    """The ways of the PrimitiveGroup buf[g0:g1] whose id is in `wanted` (sorted): id at ids[n], their string
    table indices of keys and values (fields 2 and 3, packed) at keys/vals[nk:], kv_ends[n + 1] their end.
    Returns (n, nk) after them, or (-1, -1) on what this reader does not know (unpacked keys or values,
    counts that differ, a wire type protobuf does not have)."""
    pos = g0
    while pos < g1:
        f, pos, end = message_at(buf, pos)
        if f == -2:
            return -1, -1
        if f == 3:
            oid = np.int64(0)
            ks0 = ks1 = vs0 = vs1 = np.int64(-1)
            p = pos
            while p < end:
                k2, p = varint_at(buf, p)
                f2 = k2 >> 3
                w2 = k2 & 7
                if f2 == 1 and w2 == 0:
                    oid, p = varint_at(buf, p)
                elif (f2 == 2 or f2 == 3) and w2 == 2:
                    ln2, p = varint_at(buf, p)
                    if f2 == 2:
                        ks0, ks1 = p, p + ln2
                    else:
                        vs0, vs1 = p, p + ln2
                    p += ln2
                elif f2 == 2 or f2 == 3:
                    return -1, -1
                else:
                    p = skip_at(buf, p, w2)
                    if p < 0:
                        return -1, -1
            i = np.searchsorted(wanted, oid)
            if i < len(wanted) and wanted[i] == oid:
                ids[n] = oid
                nv = nk
                q = ks0
                while ks0 >= 0 and q < ks1:
                    v, q = varint_at(buf, q)
                    keys[nk] = v
                    nk += 1
                q = vs0
                while vs0 >= 0 and q < vs1:
                    v, q = varint_at(buf, q)
                    vals[nv] = v
                    nv += 1
                if nv != nk:
                    return -1, -1
                n += 1
                kv_ends[n] = nk
        pos = end
    return n, nk


@njit(cache=True, nogil=True)
def string_table(buf, s0, s1, starts, lens):
    """(start, length) of every string (field 1) of the StringTable buf[s0:s1]; returns their count, or -1."""
    pos = s0
    n = 0
    while pos < s1:
        key, pos = varint_at(buf, pos)
        if key >> 3 == 1 and key & 7 == 2:
            ln, pos = varint_at(buf, pos)
            starts[n] = pos
            lens[n] = ln
            n += 1
            pos += ln
        else:
            pos = skip_at(buf, pos, key & 7)
            if pos < 0:
                return -1
    return n


def way_tags(path: Path, wanted: np.ndarray) -> dict[int, dict[str, str]]:
    """id -> tags (in the file's order) of the ways of `path` (a PBF) whose id is in `wanted` (sorted int64).
    Raises ValueError on a file this reader does not know."""
    out: dict[int, dict[str, str]] = {}
    if not len(wanted):
        return out
    wanted = np.ascontiguousarray(wanted, np.int64)
    for btype, data in _blobs(path):
        if btype != "OSMData":
            continue
        buf = np.frombuffer(data, np.uint8)
        table = None
        found = []
        for f, _w, v in _fields(data):
            if f == 1:
                table = v
            elif f == 2:
                g0, g1 = v
                cap = g1 - g0 + 1
                ids, kv_ends = np.empty(cap // 4 + 1, np.int64), np.zeros(cap // 4 + 2, np.int64)
                keys, vals = np.empty(cap, np.int64), np.empty(cap, np.int64)
                n, nk = group_way_tags(buf, g0, g1, wanted, ids, kv_ends, keys, vals, 0, 0)
                if n < 0:
                    raise ValueError(f"{path.name}: not a PBF of ways this reader knows")
                if n:
                    found.append((ids[:n], kv_ends[:n + 1], keys[:nk], vals[:nk]))
        if not found:
            continue
        if table is None:
            raise ValueError(f"{path.name}: a block without a string table")
        cap = table[1] - table[0] + 1
        starts, lens = np.empty(cap, np.int64), np.empty(cap, np.int64)
        ns = string_table(buf, table[0], table[1], starts, lens)
        if ns < 0:
            raise ValueError(f"{path.name}: a string table this reader does not know")
        starts, lens = starts[:ns].tolist(), lens[:ns].tolist()
        strings: dict[int, str] = {}

        def s(k: int, strings=strings, data=data, starts=starts, lens=lens) -> str:  # (this block's table)
            got = strings.get(k)
            if got is None:
                got = strings[k] = data[starts[k]:starts[k] + lens[k]].decode("utf-8")
            return got

        for ids, kv_ends, keys, vals in found:
            kl, vl, el = keys.tolist(), vals.tolist(), kv_ends.tolist()
            for j, oid in enumerate(ids.tolist()):
                out[oid] = {s(kl[i]): s(vl[i]) for i in range(el[j], el[j + 1])}
    return out
