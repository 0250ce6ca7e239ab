"""The tile patch's splice: a touched tile made from the old tile's bytes and the changed features alone,
not cut again from every feature that reaches it (docs/tiles.md, "Updates: the splice").

A tile's bytes (mvt._frame) are, layer by layer in schema order, the layer's name, its features in
collection order (tags as ids into the layer's tables, MVT type, geometry bytes; a feature of type 0
writes nothing, its layer is still written), then its keys and values tables in order of first use, then
extent and version. A feature's geometry bytes in a tile depend only on that feature, the tile and the zoom.
So a tile is a function of the ordered list of its features' (layer, seq, tags, type, geometry).

- The full cut records, per tile it makes, its features' seqs in the tile's order (a type-0 one as
  -1 - seq) and whether a value entry of the tile stands for values that encode differently ("mixed": 1
  and 1.0 are one entry, the first one's bytes; the tile's bytes then do not give every feature's own
  value): `FILE` in the kept collection, not part of the stage's output.
- The patch (`splice_tiles`): the features of the affected objects are cut alone into "mini tiles" (the
  tiler's own code, on a state holding only them); each touched tile's old bytes are decoded into raw
  pieces (`_decode`, Numba), the affected objects' old features dropped, the new ones merged in by (layer,
  seq), and the layers framed again (`_splice`, Numba: key and value tables rebuilt in order of first use
  from the raw entries, values deduplicated by class as mapbox-vector-tile's dicts do). A tile that is
  mixed (old or mini), not kept, or whose decoded pieces do not match its seqs is cut again as before.
"""

from __future__ import annotations

import gzip
import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import numba
import numpy as np

from geoengine.tiles import mvt, schema

FILE = "tileseqs.npz"
_NAMES = [n.encode("utf-8") for n in schema.LAYERS]


# ----------------------------------------------------------------------------------------- the record

def tile_key(z, ids) -> np.ndarray:
    """One sortable int64 per tile: z << 56 | x << 28 | y (ids: x << 32 | y)."""
    ids = np.asarray(ids, dtype=np.int64)
    return (np.int64(z) << 56) | ((ids >> 32) << 28) | (ids & 0xFFFFFFFF)


def save(folder: Path, keys: np.ndarray, off: np.ndarray, seqs: np.ndarray, mixed: np.ndarray) -> int:
    """Write the seq lists (per tile key, sorted: seqs[off[i]:off[i + 1]], mixed[i]); returns the bytes."""
    path = Path(folder) / FILE
    with open(path, "wb") as fh:
        np.savez(fh, key=np.asarray(keys, dtype=np.int64), off=np.asarray(off, dtype=np.int64),
                 seqs=np.asarray(seqs, dtype=np.int64), mixed=np.asarray(mixed, dtype=bool))
    return path.stat().st_size


def from_record(record: list) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(keys, off, seqs, mixed), sorted by key, of cut_spooled's `record` [(z, x, y, seqs, mixed)]."""
    if not record:
        return np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, bool)
    zxy = np.asarray([r[:3] for r in record], dtype=np.int64)
    keys = (zxy[:, 0] << 56) | (zxy[:, 1] << 28) | zxy[:, 2]
    order = np.argsort(keys, kind="stable")
    lens = np.asarray([len(r[3]) for r in record], dtype=np.int64)[order]
    off = np.zeros(len(record) + 1, dtype=np.int64)
    np.cumsum(lens, out=off[1:])
    seqs = np.concatenate([np.asarray(record[i][3], dtype=np.int64) for i in order.tolist()]) if off[-1] \
        else np.zeros(0, np.int64)
    mixed = np.asarray([bool(record[i][4]) for i in order.tolist()], dtype=bool)
    return keys[order], off, seqs, mixed


def save_record(folder: Path, record: list) -> int:
    return save(folder, *from_record(record))


class Kept:
    """A bundle's seq lists (`FILE`)."""

    def __init__(self, path: Path):
        with np.load(path) as d:
            self.key, self.off, self.seqs, self.mixed = d["key"], d["off"], d["seqs"], d["mixed"]

    @classmethod
    def load(cls, folder: Path):
        path = Path(folder) / FILE
        return cls(path) if path.exists() else None

    def rows(self, keys: np.ndarray) -> np.ndarray:
        """Each key's row (-1: not kept)."""
        i = np.minimum(np.searchsorted(self.key, keys), max(len(self.key) - 1, 0))
        return np.where((len(self.key) > 0) & (self.key[i] == keys), i, -1) if len(self.key) else \
            np.full(len(keys), -1, dtype=np.int64)

    def entries(self, row: int) -> np.ndarray:
        return self.seqs[self.off[row]:self.off[row + 1]]


def merged(old: Kept | None, drop_keys: np.ndarray, add: tuple) -> tuple:
    """The new seq lists: the old ones but the tiles `drop_keys` (sorted), plus `add` (keys, off, seqs,
    mixed, sorted by key; none of drop_keys' complement)."""
    ak, aoff, aseq, amix = add
    if old is None or len(old.key) == 0:
        return add
    keep = ~np.isin(old.key, drop_keys)
    lens_o = np.diff(old.off)[keep]
    take = np.repeat(keep, np.diff(old.off))
    keys = np.concatenate([old.key[keep], ak])
    lens = np.concatenate([lens_o, np.diff(aoff)])
    src_seq = [old.seqs[take], aseq]
    order = np.argsort(keys, kind="stable")
    seqs = np.concatenate(src_seq)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    idx = np.repeat(starts[order] - np.concatenate([[0], np.cumsum(lens[order])[:-1]]), lens[order]) + \
        np.arange(int(lens.sum()))
    off = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum(lens[order], out=off[1:])
    return keys[order], off, seqs[idx], np.concatenate([old.mixed[keep], amix])[order]


# ----------------------------------------------------------------------------------------- the kernels

@numba.njit(cache=True, nogil=True)
def _uvarint(buf, pos):
    """(value as uint64, next position); position -1 when the varint runs past the buffer."""
    v = np.uint64(0)
    shift = np.uint64(0)
    n = len(buf)
    while True:
        if pos >= n or shift > 63:
            return np.uint64(0), -1
        b = np.uint64(buf[pos])
        pos += 1
        v |= (b & np.uint64(0x7F)) << shift
        if b < 0x80:
            return v, pos
        shift += np.uint64(7)


@numba.njit(cache=True, nogil=True)
def _decode(buf):
    """A tile's raw pieces, as mvt._frame writes them (anything else: ok False). L [layers, 8]: name
    span, feature rows, key rows, value rows; F [features, 6]: layer, tags span, type, geometry span;
    K [keys, 2]: the key field's span (tag and length included); V [values, 6]: the value field's span,
    kind (0 string, 1 double, 2 int, 3 bool), integer value (int, bool), payload span (string); Vd: the
    double value."""
    n = len(buf)
    cap = n // 2 + 2
    L = np.zeros((cap, 8), dtype=np.int64)
    F = np.zeros((cap, 6), dtype=np.int64)
    K = np.zeros((cap, 2), dtype=np.int64)
    V = np.zeros((cap, 6), dtype=np.int64)
    Vd = np.zeros(cap, dtype=np.float64)
    nl = 0
    nf = 0
    nk = 0
    nv = 0
    pos = 0
    while pos < n:
        if buf[pos] != 0x1A:
            return False, L[:0], F[:0], K[:0], V[:0], Vd[:0]
        ln, pos = _uvarint(buf, pos + 1)
        if pos < 0 or pos + np.int64(ln) > n:
            return False, L[:0], F[:0], K[:0], V[:0], Vd[:0]
        end = pos + np.int64(ln)
        # name
        if pos >= end or buf[pos] != 0x0A:
            return False, L[:0], F[:0], K[:0], V[:0], Vd[:0]
        sl, q = _uvarint(buf, pos + 1)
        if q < 0 or q + np.int64(sl) > end:
            return False, L[:0], F[:0], K[:0], V[:0], Vd[:0]
        L[nl, 0] = q
        L[nl, 1] = q + np.int64(sl)
        pos = q + np.int64(sl)
        L[nl, 2] = nf
        L[nl, 4] = nk
        L[nl, 6] = nv
        stage = 2  # fields must come in order: features (2), keys (3), values (4), extent, version
        ok_tail = False
        while pos < end:
            tag = buf[pos]
            if tag == 0x12 and stage == 2:  # a feature
                fl, q = _uvarint(buf, pos + 1)
                if q < 0 or q + np.int64(fl) > end:
                    return False, L[:0], F[:0], K[:0], V[:0], Vd[:0]
                fe = q + np.int64(fl)
                F[nf, 0] = nl
                F[nf, 1] = -1
                F[nf, 2] = -1
                if q < fe and buf[q] == 0x12:
                    tl, r = _uvarint(buf, q + 1)
                    if r < 0 or r + np.int64(tl) > fe:
                        return False, L[:0], F[:0], K[:0], V[:0], Vd[:0]
                    F[nf, 1] = r
                    F[nf, 2] = r + np.int64(tl)
                    q = r + np.int64(tl)
                if q + 3 > fe or buf[q] != 0x18 or buf[q + 1] >= 0x80 or buf[q + 2] != 0x22:
                    return False, L[:0], F[:0], K[:0], V[:0], Vd[:0]
                F[nf, 3] = buf[q + 1]
                gl, r = _uvarint(buf, q + 3)
                if r < 0 or r + np.int64(gl) != fe:
                    return False, L[:0], F[:0], K[:0], V[:0], Vd[:0]
                F[nf, 4] = r
                F[nf, 5] = fe
                nf += 1
                pos = fe
            elif tag == 0x1A and stage <= 3:  # a key
                stage = 3
                kl, q = _uvarint(buf, pos + 1)
                if q < 0 or q + np.int64(kl) > end:
                    return False, L[:0], F[:0], K[:0], V[:0], Vd[:0]
                K[nk, 0] = pos
                K[nk, 1] = q + np.int64(kl)
                nk += 1
                pos = q + np.int64(kl)
            elif tag == 0x22 and stage <= 4:  # a value
                stage = 4
                vl, q = _uvarint(buf, pos + 1)
                if q < 0 or q + np.int64(vl) > end or vl < 2:
                    return False, L[:0], F[:0], K[:0], V[:0], Vd[:0]
                ve = q + np.int64(vl)
                V[nv, 0] = pos
                V[nv, 1] = ve
                t = buf[q]
                if t == 0x0A:
                    sl, r = _uvarint(buf, q + 1)
                    if r < 0 or r + np.int64(sl) != ve:
                        return False, L[:0], F[:0], K[:0], V[:0], Vd[:0]
                    V[nv, 2] = 0
                    V[nv, 4] = r
                    V[nv, 5] = ve
                elif t == 0x19:
                    if q + 9 != ve:
                        return False, L[:0], F[:0], K[:0], V[:0], Vd[:0]
                    V[nv, 2] = 1
                    Vd[nv] = buf[q + 1:q + 9].copy().view(np.float64)[0]
                elif t == 0x20 or t == 0x38:
                    iv, r = _uvarint(buf, q + 1)
                    if r != ve:
                        return False, L[:0], F[:0], K[:0], V[:0], Vd[:0]
                    V[nv, 2] = 2 if t == 0x20 else 3
                    V[nv, 3] = np.int64(iv)
                else:
                    return False, L[:0], F[:0], K[:0], V[:0], Vd[:0]
                nv += 1
                pos = ve
            elif tag == 0x28 and stage <= 4:  # extent 4096, version 2: the layer's end
                if pos + 5 != end or buf[pos + 1] != 0x80 or buf[pos + 2] != 0x20 or buf[pos + 3] != 0x78 \
                        or buf[pos + 4] != 0x02:
                    return False, L[:0], F[:0], K[:0], V[:0], Vd[:0]
                ok_tail = True
                pos = end
            else:
                return False, L[:0], F[:0], K[:0], V[:0], Vd[:0]
        if not ok_tail:
            return False, L[:0], F[:0], K[:0], V[:0], Vd[:0]
        L[nl, 3] = nf
        L[nl, 5] = nk
        L[nl, 7] = nv
        nl += 1
    return True, L[:nl], F[:nf], K[:nk], V[:nv], Vd[:nv]


@numba.njit(cache=True, nogil=True)
def _fnv(buf, s, e, h):
    for i in range(s, e):
        h = (h ^ np.uint64(buf[i])) * np.uint64(1099511628211)
    return h


@numba.njit(cache=True, nogil=True)
def _same_bytes(buf, a0, a1, b0, b1):
    if a1 - a0 != b1 - b0:
        return False
    for i in range(a1 - a0):
        if buf[a0 + i] != buf[b0 + i]:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _value_hash(buf, V, Vd, v):
    kind = V[v, 2]
    if kind == 0:
        return _fnv(buf, V[v, 4], V[v, 5], np.uint64(14695981039346656037))
    if kind == 3:
        return np.uint64(7 + V[v, 3])
    d = Vd[v] if kind == 1 else np.float64(V[v, 3])
    if d == 0.0:
        d = 0.0  # -0.0 is 0
    x = np.empty(1, dtype=np.float64)
    x[0] = d
    return x.view(np.uint64)[0] * np.uint64(0x9E3779B97F4A7C15) + np.uint64(11)


@numba.njit(cache=True, nogil=True)
def _int_eq_double(i, d):
    """Python's `i == d` for an int and a float (exact)."""
    if d != np.floor(d) or d < -9.223372036854775808e18 or d >= 9.223372036854775808e18:
        return False
    return np.int64(d) == i


@numba.njit(cache=True, nogil=True)
def _same_class(buf, V, Vd, a, b):
    """Values a and b are one entry of a layer's table (mapbox-vector-tile's dict: strings by text,
    booleans apart, numbers by value: 1 and 1.0 are one)."""
    ka = V[a, 2]
    kb = V[b, 2]
    if ka == 0 or kb == 0:
        return ka == kb and _same_bytes(buf, V[a, 4], V[a, 5], V[b, 4], V[b, 5])
    if ka == 3 or kb == 3:
        return ka == kb and V[a, 3] == V[b, 3]
    if ka == 1 and kb == 1:
        return Vd[a] == Vd[b]
    if ka == 2 and kb == 2:
        return V[a, 3] == V[b, 3]
    if ka == 2:
        return _int_eq_double(V[a, 3], Vd[b])
    return _int_eq_double(V[b, 3], Vd[a])


@numba.njit(cache=True, nogil=True)
def _splice(buf, L, F, K, V, Vd, rows, lstart):
    """The layers' bytes (features, keys, values) of a tile whose out-layer j holds features
    rows[lstart[j]:lstart[j + 1]] (rows of F, in order; a layer may hold none: its features were of type
    0), their tags re-numbered into tables rebuilt in order of first use (mvt._frame's rule). Returns
    (bytes, per layer end offsets, mixed, ok)."""
    size = 16
    n_tags = 1
    for j in range(len(rows)):
        f = rows[j]
        size += F[f, 5] - F[f, 4] + 24
        s, e = F[f, 1], F[f, 2]
        if s >= 0:
            size += 5 * (e - s)
            n_tags += e - s
    cap = 16
    while cap < 2 * n_tags:
        cap *= 2
    ktab = np.full(cap, -1, dtype=np.int64)  # hash slot -> out entry
    vtab = np.full(cap, -1, dtype=np.int64)
    kent = np.empty(n_tags, dtype=np.int64)  # out entry -> K row
    vent = np.empty(n_tags, dtype=np.int64)  # out entry -> V row
    kslot = np.empty(n_tags, dtype=np.int64)
    vslot = np.empty(n_tags, dtype=np.int64)
    # entries copied: bounded by the source entries' bytes per tag
    for j in range(len(rows)):
        f = rows[j]
        s, e = F[f, 1], F[f, 2]
        if s < 0:
            continue
        lay = F[f, 0]
        q = s
        while q < e:
            ki, q = _uvarint(buf, q)
            if q < 0:
                return np.zeros(0, np.uint8), np.zeros(len(lstart), np.int64), False, False
            vi, q = _uvarint(buf, q)
            if q < 0 or q > e:
                return np.zeros(0, np.uint8), np.zeros(len(lstart), np.int64), False, False
            kr = L[lay, 4] + np.int64(ki)
            vr = L[lay, 6] + np.int64(vi)
            if kr >= L[lay, 5] or vr >= L[lay, 7]:
                return np.zeros(0, np.uint8), np.zeros(len(lstart), np.int64), False, False
            size += K[kr, 1] - K[kr, 0] + V[vr, 1] - V[vr, 0]
    out = np.empty(size, dtype=np.uint8)
    tags = np.empty(10 * n_tags + 16, dtype=np.uint8)
    lend = np.zeros(len(lstart), dtype=np.int64)
    mask = np.uint64(cap - 1)
    mixed = False
    pos = 0
    for layer in range(len(lstart) - 1):
        nk = 0
        nv = 0
        for j in range(lstart[layer], lstart[layer + 1]):
            f = rows[j]
            s, e = F[f, 1], F[f, 2]
            lay = F[f, 0]
            tl = 0
            if s >= 0:
                q = s
                while q < e:
                    ki, q = _uvarint(buf, q)
                    vi, q = _uvarint(buf, q)
                    kr = L[lay, 4] + np.int64(ki)
                    vr = L[lay, 6] + np.int64(vi)
                    # the key's entry
                    h = _fnv(buf, K[kr, 0], K[kr, 1], np.uint64(14695981039346656037)) & mask
                    while True:
                        o = ktab[h]
                        if o < 0:
                            ktab[h] = nk
                            kent[nk] = kr
                            kslot[nk] = h
                            o = nk
                            nk += 1
                            break
                        if _same_bytes(buf, K[kent[o], 0], K[kent[o], 1], K[kr, 0], K[kr, 1]):
                            break
                        h = (h + np.uint64(1)) & mask
                    tl = mvt._put_varint(tags, tl, o)
                    # the value's entry (by class; its bytes are the first one's)
                    h = _value_hash(buf, V, Vd, vr) & mask
                    while True:
                        o = vtab[h]
                        if o < 0:
                            vtab[h] = nv
                            vent[nv] = vr
                            vslot[nv] = h
                            o = nv
                            nv += 1
                            break
                        if _same_class(buf, V, Vd, vent[o], vr):
                            if not _same_bytes(buf, V[vent[o], 0], V[vent[o], 1], V[vr, 0], V[vr, 1]):
                                mixed = True
                            break
                        h = (h + np.uint64(1)) & mask
                    tl = mvt._put_varint(tags, tl, o)
            glen = F[f, 5] - F[f, 4]
            body = 2 + 1 + mvt._varint_len(glen) + glen
            if tl > 0:
                body += 1 + mvt._varint_len(tl) + tl
            out[pos] = 0x12
            pos = mvt._put_varint(out, pos + 1, body)
            if tl > 0:
                out[pos] = 0x12
                pos = mvt._put_varint(out, pos + 1, tl)
                out[pos:pos + tl] = tags[:tl]
                pos += tl
            out[pos] = 0x18
            out[pos + 1] = np.uint8(F[f, 3])
            out[pos + 2] = 0x22
            pos = mvt._put_varint(out, pos + 3, glen)
            out[pos:pos + glen] = buf[F[f, 4]:F[f, 5]]
            pos += glen
        for o in range(nk):
            a, b = K[kent[o], 0], K[kent[o], 1]
            out[pos:pos + b - a] = buf[a:b]
            pos += b - a
            ktab[kslot[o]] = -1
        for o in range(nv):
            a, b = V[vent[o], 0], V[vent[o], 1]
            out[pos:pos + b - a] = buf[a:b]
            pos += b - a
            vtab[vslot[o]] = -1
        lend[layer + 1] = pos
    return out[:pos], lend, mixed, True


def decode(data: bytes):
    """`_decode` of a tile's (gunzipped) bytes: (buf, L, F, K, V, Vd) or None."""
    buf = np.frombuffer(data, dtype=np.uint8)
    ok, L, F, K, V, Vd = _decode(buf)
    return (buf, L, F, K, V, Vd) if ok else None


def frame(buf, L, F, K, V, Vd, rows: np.ndarray, layers: list[int], lstart: np.ndarray) -> tuple[bytes, bool] | None:
    """The tile's bytes from decoded pieces: out layer j is schema layer layers[j] holding the features
    rows[lstart[j]:lstart[j + 1]]. (bytes, mixed), or None when a piece cannot be read."""
    data, lend, mixed, ok = _splice(buf, L, F, K, V, Vd, np.asarray(rows, dtype=np.int64),
                                    np.asarray(lstart, dtype=np.int64))
    if not ok:
        return None
    raw = data.tobytes()
    le = lend.tolist()
    out = []
    for j, li in enumerate(layers):
        out.append(mvt._field(3, b"".join([mvt._field(1, _NAMES[li]), raw[le[j]:le[j + 1]], mvt._LAYER_TAIL])))
    return b"".join(out), bool(mixed)


def reframe(data: bytes) -> bytes | None:
    """A tile decoded and framed again (every feature kept): the same bytes when the decoder reads every
    piece (tested on every tile of real builds)."""
    d = decode(data)
    if d is None:
        return None
    buf, L, F, K, V, Vd = d
    names = [bytes(buf[a:b]).decode("utf-8") for a, b in L[:, :2].tolist()]
    layers = [schema.LAYERS.index(n) for n in names]
    res = frame(buf, L, F, K, V, Vd, np.arange(len(F)), layers, L[:, 2].tolist() + [len(F)])
    return None if res is None else res[0]


def warm() -> None:
    data = mvt.encode_layers([("places", np.array([__import__("shapely").Point(1, 2)], dtype=object), [0],
                               [{"a": 1, "b": "x", "c": 1.5, "d": True}])])
    reframe(data)


# ----------------------------------------------------------------------------------------- the patch

def mini_spool(fs, seqs: np.ndarray):
    """A spool-like set of the collection `fs`'s features with those seqs alone (cut_spooled's input)."""
    def pick(recs):
        if not recs:
            return []
        s = np.fromiter((r[0] for r in recs), dtype=np.int64, count=len(recs))
        return [recs[i] for i in np.flatnonzero(np.isin(s, seqs)).tolist()]
    return SimpleNamespace(folder=fs.folder, shared=pick(fs.shared), low=pick(fs.low), pz=fs.pz,
                           maxzoom=fs.maxzoom, reach_seqs=seqs, parts=fs.new_parts)


def old_tiles(old_path: Path, keys: np.ndarray) -> dict[int, bytes]:
    """The old archive's bytes (gzip) of the tiles `keys`."""
    out = {}
    with sqlite3.connect(f"file:{old_path}?mode=ro", uri=True) as db:
        q = "SELECT tile_data FROM tiles WHERE zoom_level = ? AND tile_column = ? AND tile_row = ?"
        for k in keys.tolist():
            z, x, y = k >> 56, (k >> 28) & 0xFFFFFFF, k & 0xFFFFFFF
            row = db.execute(q, (z, x, (1 << z) - 1 - y)).fetchone()
            if row is not None:
                out[k] = row[0]
    return out


def _layer_of(seq: np.ndarray, layer: np.ndarray, seqs: np.ndarray) -> np.ndarray:
    """The layers of the features `seqs` (-1: not in the index `seq`, sorted, with `layer`)."""
    i = np.minimum(np.searchsorted(seq, seqs), max(len(seq) - 1, 0))
    if len(seq) == 0:
        return np.full(len(seqs), -1, dtype=np.int64)
    return np.where(seq[i] == seqs, layer[i], -1).astype(np.int64)


def _in_sorted(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """np.isin(values, sorted_set) by binary search (the set is small, the values many)."""
    if len(sorted_set) == 0:
        return np.zeros(len(values), dtype=bool)
    i = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[i] == values


def splice_one(old_gz: bytes, old_entries: np.ndarray, old_layers: np.ndarray, old_keep: np.ndarray,
               mini: tuple | None):
    """One tile spliced: the old tile's pieces less the features not `old_keep` (the affected objects'), the mini tile's
    (gzip bytes, entries, layers) merged in by (layer, seq). Returns (gzip bytes or None: no feature
    left, entries, mixed), or None when the splice cannot be exact (the caller cuts the tile again)."""
    res = _splice_raw(None if old_gz is None else gzip.decompress(old_gz), old_entries, old_layers, old_keep,
                      None if mini is None else (gzip.decompress(mini[0]), *mini[1:]))
    if res is None or res[0] is None:
        return res
    return _gzip(res[0]), res[1], res[2]


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=6, mtime=0)  # as the cut compresses a tile (tiler._encode_batch)


def _splice_raw(old: bytes, old_entries: np.ndarray, old_layers: np.ndarray, old_keep: np.ndarray,
                mini: tuple | None):
    """`splice_one` on the tiles' bytes gunzipped, returning the new tile's bytes unzipped."""
    pieces = []
    ents, lays, srcs = [], [], []
    base_f = 0
    for raw, entries, layers in ((old, old_entries, old_layers), mini or (None, None, None)):
        if raw is None:
            continue
        d = decode(raw)
        if d is None:
            return None
        buf, L, F, Kk, V, Vd = d
        drawn = entries >= 0
        if int(drawn.sum()) != len(F):
            return None
        # the decoded layers must be the entries' layers, in order, each with its drawn features
        ul = layers[np.r_[True, layers[1:] != layers[:-1]]] if len(layers) else layers
        if len(ul) != len(L) or (np.diff(layers) < 0).any():
            return None
        names = [bytes(buf[a:b]) for a, b in L[:, :2].tolist()]
        if names != [_NAMES[i] for i in ul.tolist()]:
            return None
        li = np.searchsorted(ul, layers[drawn])
        if (F[:, 0] != li).any():
            return None
        rows = np.full(len(entries), -1, dtype=np.int64)
        rows[drawn] = np.arange(len(F)) + base_f
        pieces.append((buf, L, F, Kk, V, Vd))
        ents.append(entries)
        lays.append(layers)
        srcs.append(rows)
        base_f += len(F)
    if not pieces:
        return gz_none()
    # one buffer of both tiles' pieces (the mini tile's spans and rows moved after the old tile's)
    if len(pieces) == 2:
        (b0, L0, F0, K0, V0, D0), (b1, L1, F1, K1, V1, D1) = pieces
        sh = len(b0)
        L1, F1, K1, V1 = L1.copy(), F1.copy(), K1.copy(), V1.copy()
        L1[:, :2] += sh
        L1[:, 2:4] += len(F0)
        L1[:, 4:6] += len(K0)
        L1[:, 6:8] += len(V0)
        F1[:, 0] += len(L0)
        F1[:, 1:3] = np.where(F1[:, 1:3] >= 0, F1[:, 1:3] + sh, -1)
        F1[:, 4:6] += sh
        K1 += sh
        V1[:, :2] += sh
        V1[:, 4:6] += sh
        buf = np.concatenate([b0, b1])
        L, F, Kk, V, Vd = np.concatenate([L0, L1]), np.concatenate([F0, F1]), np.concatenate([K0, K1]), \
            np.concatenate([V0, V1]), np.concatenate([D0, D1])
    else:
        buf, L, F, Kk, V, Vd = pieces[0]
    # the old entries less the dropped ones, then the new ones
    keep0 = old_keep if old is not None else None
    e = [ents[0][keep0]] if keep0 is not None else []
    ly = [lays[0][keep0]] if keep0 is not None else []
    rw = [srcs[0][keep0]] if keep0 is not None else []
    if len(ents) > (1 if old is not None else 0):
        e.append(ents[-1])
        ly.append(lays[-1])
        rw.append(srcs[-1])
    e, ly, rw = np.concatenate(e), np.concatenate(ly), np.concatenate(rw)
    if len(e) == 0:
        return gz_none()
    s = np.where(e >= 0, e, -1 - e)
    order = np.lexsort((s, ly))
    e, ly, rw, s = e[order], ly[order], rw[order], s[order]
    if len(s) > 1 and ((np.diff(s) == 0) & (np.diff(ly) == 0)).any():
        return None  # a feature both kept and made again: the sets disagree
    starts = np.flatnonzero(np.r_[True, ly[1:] != ly[:-1]])
    layers = ly[starts].tolist()
    drawn = rw >= 0
    # the rows per out layer, type-0 features left out (they only make their layer present)
    lstart = np.searchsorted(np.flatnonzero(drawn), starts).tolist() + [int(drawn.sum())]
    res = frame(buf, L, F, Kk, V, Vd, rw[drawn], layers, np.asarray(lstart))
    if res is None:
        return None
    data, mixed = res
    return data, e, mixed


def gz_none():
    return None, np.zeros(0, dtype=np.int64), False


def splice_tiles(fs, p, old_kept: Path, new_kept: Path, old_path: Path, kept: Kept, recut: dict, plan, bbox,
                 on_step=None):
    """The touched tiles `recut` (per zoom, sorted ids) that can be spliced, spliced: returns (tiles
    [(z, x, y, gzip bytes)], their records [(z, x, y, entries, mixed)], the tiles to cut again as before
    (per zoom, sorted ids), info)."""
    from geoengine.tiles.spool import cut_spooled, restrict_plan

    keys_z = {z: tile_key(z, ids) for z, ids in recut.items() if len(ids)}
    keys = np.sort(np.concatenate(list(keys_z.values()))) if keys_z else np.zeros(0, np.int64)
    rows = kept.rows(keys)
    ok = (rows >= 0)
    ok[ok] = ~kept.mixed[rows[ok]]
    old_index = np.load(old_kept / "index.npy", mmap_mode="r")
    new_index = np.asarray(fs.index)
    codes = fs.affected  # slim's: exactly the objects whose features differ between the two collections
    oi = np.asarray(old_index)
    o_seq, o_lay = np.ascontiguousarray(oi["seq"]), np.ascontiguousarray(oi["layer"])
    n_seq, n_lay = np.ascontiguousarray(new_index["seq"]), np.ascontiguousarray(new_index["layer"])
    dropped = np.sort(o_seq[_in_sorted(np.ascontiguousarray(oi["obj"]), codes)])
    new_seqs = np.sort(n_seq[_in_sorted(np.ascontiguousarray(new_index["obj"]), codes)])
    to_splice = keys[ok]
    only = {}
    for z in range(15):
        sel = to_splice[(to_splice >> 56) == z]
        if len(sel):
            only[z] = np.sort(((sel >> 28) & 0xFFFFFFF) << 32 | (sel & 0xFFFFFFF))
    mini_rec: list = []
    mini_gz: dict[int, bytes] = {}
    if only and len(new_seqs):
        mini = mini_spool(fs, new_seqs)
        mplan = restrict_plan(plan, only, fs.pz)
        # in this process: the features are few, a pool's forks would cost more than they save
        for z, x, y, data in cut_spooled(mini, mplan.partitions, bbox, plan=mplan, only=only, record=mini_rec,
                                         on_step=on_step, processes=1):
            mini_gz[int(tile_key(z, [x << 32 | y])[0])] = data
    mini_of = {int(tile_key(z, [x << 32 | y])[0]): (e, m) for z, x, y, e, m in mini_rec}
    olds = old_tiles(old_path, to_splice)
    # gunzipped and gzipped again on every core (zlib lets go of the GIL): the other core is often idle by
    # now, the search patch done
    pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)
    try:
        olds = dict(zip(olds, pool.map(gzip.decompress, olds.values()), strict=True))
        mini_gz = dict(zip(mini_gz, pool.map(gzip.decompress, mini_gz.values()), strict=True))
        # every old entry of the tiles to splice at once: its layer, and whether it is kept
        r_ok = rows[ok]
        lens = kept.off[r_ok + 1] - kept.off[r_ok]
        at = np.repeat(kept.off[r_ok] - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens) + np.arange(int(lens.sum()))
        ent_all = kept.seqs[at]
        s_all = np.where(ent_all >= 0, ent_all, -1 - ent_all)
        lay_all = _layer_of(o_seq, o_lay, s_all)
        keep_all = ~_in_sorted(s_all, dropped)
        first = np.concatenate([[0], np.cumsum(lens)]).tolist()
        made, record, again = [], [], []
        spliced = fell = 0
        for t, k in enumerate(to_splice.tolist()):
            z, x, y = k >> 56, (k >> 28) & 0xFFFFFFF, k & 0xFFFFFFF
            res = None
            mo = mini_of.get(k)
            if k in olds and not (mo is not None and mo[1]):
                a, b = first[t], first[t + 1]
                ent, lay = ent_all[a:b], lay_all[a:b]
                mini = None
                if mo is not None:
                    me = np.asarray(mo[0], dtype=np.int64)
                    ml = _layer_of(n_seq, n_lay, np.where(me >= 0, me, -1 - me))
                    mini = None if (ml < 0).any() else (mini_gz[k], me, ml)
                if not (lay < 0).any() and (mo is None or mini is not None):
                    res = _splice_raw(olds[k], ent, lay, keep_all[a:b], mini)
            if res is None:
                again.append(k)
                fell += 1
                continue
            raw, entries, mixed = res
            spliced += 1
            if raw is not None:
                made.append((z, x, y, raw))
                record.append((z, x, y, entries, mixed))
        made = [(z, x, y, gz) for (z, x, y, _), gz in zip(made, pool.map(_gzip, [m[3] for m in made]), strict=True)]
    finally:
        pool.shutdown()
    again = np.sort(np.concatenate([keys[~ok], np.asarray(again, dtype=np.int64)]))
    cut = {}
    for z in range(15):
        sel = again[(again >> 56) == z]
        if len(sel):
            cut[z] = np.sort(((sel >> 28) & 0xFFFFFFF) << 32 | (sel & 0xFFFFFFF))
    info = {"tiles_spliced": spliced, "tiles_splice_declined": fell, "tiles_not_kept": int((~ok).sum()),
            "mini_tiles": len(mini_gz), "objects_spliced": int(len(codes)), "features_dropped": int(len(dropped)),
            "features_spliced": int(len(new_seqs))}
    return made, record, cut, info
