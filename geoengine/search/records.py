"""What the search stage's OSM read produced, kept in the bundle for `geoengine update`: osm2pgsql's "slim"
design. A full run keeps, per OSM object, the records the read made of it (`records.pkl`: documents, street
ways, interpolation ways, address nodes, postcode samples, way boxes and shapes, boundaries), the ways that
make a record or are members of a relation that may make one (`ways-*.osm.pbf`, written by osmium: tags and
node refs), and the multipolygon and boundary relations (tags, members). An update (`patch_read`) finds the
objects a change affects (`Change`: the changed ones, the kept ways holding a changed node, the relations
with an affected member way), reads just those again with the stage's own reader (`osm.read_osm` on a small
extract written from the change's objects and the kept ones, node locations from the update's node store),
puts their records in place of the old ones, and the later phases run on the result as in a full run.
Every record is ordered by its object (documents: nodes', ways', closed ways' areas', relations', each by id:
osm.py's `finish_areas`), so a record's place follows from its object alone.

Declined (`Declined`: the stage runs in full): a negative id; a multipolygon or boundary that gains a member
way the full run kept nothing of (its refs were never read)."""

from __future__ import annotations

import json
import pickle
import re
import tempfile
from array import array
from pathlib import Path

import numpy as np
import shapely

from geoengine.search import opl
from geoengine.search.docset import DocSet, pack_columns, row_columns, unpack_columns
from geoengine.search.osm import STREET_COLUMNS, Boundary, InterpolationWays, StreetWays, makes_records

FORMAT = 1
FILE = "records.pkl"
INTERP_COLUMNS = ["id", "kind", "street", "addr_place", "postcode", "ends", "node_id", "xy"]
# document key: class << 61 | id (class 0 node, 1 way, 2 a closed way's area, 3 relation: the documents' order)
SHIFT = np.int64(61)


def _keys(cls: np.ndarray, ids: np.ndarray) -> np.ndarray:
    return (np.asarray(cls, np.int64) << SHIFT) | np.asarray(ids, np.int64)


def doc_keys(ds: DocSet, n_plain: int | None = None) -> np.ndarray:
    """The key of every document (rows from `n_plain` on are area documents)."""
    n = len(ds)
    n_plain = n if n_plain is None else n_plain
    ids = np.fromiter((int(i.rsplit(":", 1)[1]) for i in ds.id), np.int64, n)
    cls = np.fromiter(({"n": 0, "w": 1, "r": 3}[k] for k in ds.kind), np.int64, n)
    cls[n_plain:][cls[n_plain:] == 1] = 2
    return _keys(cls, ids)


def _np(a, dtype) -> np.ndarray:
    return np.frombuffer(a, dtype).copy() if len(a) else np.zeros(0, dtype)


def _take_csr(ends: np.ndarray, refs: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ends, values) of rows `rows` of a CSR (ends, values), in that order."""
    lens = (ends[1:] - ends[:-1])[rows]
    new_ends = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    idx = np.repeat(ends[:-1][rows] - new_ends[:-1], lens) + np.arange(int(new_ends[-1]))
    return new_ends, refs[idx]


def records_of(ds: DocSet, streets: StreetWays, boundaries: list[Boundary], h) -> dict:
    """The records of `read_osm`'s output (before the later phases change it)."""
    rec: dict = {"format": FORMAT}
    keys = doc_keys(ds, getattr(h, "n_plain", None))
    rec["doc.key"] = keys
    pack_columns(ds, row_columns(), rec, "doc.")
    pack_columns(streets, STREET_COLUMNS, rec, "street.")
    pack_columns(h.interpolations, INTERP_COLUMNS, rec, "interp.")
    rec["addr_node_id"] = _np(h.addr_node_id, np.int64)
    rec["pc.key"] = _keys(_np(h.pc_kind, np.int8), _np(h.pc_id, np.int64))
    rec["pc.xy"] = _np(h.pc_xy, np.float64)
    pack_columns(h, ["pc_code"], rec, "pc.")
    rec["box.key"] = keys[_np(h.box_row, np.int64)]
    rec["box"] = _np(h.box, np.float64)
    rec["shape.key"] = keys[_np(h.shape_row, np.int64)]
    rec["shape.closed"] = _np(h.shape_closed, np.int8)
    rec["shape.box"] = _np(h.shape_box, np.float64)
    rec["shape.len"] = _np(h.shape_len, np.float64)
    rec["labels"] = (np.fromiter(h.labels.keys(), np.int64, len(h.labels)),
                     np.fromiter(h.labels.values(), np.int64, len(h.labels)))
    rec["boundaries"] = [(b.name, b.admin_level, shapely.to_wkb(b.geom), b.country_code, b.osm_id, b.names, b.place,
                          b.postcode, int(keys[b.row]) if b.row >= 0 else -1, b.osm_type, b.country_hint)
                         for b in boundaries]
    rec["unassembled_ids"] = list(h.unassembled_ids)
    rec["wrec.id"] = np.unique(_np(h.wrec_id, np.int64))
    # the kept ways' files (osm.py's `_record_way`, `member_way`), each with the ids a later one replaced
    rec["ways"] = [(name, np.zeros(0, np.int64)) for name in h.kept_files]
    rec["rel.id"] = _np(h.rel_id, np.int64)
    rec["rel.ends"] = _np(h.rel_ends, np.int64)
    rec["rel.rec"] = _np(h.rel_rec, np.int8)
    rec["rel.mtype"], rec["rel.mref"] = _np(h.rel_mtype, np.int8), _np(h.rel_mref, np.int64)
    rec["rel.mrole"] = list(h.rel_mrole)
    rec["rel.tags"] = [h.rel_tags[k] for k in range(len(h.rel_id))]
    return rec


def pack_docs(rec: dict, ds: DocSet) -> None:
    """The documents of patched records, packed as `records_of` packs them (before the later phases)."""
    if "doc.id.len" not in rec:
        pack_columns(ds, row_columns(), rec, "doc.")


def save(folder: Path, rec: dict) -> str:
    with open(Path(folder) / FILE, "wb") as fh:
        pickle.dump(rec, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return FILE


def load(folder: Path) -> dict | None:
    path = Path(folder) / FILE
    if not path.exists():
        return None
    with open(path, "rb") as fh:
        rec = pickle.load(fh)
    return rec if isinstance(rec, dict) and rec.get("format") == FORMAT else None


class Reader:
    """What `build_documents` reads of `read_osm`'s handler, rebuilt from records."""


def _typed(code: str, values) -> array:
    out = array(code)
    out.frombytes(np.ascontiguousarray(values).tobytes())
    return out


def from_records(rec: dict) -> tuple[DocSet, StreetWays, list[Boundary], Reader]:
    """(documents, street ways, boundaries, reader) as `read_osm` returns them, from records (the documents
    of patched records are `rec["_docs"]`, a DocSet: taken, and packed again by `pack_docs`)."""
    ds = rec.pop("_docs") if "_docs" in rec else unpack_columns(DocSet(), row_columns(), rec, "doc.")
    streets = unpack_columns(StreetWays(), STREET_COLUMNS, rec, "street.")
    r = Reader()
    r.interpolations = unpack_columns(InterpolationWays(), INTERP_COLUMNS, rec, "interp.")
    keys = rec["doc.key"]

    def rows(k: np.ndarray) -> np.ndarray:
        return np.searchsorted(keys, k).astype(np.int64)

    r.addr_node_id = _typed("q", rec["addr_node_id"])
    r.addr_node_row = _typed("q", rows(rec["addr_node_id"]))  # (node keys: class 0)
    r.pc_xy = _typed("d", rec["pc.xy"])
    r.pc_code = unpack_columns(Reader(), ["pc_code"], rec, "pc.").pc_code
    r.box_row, r.box = _typed("q", rows(rec["box.key"])), _typed("d", rec["box"])
    r.shape_row = _typed("q", rows(rec["shape.key"]))
    r.shape_closed, r.shape_box, r.shape_len = (_typed("b", rec["shape.closed"]), _typed("d", rec["shape.box"]),
                                                _typed("d", rec["shape.len"]))
    r.labels = dict(zip(rec["labels"][0].tolist(), rec["labels"][1].tolist(), strict=True))
    r.unassembled = len(rec["unassembled_ids"])
    boundaries = []
    for name, level, wkb, cc, oid, names, place, postcode, key, otype, hint in rec["boundaries"]:
        row = int(np.searchsorted(keys, key)) if key >= 0 else -1
        boundaries.append(Boundary(name, level, shapely.from_wkb(wkb), cc, oid, names, place, postcode, row, otype, hint))
    return ds, streets, boundaries, r


# ---------------------------------------------------------------------------------------------- the update


def _file_refs(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, ends, refs) of the ways of an uncompressed PBF of ways (the kept ways), in file order."""
    from geoengine.bundler.pbfscan import _blobs, _fields  # (numba: only an update loads it here)
    from geoengine.bundler.pbfscan import group_way_refs as _group_way_refs

    parts = []
    for btype, data in _blobs(path):
        if btype != "OSMData":
            continue
        buf = np.frombuffer(data, np.uint8)
        for f, _w, v in _fields(data):
            if f != 2:
                continue
            g0, g1 = v
            cap = g1 - g0 + 1
            ids, ends, refs = np.empty(cap // 4 + 1, np.int64), np.zeros(cap // 4 + 2, np.int64), np.empty(cap, np.int64)
            nw, nr = _group_way_refs(buf, g0, g1, ids, ends, refs, 0, 0)
            if nw < 0:
                raise Declined(f"{path.name}: not a PBF this reader knows")
            parts.append((ids[:nw], ends[:nw + 1], refs[:nr]))
    if not parts:
        return np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64)
    shift = np.cumsum([0] + [len(r) for _, _, r in parts])
    ends = np.concatenate([[0]] + [e[1:] + shift[k] for k, (_, e, _) in enumerate(parts)])
    return np.concatenate([i for i, _, _ in parts]), ends.astype(np.int64), np.concatenate([r for _, _, r in parts])


def kept_refs(folder: Path, rec: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, ends, refs) of every kept way, sorted by id: a way of a later file replaces an earlier one's,
    each file's replaced ids left out."""
    ids, ends, refs, rank = [], [np.zeros(1, np.int64)], [], []
    at = 0
    for k, (name, excluded) in enumerate(rec["ways"]):
        i, e, r = _file_refs(Path(folder) / name)
        keep = np.flatnonzero(~np.isin(i, excluded))
        e2, r2 = _take_csr(e, r, keep)
        ids.append(i[keep])
        ends.append(e2[1:] + at)
        refs.append(r2)
        rank.append(np.full(len(keep), k))
        at += len(r2)
    ids = np.concatenate(ids) if ids else np.zeros(0, np.int64)
    ends = np.concatenate(ends)
    refs = np.concatenate(refs) if refs else np.zeros(0, np.int64)
    rank = np.concatenate(rank) if rank else np.zeros(0, np.int64)
    o = np.lexsort((-rank, ids))  # by id, the latest file first
    first = np.ones(len(o), bool)
    first[1:] = ids[o][1:] != ids[o][:-1]
    o = o[first]
    e, r = _take_csr(ends, refs, o)
    return ids[o], e, r


def kept_objects(folder: Path, rec: dict, wanted: set[int]) -> dict[int, tuple[dict, list[int]]]:
    """(tags, node refs) of the kept ways `wanted` (the latest file's)."""
    import osmium

    out = {}
    for name, excluded in rec["ways"]:
        skip = set(excluded.tolist())
        for w in osmium.FileProcessor(str(Path(folder) / name), osmium.osm.WAY):
            if w.id in wanted and w.id not in skip:
                out[w.id] = (dict(w.tags), [n.ref for n in w.nodes])
    return out


class Declined(Exception):
    """The records cannot be patched exactly for this change (the message says why)."""


def _ways_holding(ids: np.ndarray, ends: np.ndarray, refs: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """The ids of the ways (CSR) with a node in `nodes` (sorted)."""
    if not len(nodes) or not len(refs):
        return np.zeros(0, np.int64)
    pos = np.clip(np.searchsorted(nodes, refs), 0, len(nodes) - 1)
    hit = nodes[pos] == refs
    owner = np.repeat(np.arange(len(ids)), ends[1:] - ends[:-1])
    return np.unique(ids[owner[hit]])


def tracked(tags: dict) -> bool:
    """A relation the search read keeps (osm.py's `relation`: what the area assembler or the boundaries read)."""
    return tags.get("boundary") in ("administrative", "postal_code") or tags.get("type") in ("multipolygon", "boundary")


class Change:
    """The objects whose records a change can alter: `nodes` (changed), `ways` (changed, or holding a changed
    node), `rels` (tracked relations changed, or with a member way in `ways`), all sorted int64; and the
    members of each relation of `rels` after the change (`members`: id -> [(type, ref, role)]) and tags."""

    def __init__(self, rec: dict, osc, kept: tuple[np.ndarray, np.ndarray, np.ndarray]):
        self.nodes = np.asarray(osc.node_ids(), np.int64)
        ways = np.asarray(osc.way_ids(), np.int64)
        for t, ids in (("node", self.nodes), ("way", ways), ("relation", np.asarray(osc.relation_ids(), np.int64))):
            if len(ids) and ids[0] < 0:
                raise Declined(f"a negative {t} id")
        self.ways = np.union1d(ways, _ways_holding(*kept, self.nodes))
        rid, ends, mtype, mref = rec["rel.id"], rec["rel.ends"], rec["rel.mtype"], rec["rel.mref"]
        owner = np.repeat(np.arange(len(rid)), ends[1:] - ends[:-1])
        hit = (mtype == 1) & np.isin(mref, self.ways)
        rels = set(rid[owner[hit]].tolist())
        kept = set(rid.tolist())
        for r, o in osc.relations.items():
            if r in kept or tracked(o.tags):
                rels.add(r)
        self.rels = np.asarray(sorted(rels), np.int64)
        self.old_rel = {int(r): k for r, k in zip(rid.tolist(), range(len(rid)), strict=True) if r in rels}
        self.members: dict[int, list] = {}
        self.tags: dict[int, dict] = {}
        for r in self.rels.tolist():
            o = osc.relations.get(r)
            if o is not None:
                if not o.deleted and tracked(o.tags):
                    self.members[r], self.tags[r] = list(o.members), o.tags
                continue
            k = self.old_rel[r]
            a, b = ends[k], ends[k + 1]
            self.members[r] = [("nwr"[t], ref, role) for t, ref, role in
                               zip(mtype[a:b].tolist(), mref[a:b].tolist(), rec["rel.mrole"][a:b], strict=True)]
            self.tags[r] = json.loads(rec["rel.tags"][k])
        # the relations' member ways (after the change) and before it: their records of membership (mw) change
        self.member_ways = np.unique(np.asarray([ref for m in self.members.values() for t, ref, _ in m if t == "w"],
                                                np.int64))
        # the member ways of those that may make a record (their node refs must be known)
        self.record_member_ways = {ref for r, m in self.members.items() if makes_records(self.tags[r])
                                   for t, ref, _ in m if t == "w"}
        old_members = [mref[ends[k]:ends[k + 1]][mtype[ends[k]:ends[k + 1]] == 1] for k in self.old_rel.values()]
        self.old_member_ways = np.unique(np.concatenate(old_members)) if old_members else np.zeros(0, np.int64)


_OPL_SAFE = re.compile(r"[^A-Za-z0-9_.:;/\-]")


def _opl(text: str) -> str:
    """`text` escaped for OPL (osmium's text format): every character but letters, digits and `_.:;/-` as
    %<hex code point>%."""
    return _OPL_SAFE.sub(lambda m: f"%{ord(m.group()):x}%", text)


def _opl_tags(tags) -> str:
    return ",".join(f"{_opl(k)}={_opl(v)}" for k, v in tags.items())


def _fixed(c: int | None, deg: float) -> int:
    return int(c) if c is not None else round(deg * 1e7)


def kept_tags(folder: Path, rec: dict, wanted: set[int]) -> dict[int, dict]:
    """The tags of the kept ways `wanted` (the latest file's), read by search/pbfways.py's compiled walk of
    the files (only the wanted ways reach Python)."""
    from geoengine.search.pbfways import way_tags

    want = np.asarray(sorted(wanted), np.int64)
    out = {}
    for name, excluded in rec["ways"]:
        try:
            out.update(way_tags(Path(folder) / name, np.setdiff1d(want, excluded)))
        except ValueError as exc:
            raise Declined(str(exc)) from None
    return out


def _mini_extract(path: Path, rec: dict, osc, ch: Change, locations, folder: Path,
                  kept: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    """The affected objects as an OSM file (OPL text, which osmium reads in C++: a Python object per node
    written cost 0.3 s at 16 copies): the changed nodes (tags, location), the affected ways and the member
    ways of the affected relations (the change's, else the kept ones: refs from `kept`, kept_refs' arrays)
    with the nodes they hold (locations of the new extract), the affected relations (the change's, else the
    kept ones)."""
    kept_ids, kept_ends, kept_refs_ = kept
    rflag = np.repeat(rec["rel.rec"], rec["rel.ends"][1:] - rec["rel.ends"][:-1]).astype(bool)
    known_members = set(rec["rel.mref"][(rec["rel.mtype"] == 1) & rflag].tolist())
    wanted = np.union1d(ch.ways, ch.member_ways)
    from_osc = np.asarray([w for w in wanted.tolist() if w in osc.ways], np.int64)
    rest = np.setdiff1d(wanted, from_osc)
    pos = np.clip(np.searchsorted(kept_ids, rest), 0, max(len(kept_ids) - 1, 0))
    have = (kept_ids[pos] == rest) if len(kept_ids) else np.zeros(len(rest), bool)
    if not have.all():
        lost = rest[~have]
        bad = [w for w in lost.tolist() if w in ch.record_member_ways and w not in known_members]
        if bad:  # the full run kept nothing of it
            raise Declined(f"way {bad[0]}, new in a multipolygon or boundary, is not kept")
        # (else a member missing from the extract, as in the full run, or of a relation that makes no record:
        # left out, that relation is read only for its membership, which its members' own areas depend on)
    rows = pos[have]
    rest = rest[have]
    r_ends, r_refs = _take_csr(kept_ends, kept_refs_, rows)
    tags = kept_tags(folder, rec, set(rest.tolist()))
    out_ways: dict[int, tuple[dict, object]] = {}
    for k, w in enumerate(rest.tolist()):
        out_ways[w] = (tags[w], r_refs[r_ends[k]:r_ends[k + 1]])
    for w in from_osc.tolist():
        o = osc.ways[w]
        if not o.deleted:
            out_ways[w] = (o.tags, list(o.refs))
    osc_refs = [r for w in from_osc.tolist() if w in out_ways for r in out_ways[w][1]]
    need = np.union1d(r_refs, np.asarray(osc_refs, np.int64))
    lon, lat, found = locations(need) if len(need) else (np.zeros(0), np.zeros(0), np.zeros(0, bool))
    # the changed nodes: their own tags and location (a deleted one, or one without a location, left out)
    changed = {}
    gone = []
    for n in ch.nodes.tolist():
        o = osc.nodes[n]
        if o.deleted or o.lon is None:
            gone.append(n)
        else:
            changed[n] = o
    ids = np.union1d(need[found], np.asarray(list(changed), np.int64))
    ids = ids[~np.isin(ids, np.asarray(gone, np.int64))]
    k = np.clip(np.searchsorted(need, ids), 0, max(len(need) - 1, 0))
    xs = np.round(lon[k] * 1e7).astype(np.int64) if len(need) else np.zeros(len(ids), np.int64)
    ys = np.round(lat[k] * 1e7).astype(np.int64) if len(need) else np.zeros(len(ids), np.int64)
    tagged = {}
    for n, o in changed.items():  # the changed nodes: their own tags and location
        i = int(np.searchsorted(ids, n))
        xs[i], ys[i] = _fixed(o.x, o.lon), _fixed(o.y, o.lat)
        tagged[i] = _opl_tags(o.tags)
    ways = sorted(out_ways)
    refs = [np.asarray(out_ways[w][1], np.int64) for w in ways]
    ends = np.zeros(len(ways) + 1, np.int64)
    np.cumsum([len(r) for r in refs], out=ends[1:])
    ref_text = opl.ref_lists(np.concatenate(refs) if refs else np.zeros(0, np.int64), ends)
    lines = [f"w{w} v1 T{_opl_tags(out_ways[w][0])} N{t}" for w, t in zip(ways, ref_text, strict=True)]
    for r in sorted(ch.members):
        members = ",".join(f"{t}{ref}@{_opl(role)}" for t, ref, role in ch.members[r])
        lines.append(f"r{r} v1 T{_opl_tags(ch.tags[r])} M{members}")
    path.unlink(missing_ok=True)
    with open(path, "wb") as fh:
        fh.write(opl.node_lines(ids, xs, ys, tagged))
        fh.write(("\n".join(lines) + "\n").encode("utf-8") if lines else b"")


def _merge_table(old_keys: np.ndarray, new_keys: np.ndarray, drop: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(old rows kept, new rows added, the order of old kept + new added that sorts them by key): old rows
    whose key is in `drop` go, new rows whose key is in `drop` come."""
    keep = np.flatnonzero(~np.isin(old_keys, drop))
    add = np.flatnonzero(np.isin(new_keys, drop))
    order = np.argsort(np.concatenate([old_keys[keep], new_keys[add]]), kind="stable")
    return keep, add, order


def _concat_rows(a, b, ka: np.ndarray, kb: np.ndarray, order: np.ndarray, kind: str):
    """Rows `ka` of column a, then `kb` of b, in `order`."""
    if kind == "array":
        both = np.concatenate([np.asarray(a)[ka], np.asarray(b)[kb]])
        return both[order]
    both = [a[i] for i in ka.tolist()] + [b[i] for i in kb.tolist()]
    return [both[i] for i in order.tolist()]


_DTYPES = {"q": np.int64, "d": np.float64, "b": np.int8, "B": np.uint8, "i": np.int32, "l": np.int64, "f": np.float32}


def _array_col(packed: dict, key: str) -> np.ndarray:
    """An array("q"/"d"/...) column of `pack_columns`' output as numpy (a view of its bytes)."""
    code, raw = packed[key + ".array"]
    return np.frombuffer(raw, _DTYPES[code])


def _gather(values: np.ndarray, lens: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The values of rows `rows` of ragged rows of `lens` values each (consecutive in `values`), in that order."""
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64) if len(lens) else np.zeros(0, np.int64)
    n = lens[rows]
    out_starts = np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64) if len(n) else np.zeros(0, np.int64)
    idx = np.repeat(starts[rows] - out_starts, n) + np.arange(int(n.sum()), dtype=np.int64)
    return values[idx]


def _take_strings(a: dict, b: dict, key: str, rows: np.ndarray, out: dict) -> None:
    """Rows `rows` of the strings `key` (`_pack_strings`: lengths in characters, -1 None, and one UTF-8 text)
    of a then b, packed as `_pack_strings` packs them: the values' bytes gathered as they are (a value's
    characters start at the bytes that are not UTF-8 continuation bytes; no decoding)."""
    lens = np.concatenate([a[key + ".len"], b[key + ".len"]])
    text = a[key + ".text"] + b[key + ".text"]
    raw = np.frombuffer(text, np.uint8)
    char_at = np.flatnonzero((raw & 0xC0) != 0x80)  # the byte offset of every character
    char_at = np.concatenate([char_at, [len(raw)]]).astype(np.int64)
    n = np.maximum(lens, 0)
    first = np.concatenate([[0], np.cumsum(n)]).astype(np.int64)  # each value's first character, and the end
    nbytes = char_at[first[1:]] - char_at[first[:-1]]
    out[key + ".len"] = lens[rows]
    out[key + ".text"] = _gather(raw, nbytes, rows).tobytes()


def _take_packed(a: dict, b: dict, prefix: str, names: list[str], rows: np.ndarray, out: dict) -> None:
    """Rows `rows` (of a's rows then b's) of the one-value-a-row columns `names` of two `pack_columns`
    outputs, into `out` as `pack_columns` would pack those rows' values (a TextColumn's bytes compact, in row
    order, as `take_docs` leaves them)."""
    rows = np.asarray(rows, np.int64)
    for name in names:
        key = prefix + name
        if key + ".array" in a:
            code = a[key + ".array"][0]
            out[key + ".array"] = (code, np.concatenate([_array_col(a, key), _array_col(b, key)])[rows].tobytes())
        elif key + ".textcol" in a:
            (ba, sa, ta), (bb, sb, tb) = a[key + ".textcol"], b[key + ".textcol"]
            start = np.concatenate([np.frombuffer(sa, np.int64), np.frombuffer(sb, np.int64)])
            stop = np.concatenate([np.frombuffer(ta, np.int64), np.frombuffer(tb, np.int64)])
            shift = np.concatenate([np.zeros(len(sa) // 8, np.int64), np.full(len(sb) // 8, len(ba), np.int64)])
            start, stop = start[rows], stop[rows]
            none = start < 0
            lens = np.where(none, 0, stop - start)
            buf = np.frombuffer(ba + bb, np.uint8)
            offs = np.where(none, 0, start + shift[rows])
            n = len(rows)
            out_start = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64) if n else np.zeros(0, np.int64)
            idx = np.repeat(offs - out_start, lens) + np.arange(int(lens.sum()), dtype=np.int64)
            new_start = np.where(none, -1, out_start)
            new_stop = np.where(none, -1, out_start + lens)
            out[key + ".textcol"] = (buf[idx].tobytes(), new_start.tobytes(), new_stop.tobytes())
        elif key + ".count" in a:
            counts = np.concatenate([a[key + ".count"], b[key + ".count"]])
            flat = np.maximum(counts, 0)
            n_flat_a = int(np.maximum(a[key + ".count"], 0).sum())
            flat_rows = _gather(np.arange(len(a[key + ".len"]) + len(b[key + ".len"]), dtype=np.int64), flat, rows)
            assert n_flat_a == len(a[key + ".len"])
            _take_strings(a, b, key, flat_rows, out)
            out[key + ".count"] = counts[rows]
        elif key + ".bool" in a:
            out[key + ".bool"] = np.concatenate([a[key + ".bool"], b[key + ".bool"]])[rows]
        else:
            _take_strings(a, b, key, rows, out)



def patch_read(rec: dict, osc, locations, work: Path, folder: Path) -> dict:
    """The records of the new extract: `rec`'s (of the stage folder `folder`), the affected objects' read
    again in `work`. `out["_files"]`: (path, name) of the kept ways' file to place in the new stage folder
    beside the old ones (`link_kept`). Raises Declined."""
    from geoengine.search.osm import read_osm

    kept = kept_refs(folder, rec)
    ch = Change(rec, osc, kept)
    nodes, ways, rels = ch.nodes, ch.ways, ch.rels
    mini = Path(work) / "search-patch.opl"
    _mini_extract(mini, rec, osc, ch, locations, folder, kept)
    del kept
    ds, streets, boundaries, h = read_osm(mini, processes=1, keep_ways=str(Path(work) / "ways"))
    new = records_of(ds, streets, boundaries, h)
    del streets, boundaries, h
    drop_docs = np.concatenate([_keys(np.zeros(len(nodes)), nodes), _keys(np.ones(len(ways)), ways),
                                _keys(np.full(len(ways), 2), ways), _keys(np.full(len(rels), 3), rels)])
    drop_docs.sort()
    out: dict = {"format": FORMAT}
    # documents, street ways, interpolation ways (by way id): merged in their packed form (numpy gathers over
    # the columns' bytes: no Python object per document or way)
    keep, add, order = _merge_table(rec["doc.key"], new["doc.key"], drop_docs)
    rows = np.concatenate([keep, add + len(rec["doc.key"])])[order]
    _take_packed(rec, new, "doc.", row_columns(), rows, out)
    out["doc.key"] = np.concatenate([rec["doc.key"], new["doc.key"]])[rows]
    for prefix, cols, csr in (("street.", STREET_COLUMNS, ("xy",)), ("interp.", INTERP_COLUMNS, ("xy", "node_id"))):
        ka, kb = _array_col(rec, prefix + "id"), _array_col(new, prefix + "id")
        keep, add, order = _merge_table(ka, kb, ways)
        rows = np.concatenate([keep, add + len(ka)])[order]
        _take_packed(rec, new, prefix, [c for c in cols if c not in ("ends", *csr)], rows, out)
        # vertices (xy pairs, ends in vertices for streets, in nodes for interpolations; node_id alongside)
        ea, eb = _array_col(rec, prefix + "ends"), _array_col(new, prefix + "ends")
        ends = np.concatenate([ea, eb[1:] + ea[-1]])
        for c in csr:
            va, vb = _array_col(rec, prefix + c), _array_col(new, prefix + c)
            width = 2 if c == "xy" else 1
            e, v = _take_csr(ends, np.concatenate([va, vb]).reshape(-1, width), rows)
            out[prefix + c + ".array"] = (rec[prefix + c + ".array"][0], v.tobytes())
        out[prefix + "ends.array"] = ("q", e.astype(np.int64).tobytes())
    # address nodes, postcode samples, boxes, shapes
    keep, add, order = _merge_table(rec["addr_node_id"], new["addr_node_id"], nodes)
    out["addr_node_id"] = np.concatenate([rec["addr_node_id"][keep], new["addr_node_id"][add]])[order]
    drop_pc = np.union1d(_keys(np.zeros(len(nodes)), nodes), _keys(np.ones(len(ways)), ways))
    keep, add, order = _merge_table(rec["pc.key"], new["pc.key"], drop_pc)
    out["pc.key"] = np.concatenate([rec["pc.key"][keep], new["pc.key"][add]])[order]
    out["pc.xy"] = np.concatenate([rec["pc.xy"].reshape(-1, 2)[keep], new["pc.xy"].reshape(-1, 2)[add]])[order].ravel()
    codes = (unpack_columns(Reader(), ["pc_code"], rec, "pc.").pc_code, unpack_columns(Reader(), ["pc_code"], new, "pc.").pc_code)
    pack_columns(type("C", (), {"pc_code": _concat_rows(*codes, keep, add, order, "list")})(), ["pc_code"], out, "pc.")
    keep, add, order = _merge_table(rec["box.key"], new["box.key"], drop_docs)
    out["box.key"] = np.concatenate([rec["box.key"][keep], new["box.key"][add]])[order]
    out["box"] = np.concatenate([rec["box"].reshape(-1, 4)[keep], new["box"].reshape(-1, 4)[add]])[order].ravel()
    # shapes are in document order (finish_areas): by their document's key
    keep, add, order = _merge_table(rec["shape.key"], new["shape.key"], drop_docs)
    out["shape.key"] = np.concatenate([rec["shape.key"][keep], new["shape.key"][add]])[order]
    out["shape.closed"] = np.concatenate([rec["shape.closed"][keep], new["shape.closed"][add]])[order]
    out["shape.box"] = np.concatenate([rec["shape.box"].reshape(-1, 4)[keep], new["shape.box"].reshape(-1, 4)[add]])[order].ravel()
    out["shape.len"] = np.concatenate([rec["shape.len"][keep], new["shape.len"][add]])[order]
    # boundaries (of closed ways and relations), labels, relations, the boundaries built from members
    bkey = [_keys(np.asarray([2 if b[9] == "w" else 3 for b in r["boundaries"]], np.int64),
                  np.asarray([b[4] for b in r["boundaries"]], np.int64)) for r in (rec, new)]
    keep, add, order = _merge_table(bkey[0], bkey[1], drop_docs)
    out["boundaries"] = _concat_rows(rec["boundaries"], new["boundaries"], keep, add, order, "list")
    keep, add, order = _merge_table(rec["labels"][0], new["labels"][0], rels)
    out["labels"] = tuple(np.concatenate([rec["labels"][i][keep], new["labels"][i][add]])[order] for i in (0, 1))
    ua, ub = (np.asarray(r["unassembled_ids"], np.int64) for r in (rec, new))
    keep, add, order = _merge_table(ua, ub, rels)
    out["unassembled_ids"] = np.concatenate([ua[keep], ub[add]])[order].tolist()
    keep, add, order = _merge_table(rec["rel.id"], new["rel.id"], rels)
    out["rel.id"] = np.concatenate([rec["rel.id"][keep], new["rel.id"][add]])[order]
    for col in ("mtype", "mref"):
        e1, v1 = _take_csr(rec["rel.ends"], rec["rel." + col], keep)
        e2, v2 = _take_csr(new["rel.ends"], new["rel." + col], add)
        out["rel.ends"], out["rel." + col] = _take_csr(np.concatenate([e1, e2[1:] + e1[-1]]), np.concatenate([v1, v2]),
                                                       order)
    roles = [rec["rel.mrole"][rec["rel.ends"][k]:rec["rel.ends"][k + 1]] for k in keep.tolist()] + [
        new["rel.mrole"][new["rel.ends"][k]:new["rel.ends"][k + 1]] for k in add.tolist()]
    out["rel.mrole"] = [x for i in order.tolist() for x in roles[i]]
    out["rel.tags"] = _concat_rows(rec["rel.tags"], new["rel.tags"], keep, add, order, "list")
    out["rel.rec"] = np.concatenate([rec["rel.rec"][keep], new["rel.rec"][add]])[order]
    # the ways that make a record; the kept ways: the old files less what the mini read replaces or the full
    # run would no longer keep, then the mini read's file (less what the full run would not keep)
    keep, add, order = _merge_table(rec["wrec.id"], new["wrec.id"], ways)
    out["wrec.id"] = np.concatenate([rec["wrec.id"][keep], new["wrec.id"][add]])[order]
    rflag = np.repeat(out["rel.rec"], out["rel.ends"][1:] - out["rel.ends"][:-1]).astype(bool)
    members = np.unique(out["rel.mref"][(out["rel.mtype"] == 1) & rflag])
    mini_ids = kept_refs(work, new)[0]
    redo = np.union1d(np.union1d(ways, ch.member_ways), ch.old_member_ways)
    gone = redo[~np.isin(redo, out["wrec.id"]) & ~np.isin(redo, members)]
    drop = np.union1d(np.union1d(ways, mini_ids), gone)
    out["ways"] = [(name, np.union1d(excl, drop)) for name, excl in rec["ways"]]
    name = f"ways-u{len(out['ways'])}.osm.pbf"
    out["ways"].append((name, mini_ids[~np.isin(mini_ids, out["wrec.id"]) & ~np.isin(mini_ids, members)]))
    out["_files"] = [(Path(work) / n, name) for n, _ in new["ways"]]  # (one file: the mini read's single process)
    return out


def link_kept(rec: dict, old: Path, new_files: list, out: Path) -> list[str]:
    """Place the kept ways' files of patched records in the stage folder `out`: the old ones (hard links to
    the old bundle's, a bundle's files never change) and the patch's own; returns their names."""
    import os
    import shutil

    names = []
    fresh = {name: src for src, name in new_files}
    for name, _ in rec["ways"]:
        src = fresh.get(name, Path(old) / name)
        dst = Path(out) / name
        try:
            os.link(src, dst)
        except OSError:
            shutil.copyfile(src, dst)
        names.append(name)
    return names


def temp_dir() -> str:
    return tempfile.mkdtemp(prefix="geoengine-search-patch-")
