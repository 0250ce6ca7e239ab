"""The tile stage's patch from its kept collection (geoengine.tiles.kept) and the change alone: no pass
over either extract (docs/tiles.md, "Updates: the stage's patch").

1. **The affected objects**, from the kept arrays and `PatchInputs.osc`: every changed node; every changed
   way and every kept way holding a changed node (the kept node refs, one binary search each); every area or
   boundary relation (kept, or in the change) that changed, or holds an affected way or a changed node;
   the member ways of a changed boundary relation (their boundary level).
2. **Their new features**, made by the collection's own code (`spool._collect_stream`, both streams: the
   same classification, geometry, clipping and repair) from a small extract written of those objects in
   their new state: node locations from `PatchInputs.locations`, tags from the change or, for an unchanged
   way, the tag sets the collectors read of it in the full run (kept per way), the relations that hold
   the ways (membership and boundary levels), every member way of a relation whose area is made again.
   Only the features of the affected objects are taken.
3. **Their place in collection order**: a feature's seq orders it (spool.SEQ_GAP leaves room between two):
   the points-and-lines stream is nodes then ways by id; the areas stream is osmium's order, a closed way's
   area at its way, a relation's at its last member way present (before that way's own area; checked on
   the 16-copy extract). The new features of an object go between the seqs of the kept features around
   that key; two relations completing at one way (osmium's order of them is not kept) decline.
4. **The new kept collection**: the index, low and shared records less the affected objects' features
   plus the new ones; the partition files those features reach written again, every other one
   hard-linked from the old bundle; the ways, tag sets and relations updated from the change.

The caller (`stage.patch`) then plans, cuts the touched tiles and copies the others as before.
"""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path
from types import SimpleNamespace

import numba
import numpy as np
import osmium
import shapely

from geoengine.bundler.pipeline import link_file
from geoengine.search.opl import node_lines
from geoengine.tiles import kept as K
from geoengine.tiles import schema
from geoengine.tiles import spool as S
from geoengine.tiles import tiler as T
from geoengine.tiles.features import OBJ_NODE, OBJ_OTHER, OBJ_RELATION, OBJ_WAY, lonlat_to_merc

_EARTH = schema.LAYERS.index("earth")


class Decline(Exception):
    """The patch cannot make the full run's collection exactly (the message says why)."""


@numba.njit(cache=True, nogil=True)
def _hits(a, table, mask):
    """Indices i with a[i] in the open-addressing hash table `table` (slots mask + 1, -1 empty)."""
    out = np.empty(len(a), np.int64)
    n = 0
    for i in range(len(a)):
        v = a[i]
        h = (v * np.int64(-7046029254386353131)) >> 17 & mask
        while True:
            t = table[h]
            if t == v:
                out[n] = i
                n += 1
                break
            if t == -1:
                break
            h = (h + 1) & mask
    return out[:n]


@numba.njit(cache=True, nogil=True)
def _table(b, mask):
    table = np.full(mask + 1, -1, np.int64)
    for v in b:
        h = (v * np.int64(-7046029254386353131)) >> 17 & mask
        while table[h] != -1 and table[h] != v:
            h = (h + 1) & mask
        table[h] = v
    return table


def _where_in(a, b) -> np.ndarray:
    """np.flatnonzero(np.isin(a, b)) for ids a (int64, as large as the region) and b (few, >= 0): one hash
    lookup each, in a Numba kernel."""
    b = np.asarray(b, dtype=np.int64)
    if len(b) == 0 or len(a) == 0:
        return np.zeros(0, np.int64)
    if b.min() < 0:
        return np.flatnonzero(_isin(a, b))
    mask = (1 << max(int(len(b) * 2).bit_length() + 1, 4)) - 1
    return _hits(np.asarray(a, dtype=np.int64), _table(b, mask), mask)


def _isin(a, b) -> np.ndarray:
    """np.isin(a, b) by a binary search of each of a in b sorted (b small, a as large as the region: no
    sort of a)."""
    a = np.asarray(a)
    b = np.unique(np.asarray(b, dtype=a.dtype if a.dtype.kind == "i" else np.int64))
    if len(b) == 0 or len(a) == 0:
        return np.zeros(len(a), dtype=bool)
    k = np.searchsorted(b, a)
    k[k == len(b)] = 0
    return b[k] == a


def _area_relation(tags: dict) -> bool:
    """Does osmium's area handler take this relation (features.boundary_relations keeps these)?"""
    return tags.get("type") in ("multipolygon", "boundary")


def _kept_relation(tags: dict) -> bool:
    return _area_relation(tags) or tags.get("boundary") == "administrative"


_MTYPE = {"n": 0, "w": 1, "r": 2}


class Members:
    """Relations' members as arrays: `rids` (sorted), per member its relation's place in `rids` (`rel`),
    type (0 node, 1 way, 2 relation), ref and place among the relation's members; `area` per relation."""

    def __init__(self, rels: dict, ids=None):
        self.rids = np.asarray(sorted(rels if ids is None else (r for r in ids if r in rels)), dtype=np.int64)
        rows = [(j, _MTYPE.get(m[0], 3), m[1], pos) for j, r in enumerate(self.rids.tolist())
                for pos, m in enumerate(rels[r][1])]
        a = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
        self.rel, self.typ, self.ref, self.pos = a[:, 0], a[:, 1], a[:, 2], a[:, 3]
        self.area = np.asarray([_area_relation(rels[r][0]) for r in self.rids.tolist()], dtype=bool)

    def holding(self, typ: int, ids) -> np.ndarray:
        """The places in `rids` of the relations with a member of type `typ` among `ids`."""
        sel = self.typ == typ
        return np.unique(self.rel[sel][_isin(self.ref[sel], np.asarray(sorted(ids), dtype=np.int64))])


class Old:
    """The old bundle's kept collection."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.meta = K.load_pickle(folder / "meta.pkl")
        if self.meta.get("format") != K.FORMAT:
            raise Decline(f"the old collection is of format {self.meta.get('format')}")
        self.index = np.load(folder / "index.npy", mmap_mode="r")
        self.wid, self.off, self.refs, self.flags = K.load_ways(folder / "ways")
        self.tags = K.load_pickle(folder / "tags.pkl")
        self.relations = {r[0]: (r[1], r[2]) for r in K.load_pickle(folder / "relations.pkl")}
        self._members = None

    @property
    def members(self) -> Members:
        if self._members is None:
            self._members = Members(self.relations)
        return self._members

    def way_refs(self, i: int) -> list[int] | None:
        k = np.searchsorted(self.wid, i)
        if k < len(self.wid) and self.wid[k] == i:
            return self.refs[self.off[k]:self.off[k + 1]].tolist()
        return None

    def has_way(self, ids: np.ndarray) -> np.ndarray:
        k = np.minimum(np.searchsorted(self.wid, ids), max(len(self.wid) - 1, 0))
        return (self.wid[k] == ids) if len(self.wid) else np.zeros(len(ids), dtype=bool)

    def way_tags(self, ids) -> dict[int, dict]:
        """The tags the collectors read of these ways in the full run (both streams' sets, merged)."""
        out: dict[int, dict] = {}
        want = np.asarray(sorted(ids), dtype=np.int64)
        for k in sorted(self.tags):
            wids, tids, sets = self.tags[k]
            hit = np.flatnonzero(_isin(wids, want))
            for i, t in zip(wids[hit].tolist(), tids[hit].tolist(), strict=True):
                out.setdefault(i, {}).update(dict(sets[t]))
        return out


def _completing_way(members, present) -> tuple[int, int]:
    """The last member way present in the extract (osmium completes the relation there; -1: none) and its
    last place among the relation's members (relations completing at one way come in that order)."""
    ws = [m[1] for m in members if m[0] == "w" and m[1] in present]
    if not ws:
        return -1, 0
    w = max(ws)
    return w, max(i for i, m in enumerate(members) if m[0] == "w" and m[1] == w)


def _completing(mem: Members, ids: np.ndarray, old: Old, gone: np.ndarray, born: np.ndarray):
    """`_completing_way` of the relations `ids` (sorted; one absent from `mem` has none), over arrays: the
    ways present in the new extract are the old collection's less `gone` plus `born` (sorted). Returns
    (ids, way (-1: none), place)."""
    at = np.searchsorted(mem.rids, ids)
    inside = at < len(mem.rids)
    inside[inside] = mem.rids[at[inside]] == ids[inside]
    j_of = np.full(len(mem.rids), -1, dtype=np.int64)  # a relation's place in ids
    j_of[at[inside]] = np.flatnonzero(inside)
    sel = (mem.typ == 1) & (j_of[mem.rel] >= 0) if len(mem.rids) else np.zeros(0, bool)
    pairs = np.column_stack([j_of[mem.rel[sel]], mem.pos[sel], mem.ref[sel]]) if len(mem.rids) else []
    w = np.full(len(ids), -1, dtype=np.int64)
    place = np.zeros(len(ids), dtype=np.int64)
    if len(pairs):
        a = np.asarray(pairs, dtype=np.int64).reshape(-1, 3)
        ref = a[:, 2]
        ok = old.has_way(ref)
        if len(gone):
            ok &= ~_isin(ref, gone)
        if len(born):
            ok |= _isin(ref, born)
        a = a[ok]
        if len(a):
            # per relation the largest way id, at its last place: the last row of (relation, ref, place)
            a = a[np.lexsort((a[:, 1], a[:, 2], a[:, 0]))]
            last = np.r_[a[1:, 0] != a[:-1, 0], True]
            w[a[last, 0]] = a[last, 2]
            place[a[last, 0]] = a[last, 1]
    return ids, w, place


@numba.njit(cache=True, nogil=True)
def _merge_ways(wid, off, refs, uid, uoff, urefs, live):
    """The kept ways (sorted ids, CSR offsets, refs) after the change's ways `uid` (sorted; refs in CSR
    form, `live` False where deleted): one merge of the two sorted lists, the change's way taking an old
    one's place."""
    n_w = len(wid) + len(uid)
    n_r = len(refs) + len(urefs)
    nid = np.empty(n_w, np.int64)
    noff = np.zeros(n_w + 1, np.int64)
    nref = np.empty(n_r, np.int64)
    i = 0
    j = 0
    w = 0
    r = 0
    while i < len(wid) or j < len(uid):
        if j >= len(uid) or (i < len(wid) and wid[i] < uid[j]):
            a, b = off[i], off[i + 1]
            nref[r:r + b - a] = refs[a:b]
            nid[w] = wid[i]
            r += b - a
            w += 1
            noff[w] = r
            i += 1
            continue
        if i < len(wid) and wid[i] == uid[j]:
            i += 1
        if live[j]:
            a, b = uoff[j], uoff[j + 1]
            nref[r:r + b - a] = urefs[a:b]
            nid[w] = uid[j]
            r += b - a
            w += 1
            noff[w] = r
        j += 1
    return nid[:w], noff[:w + 1], nref[:r]


def _write_small(path: Path, tmp: Path, nid, lon, lat, found, osc, way_rows: dict, tags_w: dict, hold: dict) -> None:
    """The small extract as OPL: the untagged nodes' lines made by search.opl.node_lines (osmium's
    fixed-point coordinates from lon/lat = x / 1e7, exactly), the change's nodes, the ways and the
    relations written by osmium."""
    nid = nid[found]
    xs = np.rint(lon[found] * 1e7).astype(np.int64)
    ys = np.rint(lat[found] * 1e7).astype(np.int64)
    tmp.unlink(missing_ok=True)
    written = 0
    with osmium.SimpleWriter(str(tmp)) as wr:
        chg = _where_in(nid, np.fromiter(osc.nodes, dtype=np.int64, count=len(osc.nodes)))
        for i, x, y in zip(nid[chg].tolist(), xs[chg].tolist(), ys[chg].tolist(), strict=True):
            wr.add_node(osmium.osm.mutable.Node(id=i, location=(x / 1e7, y / 1e7), tags=osc.nodes[i].tags, version=1))
            written += 1
        for w in sorted(way_rows):
            o = osc.ways.get(w)
            wr.add_way(osmium.osm.mutable.Way(id=w, nodes=way_rows[w], tags=o.tags if o is not None else
                                              tags_w.get(w, {}), version=1))
        for rid in sorted(hold):
            tags, members = hold[rid]
            wr.add_relation(osmium.osm.mutable.Relation(id=rid, members=members, tags=tags, version=1))
    text = tmp.read_bytes()
    tmp.unlink()
    lines = text.split(b"\n")
    mine = {int(ln[1:ln.index(b" ")]): ln for ln in lines[:written]}  # (osmium writes them first)
    rest = b"\n".join(lines[written:])

    lines = node_lines(nid, xs, ys, {}).split(b"\n")  # (search.opl: a compiled loop)
    for k in chg.tolist():
        lines[k] = mine[int(nid[k])]
    with open(path, "wb") as fh:
        fh.write(b"\n".join(lines))
        fh.write(rest)


def build(ctx_bbox, p, old: Old, work: Path, maxzoom: int = T.MAXZOOM, pz: int = S.PARTITION_ZOOM):
    """`_build` with the cyclic garbage collector off (spool.gc_paused: the partitions' records are
    hundreds of thousands of tuples, none in a cycle)."""
    with S.gc_paused():
        return _build(ctx_bbox, p, old, work, maxzoom, pz)


def _build(ctx_bbox, p, old: Old, work: Path, maxzoom: int = T.MAXZOOM, pz: int = S.PARTITION_ZOOM):
    """The new kept collection in `work` (a folder in the new bundle's stage folder) and what the cut needs:
    a SimpleNamespace spool (folder, shared, low with geometries, low_bounds, all_bounds, pz, maxzoom,
    counts) and the old and new features of the affected objects (for `patch.touched_by_features`)."""
    osc = p.osc
    ch_n = osc.node_ids()
    ch_w = osc.way_ids()
    # 1. the affected objects
    hit = _where_in(old.refs, ch_n)
    holders = np.unique(old.wid[np.searchsorted(old.off, hit, side="right") - 1]) if len(hit) else np.zeros(0, np.int64)
    aff_w = np.union1d(holders, ch_w)
    # relations: the new state of the kept ones
    rels_new = dict(old.relations)
    for rid, o in osc.relations.items():
        rels_new.pop(rid, None)
        if not o.deleted and _kept_relation(o.tags):
            rels_new[rid] = (o.tags, o.members)
    aff_w_set = set(aff_w.tolist())
    ch_n_set = set(ch_n.tolist())
    changed_rels = set(osc.relations)
    # the area relations holding an affected way or a changed node (the unchanged ones are the same in
    # both states), and every changed one that is an area relation before or after
    om = old.members
    hit = np.union1d(om.holding(1, aff_w_set), om.holding(0, ch_n_set))
    aff_r: set[int] = set(om.rids[hit[om.area[hit]]].tolist())
    for rid in changed_rels:
        if any(rid in state and _area_relation(state[rid][0]) for state in (old.relations, rels_new)):
            aff_r.add(rid)
    # a changed boundary relation: its member ways (old and new) take another level
    relevel: set[int] = set()
    for rid in changed_rels:
        for state in (old.relations, rels_new):
            if rid in state and state[rid][0].get("boundary") == "administrative":
                relevel.update(m[1] for m in state[rid][1] if m[0] == "w")
    ways_tags = old.way_tags(aff_w_set | relevel)
    for w in relevel - aff_w_set:
        if w not in ways_tags and w not in osc.ways and old.has_way(np.asarray([w]))[0]:
            raise Decline(f"a boundary relation changed whose member way {w} the collection read no tags of")
    aff_w_set |= {w for w in relevel if w in ways_tags or w in osc.ways}
    for w in aff_w_set:
        if any(k == "natural" and v == "coastline" for k, v in ways_tags.get(w, {}).items()) or \
                (w in osc.ways and osc.ways[w].tags.get("natural") == "coastline"):
            raise Decline("a coastline changed (land and sea are split again)")
    # 2. the small extract of their new state
    created = [w for w, o in osc.ways.items() if not o.deleted]
    deleted = {w for w, o in osc.ways.items() if o.deleted}

    def present(ids) -> set:
        ids = np.asarray(sorted(set(ids)), dtype=np.int64)
        ok = old.has_way(ids) if len(ids) else np.zeros(0, bool)
        return {i for i, k in zip(ids.tolist(), ok.tolist(), strict=True) if (k or i in osc.ways) and i not in deleted}

    def refs_of(w):
        o = osc.ways.get(w)
        if o is not None:
            return None if o.deleted else o.refs
        return old.way_refs(w)

    member_ways = {m[1] for r in aff_r if r in rels_new for m in rels_new[r][1] if m[0] == "w"}
    live = present(aff_w_set | member_ways)
    way_rows = {w: refs_of(w) for w in live}
    # the relations that hold those ways: their areas (osmium's membership), their levels
    hold = {}
    for rid in om.rids[om.holding(1, way_rows)].tolist():  # (the unchanged relations: their old members)
        if rid not in changed_rels and rid in rels_new:
            hold[rid] = rels_new[rid]
    for rid in aff_r | changed_rels:
        if rid in rels_new and (rid in aff_r or any(m[0] == "w" and m[1] in way_rows for m in rels_new[rid][1])):
            hold[rid] = rels_new[rid]
    node_ids = set()
    for refs in way_rows.values():
        node_ids.update(refs)
    for rid in aff_r:
        if rid in rels_new:
            node_ids.update(m[1] for m in rels_new[rid][1] if m[0] == "n")
    node_ids |= {n for n, o in osc.nodes.items() if not o.deleted}
    nid = np.asarray(sorted(node_ids), dtype=np.int64)
    lon, lat, found = p.locations(nid)
    tags_w = old.way_tags(set(way_rows) - set(osc.ways))
    work.mkdir(parents=True, exist_ok=True)
    small = work / "affected.opl"
    small.unlink(missing_ok=True)
    _write_small(small, work / "affected-wr.opl", nid, lon, lat, found, osc, way_rows, tags_w, hold)
    x0, y0 = lonlat_to_merc(ctx_bbox[0], ctx_bbox[1])
    x1, y1 = lonlat_to_merc(ctx_bbox[2], ctx_bbox[3])
    box = shapely.box(float(x0), float(y0), float(x1), float(y1))
    made = []
    new_tags = {}
    new_flags = []
    scratch = work / "small-spool"
    for k in range(len(S.STREAMS)):
        sp = S._collect_stream(k, small, ctx_bbox, scratch, maxzoom, pz, box, capture=True)
        made.append(sp)
        new_tags[k] = sp.kept_tags[k]
        new_flags.extend(sp.way_flags)
    small.unlink()
    aff_codes = np.unique(np.concatenate([
        (ch_n << 2) | OBJ_NODE, (np.asarray(sorted(aff_w_set), dtype=np.int64) << 2) | OBJ_WAY,
        (np.asarray(sorted(aff_r), dtype=np.int64) << 2) | OBJ_RELATION]))
    # the new features of the affected objects, per stream, in emission order
    new_rows, new_recs = [], []
    for k, sp in enumerate(made):
        if not sp.index:
            continue
        rows = np.concatenate(sp.index)
        recs = sp.captured
        keep = _isin(rows["obj"], aff_codes)
        rows = rows[keep]
        recs = [r for r, h in zip(recs, keep.tolist(), strict=True) if h]
        rows["seq"] = k  # (the stream, until placed)
        new_rows.append(rows)
        new_recs.extend(recs)
    new = np.concatenate(new_rows) if new_rows else np.zeros(0, dtype=S.INDEX_DTYPE)
    # 3. their place in collection order
    index = np.asarray(old.index)
    drop = _isin(index["obj"], aff_codes)
    rest = index[~drop]
    gone = np.asarray(sorted(deleted), dtype=np.int64)
    born = np.asarray(sorted(created), dtype=np.int64)
    rel_rows = np.unique(rest["obj"][(rest["obj"] & 3) == OBJ_RELATION] >> 2)
    w_old = _completing(om, rel_rows, old, gone, born)
    aff_new = np.asarray(sorted(r for r in aff_r if r in rels_new), dtype=np.int64)
    seq = _place(rest, new, w_old, _completing(Members(rels_new, aff_new.tolist()), aff_new, old, gone, born))
    new["seq"] = seq
    # 4. the new collection
    prange = T.tile_range(ctx_bbox, pz)
    grow = T.WORLD / (1 << pz) * T.BUFFER / T.EXTENT
    low_pixel = T.WORLD / (1 << (pz - 1)) / 256.0
    old_rows = index[drop]
    parts_old = old.folder / "parts"
    parts_new = work / "parts"
    parts_new.mkdir(parents=True, exist_ok=True)

    def spans(rows):
        return S._tile_spans(rows["bounds"], pz, grow, prange)

    def is_shared(rows, sp):
        area = (sp[:, 2] - sp[:, 0] + 1) * (sp[:, 3] - sp[:, 1] + 1)
        return (area > S.MAX_PARTITIONS) | (rows["layer"] == _EARTH)

    dirty: set[tuple[int, int]] = set()
    new_by_part: dict[tuple[int, int], list] = {}
    recs_new = [(int(s), w, lay, mz, pr) for s, (w, lay, mz, pr) in zip(seq.tolist(), new_recs, strict=True)]
    for rows, recs in ((old_rows, None), (new, recs_new)):
        sp = spans(rows)
        sh = is_shared(rows, sp)
        for i in np.flatnonzero(~sh).tolist():
            x0_, y0_, x1_, y1_ = sp[i].tolist()
            for x in range(x0_, x1_ + 1):
                for y in range(y0_, y1_ + 1):
                    dirty.add((x, y))
                    if recs is not None:
                        new_by_part.setdefault((x, y), []).append(recs[i])
    dropped = set(old_rows["seq"].tolist())
    for path in parts_old.glob("*.features"):
        x, y = path.name.split(".", 1)[0].split("-")
        if (int(x), int(y)) not in dirty:
            link_file(path, parts_new / path.name)  # (a bundle's files are never changed in place)
    for key in dirty:
        recs = [r for r in S._load(parts_old, key) if r[0] not in dropped] + new_by_part.get(key, [])
        if recs:
            with open(parts_new / f"{key[0]}-{key[1]}.p.features", "wb") as fh:
                pickle.dump(recs, fh, protocol=pickle.HIGHEST_PROTOCOL)
    nsp = spans(new)
    nsh = is_shared(new, nsp)
    shared = [r for r in K.load_pickle(old.folder / "shared.pkl") if r[0] not in dropped]
    shared += [recs_new[i] for i in np.flatnonzero(nsh).tolist()]
    mz_new = np.minimum(new["min_zoom"].astype(np.int64), maxzoom)
    low_new = (mz_new < pz) & (new["size"] >= low_pixel)
    low = [r for r in K.load_pickle(old.folder / "low.pkl") if r[0] not in dropped]
    low += [recs_new[i] for i in np.flatnonzero(low_new).tolist()]
    index_new = np.concatenate([rest, new])
    index_new = index_new[np.argsort(index_new["seq"], kind="stable")]
    counts = np.bincount(index_new["layer"].astype(np.int64), minlength=len(schema.LAYERS))
    # the ways, tag sets, flags and relations of the new state
    upd = sorted(osc.ways)
    upd_refs = [[] if osc.ways[w].deleted else osc.ways[w].refs for w in upd]
    upd_off = np.zeros(len(upd) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in upd_refs], out=upd_off[1:])
    wid, off, refs = _merge_ways(
        old.wid, old.off, np.asarray(old.refs), np.asarray(upd, dtype=np.int64), upd_off,
        np.asarray([x for r in upd_refs for x in r], dtype=np.int64),
        np.asarray([not osc.ways[w].deleted for w in upd], dtype=np.bool_))
    remade = np.asarray(sorted(aff_w_set), dtype=np.int64)
    flags = old.flags[~_isin(old.flags >> 1, remade)]
    nf = np.asarray(new_flags, dtype=np.int64)
    nf = nf[_isin(nf >> 1, remade)]
    flags = np.concatenate([flags, nf])
    tags = {}
    for k, (wids, tids, sets) in old.tags.items():
        keep = ~_isin(wids, remade)
        nw, nt, ns = new_tags.get(k, (np.zeros(0, np.int64), np.zeros(0, np.int64), []))
        nw = np.frombuffer(nw, dtype=np.int64) if not isinstance(nw, np.ndarray) else nw
        nt = np.frombuffer(nt, dtype=np.int64) if not isinstance(nt, np.ndarray) else nt
        sel = _isin(nw, remade)
        tags[k] = (np.concatenate([wids[keep], nw[sel]]), np.concatenate([tids[keep], nt[sel] + len(sets)]),
                   list(sets) + list(ns))
    meta = dict(old.meta)
    meta.update(counts=counts.tolist(), n=len(index_new), skipped_ways=int((flags & 1).sum()),
                partial_ways=int((~flags & 1).sum()))
    K._dump(work / "low.pkl", low)
    K._dump(work / "shared.pkl", shared)
    K._dump(work / "relations.pkl", [(r, t, m) for r, (t, m) in sorted(rels_new.items())])
    K._dump(work / "tags.pkl", tags)
    np.save(work / "index.npy", index_new)
    K.save_ways(work / "ways", wid, off, refs, flags)
    K._dump(work / "meta.pkl", meta)
    # what the cut needs
    not_earth = index_new["layer"] != _EARTH
    mzc = np.minimum(index_new["min_zoom"].astype(np.int64), maxzoom)
    ab = np.column_stack([index_new["bounds"], index_new["min_zoom"].astype(np.float64)])
    lowb = ab[not_earth & (mzc < pz)]
    geoms = shapely.from_wkb([r[1] for r in low]) if low else []
    spool = SimpleNamespace(
        folder=parts_new, shared=shared, low=[(s, g, lay, mz, pr) for (s, _w, lay, mz, pr), g in zip(low, list(geoms), strict=True)],
        low_bounds=lowb, all_bounds=ab[not_earth].tobytes(), pz=pz, maxzoom=maxzoom, prange=prange,
        n=len(index_new), index=index_new, counts=lambda: {name: int(counts[i]) for i, name in enumerate(schema.LAYERS)},
        skipped_ways=meta["skipped_ways"], partial_ways=meta["partial_ways"],
        # the objects whose features were made again (every difference between the two collections) and
        # their new partition records, for the splice's mini tiles (no partition file read again)
        affected=aff_codes, new_parts=new_by_part)
    objects = {"n": len(ch_n), "w": len(aff_w_set), "r": len(aff_r)}
    shutil.rmtree(scratch, ignore_errors=True)  # the small extract's spools: a full run keeps no such folder
    return spool, [_feats(old_rows), _feats(new)], objects


def _feats(rows: np.ndarray) -> dict:
    rows = rows[rows["layer"] != _EARTH]
    return {"bounds": np.asarray(rows["bounds"], dtype=np.float64).reshape(-1, 4),
            "min_zoom": rows["min_zoom"].astype(np.int64), "layer": rows["layer"].astype(np.int16),
            "size": rows["size"].astype(np.float64)}


def _place(rest: np.ndarray, new: np.ndarray, w_old: dict, w_new: dict) -> np.ndarray:
    """Seqs for the new features (`new["seq"]` holds their stream), between the kept features around
    their order key (module doc, 3)."""
    out = np.zeros(len(new), dtype=np.int64)
    t_new, id_new = new["obj"] & 3, new["obj"] >> 2
    for k in (0, 1):
        lo_s, hi_s = (k + 1) * S.SEQ_STRIDE * S.SEQ_GAP, (k + 2) * S.SEQ_STRIDE * S.SEQ_GAP
        sel = (rest["seq"] >= lo_s) & (rest["seq"] < hi_s) & ((rest["obj"] & 3) != OBJ_OTHER)
        r = rest[sel]
        r = r[np.argsort(r["seq"], kind="stable")]
        tr, ir = r["obj"] & 3, r["obj"] >> 2
        mine = np.flatnonzero(new["seq"] == k)
        tn, idn = t_new[mine], id_new[mine]
        if k == 0:  # nodes, then ways, by id
            kr = ((tr == OBJ_WAY).astype(np.int64) << 62) | ir
            kn = ((tn == OBJ_WAY).astype(np.int64) << 62) | idn
        else:  # at the way osmium emits the area at; relations before that way's own, by member place, id
            def w_of(t, i, wmap):
                rids, rw, rp = wmap
                a = np.zeros((len(t), 2), dtype=np.int64)
                own = t == OBJ_WAY
                isr = t == OBJ_RELATION
                a[:, 0] = np.where(isr, -1, i)
                if len(rids) and isr.any():
                    j = np.minimum(np.searchsorted(rids, i[isr]), len(rids) - 1)
                    hit = rids[j] == i[isr]
                    a[np.flatnonzero(isr)[hit], 0] = rw[j[hit]]
                    a[np.flatnonzero(isr)[hit], 1] = rp[j[hit]]
                k2 = np.where(own, 0, (a[:, 1] << 40) | i)
                return a[:, 0], np.column_stack([(a[:, 0] << 1) | own, k2])
            wr, pr = w_of(tr, ir, w_old)
            wn, pn = w_of(tn, idn, w_new)
            if (wn < 0).any() or (wr < 0).any():
                raise Decline("a relation's area has no member way present")
            if (ir >= 1 << 40).any() or (idn >= 1 << 40).any():
                raise Decline("relation ids too large for the order key")
            both = np.concatenate([pr, pn]).reshape(-1, 2)
            order = np.lexsort((both[:, 1], both[:, 0]))
            sb = both[order]
            step = np.r_[False, (sb[1:] != sb[:-1]).any(axis=1)] if len(sb) else np.zeros(0, bool)
            rank = np.empty(len(both), dtype=np.int64)
            rank[order] = np.cumsum(step)
            kr, kn = rank[:len(pr)], rank[len(pr):]
        if len(kr) > 1 and (np.diff(kr) < 0).any():  # the kept keys must follow the seqs (the order rule)
            raise Decline("the kept features are not in the order the patch assumes")
        if len(mine) == 0:
            continue
        # each new feature's gap: after the last kept feature with a key <= its key (its own old ones are gone)
        pos = np.searchsorted(kr, kn, side="right")
        seqs_r = np.concatenate([[lo_s - 1], r["seq"], [hi_s]])
        lo, hi = seqs_r[pos], seqs_r[pos + 1]
        # the features of one gap: by key, then in emission order
        order = np.lexsort((np.arange(len(mine)), kn, pos))
        g = pos[order]
        first = np.r_[True, g[1:] != g[:-1]]
        grp = np.cumsum(first) - 1
        rank = np.arange(len(order)) - np.flatnonzero(first)[grp]
        size = np.bincount(grp)[grp]
        a, b = lo[order], hi[order]
        if ((b - a) <= size).any():
            raise Decline("no room left between two kept features' seqs (updates add up)")
        out[mine[order]] = a + (rank + 1) * ((b - a) // (size + 1))
    return out
