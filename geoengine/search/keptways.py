"""The Numba walker of `records.kept_refs`: the node refs of the kept ways' uncompressed PBF files (a module of
its own so that the full run, which writes them, does not load Numba for it)."""

from __future__ import annotations

import numpy as np
from numba import njit

from geoengine.bundler.pbfscan import _skip_at, _varint_at


@njit(cache=True, nogil=True)
def _group_way_refs(buf, g0, g1, ids, ends, refs, nw, nr):
    """The id (field 1) and node refs (field 8: packed, zigzag, delta) of every Way (field 3) of the
    PrimitiveGroup buf[g0:g1], appended at ids[nw], refs[nr] (ends[k + 1]: the end of way k's refs);
    returns (nw, nr), or (-1, -1) on a wire type protobuf does not have."""
    pos = g0
    while pos < g1:
        key, pos = _varint_at(buf, pos)
        f = key >> 3
        w = key & 7
        if w != 2:
            pos = _skip_at(buf, pos, w)
            if pos < 0:
                return -1, -1
            continue
        ln, pos = _varint_at(buf, pos)
        end = pos + ln
        if f == 3:
            p = pos
            while p < end:
                k2, p = _varint_at(buf, p)
                f2 = k2 >> 3
                w2 = k2 & 7
                if f2 == 1 and w2 == 0:
                    ids[nw], p = _varint_at(buf, p)
                elif f2 == 8 and w2 == 2:
                    ln2, p = _varint_at(buf, p)
                    e2 = p + ln2
                    acc = np.int64(0)
                    while p < e2:
                        v, p = _varint_at(buf, p)
                        acc += (v >> 1) ^ -(v & 1)
                        refs[nr] = acc
                        nr += 1
                else:
                    p = _skip_at(buf, p, w2)
                    if p < 0:
                        return -1, -1
            nw += 1
            ends[nw] = nr
        pos = end
    return nw, nr
