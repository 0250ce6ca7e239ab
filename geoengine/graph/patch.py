"""The graph stage's patch for `geoengine update` (issue 29): the old bundle's kept read
(`graph/raw/`, geoengine.graph.raw) patched from the change's objects alone, then the build's array
phase (`build.graph_arrays`) on it. No pass over the extract.

What the read yields for the new extract, from the old read and the change (`PatchInputs.osc`: the
changed objects, newest version; `PatchInputs.locations`: any node's location in the new extract):

- **ways**: every changed way leaves the old records; a changed way that is not deleted is read again
  as `read_osm` reads one (the KeyFilter on highway/route/type/barrier, `build.way_record`), with its
  refs from the change and their locations from `locations`. Records stay in way-id order, which is
  the read's order (the extract is sorted; `raw.json` says so, else the patch declines).
- **moved nodes**: every point of the surviving ways whose node changed (moved, deleted, created:
  a node that was missing from the extract) gets its location again from `locations` (x, y are
  osmium's fixed point; `locations` gives x / 1e7, which `rint(lon * 1e7)` recovers exactly).
- **node sets**: a changed node leaves the barrier, border, signal and obstacle sets, and a surviving
  one is classified again (`build.node_records`, after the KeyFilter).
- **restrictions**: a changed relation leaves the list; a surviving `type=restriction` one is read
  again (`build.restriction_record`); the list stays in relation-id order.
- **strings**: the table is rebuilt in the read's first-seen order (name then ref per way, in way
  order), so every index equals the full read's.

Everything global in the graph (node numbering, segments in way order, junctions split or joined by
another way, barrier flags per segment, restrictions by edge) is then computed by the same array
phase as a full build, so the output is the full build's, byte for byte.

It declines (None, a full run) when the old bundle keeps no raw (built before it) or another format,
the read was not in id order, or the change holds more than `PATCH_MAX_SHARE` of the old read's ways
or way nodes (a change that large is about as dear to patch in Python as to read).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from geoengine.arrays import member, run_indices
from geoengine.graph import build as B
from geoengine.graph import tags as T
from geoengine.graph.raw import RAW_DIR, RAW_FORMAT, ids_increasing, load_raw, read_meta

#: changed ways (against the old read's routable ways) or changed nodes (against its way nodes)
#: above which the patch declines
PATCH_MAX_SHARE = 0.25


def _fixed(lon: np.ndarray, lat: np.ndarray, found: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """osmium's fixed-point x, y (int32; undefined where not found) of locations given in degrees."""
    ok = np.asarray(found, dtype=bool) & np.isfinite(lon) & np.isfinite(lat)
    x = np.full(len(ok), B.UNDEFINED_COORD, dtype=np.int32)
    y = np.full(len(ok), B.UNDEFINED_COORD, dtype=np.int32)
    x[ok] = np.rint(np.asarray(lon, dtype=np.float64)[ok] * 1e7).astype(np.int32)
    y[ok] = np.rint(np.asarray(lat, dtype=np.float64)[ok] * 1e7).astype(np.int32)
    return x, y


def _locate(locations, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x, y of node `ids` in the new extract, one lookup per distinct id."""
    if not len(ids):
        return np.zeros(0, np.int32), np.zeros(0, np.int32)
    uniq, inv = np.unique(ids, return_inverse=True)
    lon, lat, found = locations(uniq)
    x, y = _fixed(np.asarray(lon, dtype=np.float64), np.asarray(lat, dtype=np.float64), found)
    return x[inv], y[inv]


def _patch_nodes(old: dict, osc) -> dict:
    """The node sets of the new read: the old ones without the changed nodes, plus the surviving
    changed nodes classified again."""
    changed = np.asarray(osc.node_ids(), dtype=np.int64)
    barriers = {}
    borders, signals = [], []
    obstacles = {}
    b_ids = np.asarray(old["barrier_ids"])
    keep = ~member(b_ids, changed)
    barriers.update(zip(b_ids[keep].tolist(), np.asarray(old["barrier_modes"])[keep].tolist(), strict=True))
    ids = np.asarray(old["border_ids"])
    borders = ids[~member(ids, changed)].tolist()
    ids = np.asarray(old["signal_ids"])
    signals = ids[~member(ids, changed)].tolist()
    o_ids = np.asarray(old["obstacle_ids"])
    keep = ~member(o_ids, changed)
    obstacles.update(zip(o_ids[keep].tolist(), map(tuple, np.asarray(old["obstacle_s"])[keep].tolist()), strict=True))
    for nid, node in osc.nodes.items():
        if node.deleted or not B.passes_filter(node.tags):
            continue
        signal, obs, border, modes = B.node_records(dict(node.tags))
        if signal:
            signals.append(nid)
        if obs is not None:
            obstacles[nid] = obs
        if border:
            borders.append(nid)
        if modes is not None:
            barriers[nid] = modes
    return B.node_sets(barriers, set(borders), set(signals), obstacles)


def _patch_restrictions(old: list, osc) -> list:
    changed = set(int(i) for i in osc.relation_ids())
    out = [r for r in old if r[0] not in changed]
    for rid, rel in osc.relations.items():
        if rel.deleted or not B.passes_filter(rel.tags):
            continue
        rec = B.restriction_record(int(rid), dict(rel.tags), [(t, int(ref), role) for t, ref, role in rel.members])
        if rec is not None:
            out.append(rec)
    out.sort(key=lambda r: r[0])
    return out


def patch_raw(old_graph: Path, osc, locations) -> dict | str:
    """The new extract's `raw` (as `build.read_osm` returns it) from the old bundle's graph folder and
    the change; or a reason (str) why the patch declines."""
    folder = old_graph / RAW_DIR
    meta = read_meta(folder)
    if meta is None:
        return "the old bundle keeps no read of the extract (graph/raw: built before it)"
    if meta.get("format") != RAW_FORMAT or meta.get("columns") != [k for k, _ in B.ATTR_COLUMNS]:
        return f"the old bundle's graph/raw is of another format ({meta.get('format')}; this geoengine writes {RAW_FORMAT})"
    if not meta.get("sorted"):
        return "the old extract's ways or restrictions were not in id order"
    n_old, p_old = int(meta["ways"]), int(meta["points"])
    changed_w = np.asarray(osc.way_ids(), dtype=np.int64)
    changed_n = np.asarray(osc.node_ids(), dtype=np.int64)
    if len(changed_w) > PATCH_MAX_SHARE * max(n_old, 1) or len(changed_n) > PATCH_MAX_SHARE * max(p_old, 1):
        return (f"the change holds {len(changed_w):,} ways and {len(changed_n):,} nodes, more than "
                f"{PATCH_MAX_SHARE:.0%} of the read's {n_old:,} ways or {p_old:,} way nodes")
    try:
        old = load_raw(folder, meta["columns"])
        strings = (old_graph / "strings.bin").read_bytes().decode("utf-8").split("\x00")
    except (OSError, ValueError) as exc:
        return f"the old bundle's graph/raw cannot be read ({type(exc).__name__}: {exc})"
    W = np.asarray(old["way_ids"])
    off = np.asarray(old["way_offsets"])
    if len(W) != n_old or len(off) != n_old + 1 or len(old["refs"]) != p_old:
        return "the old bundle's graph/raw does not match its raw.json"

    # -- ways: the survivors' records, and the changed ways read again (their order: way id) -----------
    keep = np.flatnonzero(~member(W, changed_w))
    index = {s: i for i, s in enumerate(strings)}
    recs, new_ids, new_refs = [], [], []
    for wid in sorted(osc.ways):
        way = osc.ways[wid]
        if way.deleted or not B.passes_filter(way.tags):
            continue
        attr = B.way_record(dict(way.tags))
        if attr is None:
            continue
        for key in ("name", "ref"):  # strings by index in the union of the old table and the new names
            i = index.get(attr[key])
            if i is None:
                i = index[attr[key]] = len(strings)
                strings.append(attr[key])
            attr[key] = i
        recs.append(attr)
        new_ids.append(int(wid))
        new_refs.append(np.asarray(way.refs, dtype=np.int64))
    new_ids = np.asarray(new_ids, dtype=np.int64)
    way_ids = np.concatenate([W[keep], new_ids])
    order = np.argsort(way_ids, kind="stable")
    way_ids = way_ids[order]
    if not ids_increasing(way_ids):
        return "a way id occurs twice in the patched read"
    cols = {}
    for key, col in old["way_cols"].items():
        fresh = np.asarray([r[key] for r in recs], dtype=col.dtype)
        cols[key] = np.concatenate([np.asarray(col)[keep], fresh])[order]
    fresh_limits = np.asarray([r["limits"] for r in recs], dtype=np.float32).reshape(len(recs), len(T.LIMIT_NAMES))
    limits = np.concatenate([np.asarray(old["way_limits"])[keep], fresh_limits])[order]

    # -- points: the survivors' runs from the old arrays, the new ways' from the change -------------
    old_refs = np.asarray(old["refs"])
    lengths_old = np.diff(off)[keep]
    starts_old = off[:-1][keep]
    lengths_new = np.asarray([len(r) for r in new_refs], dtype=np.int64)
    starts_new = p_old + np.concatenate([[0], np.cumsum(lengths_new)[:-1]]).astype(np.int64)
    lengths = np.concatenate([lengths_old, lengths_new])[order]
    starts = np.concatenate([starts_old, starts_new])[order]
    idx = run_indices(starts, lengths)
    fresh_refs = np.concatenate(new_refs) if new_refs else np.zeros(0, np.int64)
    refs = np.concatenate([old_refs, fresh_refs])[idx]
    x = np.concatenate([np.asarray(old["x"]), np.zeros(len(fresh_refs), np.int32)])[idx]
    y = np.concatenate([np.asarray(old["y"]), np.zeros(len(fresh_refs), np.int32)])[idx]
    # every point of a changed node (moved, deleted, created) and every point of a new record: located
    # again in the new extract
    from_change = idx >= p_old
    again = np.flatnonzero(from_change | member(refs, changed_n))
    x[again], y[again] = _locate(locations, refs[again])
    way_of_point = np.repeat(np.arange(len(way_ids), dtype=np.int64), lengths)

    # -- strings in the read's first-seen order: "", then name and ref of each way in way order -------
    seq = np.empty(2 * len(way_ids) + 1, dtype=np.int64)
    seq[0] = 0
    seq[1::2] = cols["name"]
    seq[2::2] = cols["ref"]
    uniq, first = np.unique(seq, return_index=True)
    used = uniq[np.argsort(first, kind="stable")]
    renumber = np.full(len(strings), -1, dtype=np.int64)
    renumber[used] = np.arange(len(used), dtype=np.int64)
    cols["name"] = renumber[cols["name"]].astype(cols["name"].dtype)
    cols["ref"] = renumber[cols["ref"]].astype(cols["ref"].dtype)

    return {
        "strings": [strings[i] for i in used.tolist()],
        "way_ids": way_ids,
        "way_cols": cols,
        "way_limits": limits,
        "refs": refs,
        "x": x,
        "y": y,
        "way_of_point": way_of_point,
        **_patch_nodes(old, osc),
        "restrictions": _patch_restrictions(old["restrictions"], osc),
        "counts": {"ways_changed": int(len(changed_w)), "ways_read_again": len(recs),
                   "points_located_again": int(len(again))},
    }


def old_graph_ok(old_graph: Path) -> bool:
    """The old graph folder is of this geoengine's graph format."""
    try:
        return json.loads((old_graph / "graph.json").read_text()).get("format") == B.GRAPH_FORMAT
    except (OSError, ValueError):
        return False
