"""The graph stage's patch (geoengine/graph/patch.py): the old bundle's kept read (`graph/raw/`) patched
from a change's objects, then the build's array phase, against a full build of the new extract, file for
file and byte for byte (the graph arrays, strings.bin, graph.json and the new kept read itself).

The changes are real edits of the Liechtenstein extract: the change file of tests/update/edits.py (moved
nodes, a new road, a deleted road, a renamed street, a new address, a new restriction), and one per
trap of a per-way patch (docs/updates.md): a new way touching another way's inner node (a junction
split), a deleted way whose end was another way's inner junction (two segments joined), barrier and
signal nodes added and removed, ways that become and stop being routable by a tag change, a junction
node moved, a road extended by a new node, a restriction deleted and another changed, a road node
deleted while the road still uses it (a node missing from the extract: the road is cut there), a new
way through a node the extract lacks; then a second change on top of the first (updates chain) that
creates the missing node again. The new extract is the old one merged with the change in libosmium
(update.apply_changes, as `geoengine update` makes it).

The change's objects and the node locations are what the update hands the stage (`PatchInputs.osc`
from update.read_changes; `PatchInputs.locations`: the old extract's object store, geoengine.bundler.
middle, overlaid with the change).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import osmium
import pytest

from geoengine.bundler import middle
from geoengine.bundler.middle import Store
from geoengine.bundler.pbfscan import scan_pbf
from geoengine.bundler.update import apply_changes, read_changes
from geoengine.graph.build import build_graph, graph_arrays
from geoengine.graph.patch import patch_raw
from geoengine.graph.raw import RAW_DIR, write_raw
from tests.conftest import data_file

from .conftest import EXTRACT
from .edits import WHEN

ROADS = ("residential", "unclassified", "tertiary", "secondary", "primary", "living_street", "service")


# -- the update's parsed change and node locations, as `geoengine update` makes them ----------------

def read_osc(files):
    """`PatchInputs.osc` of the change files (update.read_changes)."""
    return read_changes([Path(f) for f in files]).osc


def locations_of(extract: Path, osc, folder: Path):
    """`PatchInputs.locations` after `osc`: the object store of the extract before it (written into
    `folder` as its source stage writes it) overlaid with the change."""
    middle.write(folder, scan_pbf(extract, keep=True)["objects"])
    store = Store.open(folder)
    return lambda ids: middle.locations(store, osc, ids)


# -- the real extract and changes of it --------------------------------------------------------------

@pytest.fixture(scope="module")
def scan():
    """Roads (tags, refs), node use counts, tagged nodes and restriction relations of the extract."""
    src = data_file(EXTRACT)
    ways, other_ways, use, rels = {}, {}, {}, {}
    maxid = {"n": 0, "w": 0, "r": 0}
    for o in osmium.FileProcessor(str(src), osmium.osm.WAY | osmium.osm.RELATION):
        maxid[o.type_str()] = max(maxid[o.type_str()], o.id)
        if o.is_way():
            refs = [n.ref for n in o.nodes]
            if o.tags.get("highway"):
                for r in refs:
                    use[r] = use.get(r, 0) + 1
            if o.tags.get("highway") in ROADS:
                ways[o.id] = (dict(o.tags), refs, o.version)
            elif "highway" not in o.tags and "building" in o.tags and len(other_ways) < 50:
                other_ways[o.id] = (dict(o.tags), refs, o.version)
        elif o.tags.get("type") == "restriction":
            rels[o.id] = (dict(o.tags), [(m.type, m.ref, m.role) for m in o.members], o.version)
    in_rel = {ref for _t, members, _v in rels.values() for t, ref, _r in members if t == "w"}
    nodes = {}
    signals = []
    for n in osmium.FileProcessor(str(src), osmium.osm.NODE):
        maxid["n"] = max(maxid["n"], n.id)
        if n.id in use:
            nodes[n.id] = (n.location.lon, n.location.lat, dict(n.tags), n.version)
            if n.tags.get("highway") == "traffic_signals":
                signals.append(n.id)
    return SimpleNamespace(src=src, ways=ways, other_ways=other_ways, use=use, rels=rels, in_rel=in_rel,
                           nodes=nodes, signals=signals, maxid=maxid)


@pytest.fixture(scope="module")
def old_graph(tmp_path_factory, scan):
    d = tmp_path_factory.mktemp("graph-old") / "graph"
    build_graph(scan.src, d)
    return d


def _meta(version):
    return {"version": version, "timestamp": WHEN, "changeset": 1, "uid": 1, "user": "geoengine-test"}


def _node(scan, nid, **kw):
    lon, lat, tags, v = scan.nodes[nid]
    args = {"id": nid, "location": (lon, lat), "tags": tags, **_meta(v + 1)}
    args.update(kw)
    return osmium.osm.mutable.Node(**args)


def _way(scan, wid, **kw):
    tags, refs, v = scan.ways.get(wid) or scan.other_ways[wid]
    args = {"id": wid, "nodes": refs, "tags": tags, **_meta(v + 1)}
    args.update(kw)
    return osmium.osm.mutable.Way(**args)


def trap_objects(scan) -> tuple[list, dict]:
    """One change holding every trap (module docstring); the objects and what each picked."""
    order = sorted(scan.ways)
    use = scan.use
    taken: set[int] = set()
    picked = {}

    def road(pred, start=0.0):
        for w in order[int(len(order) * start):]:
            if w not in taken and w not in scan.in_rel and pred(w, scan.ways[w][1]):
                taken.add(w)
                return w
        raise AssertionError("no road fits")

    inner_free = lambda refs: [r for r in refs[1:-1] if use[r] == 1]  # noqa: E731
    nid, wid = scan.maxid["n"] + 1, scan.maxid["w"] + 1
    objs = []
    # a junction split: a new service road from an inner node (used by that road only) to a new node
    split = road(lambda w, refs: len(refs) >= 5 and len(inner_free(refs)) >= 2, 0.1)
    inner = inner_free(scan.ways[split][1])[0]
    lon, lat = scan.nodes[inner][:2]
    objs.append(osmium.osm.mutable.Node(id=nid, location=(lon + 0.0004, lat + 0.0003), tags={}, **_meta(1)))
    objs.append(osmium.osm.mutable.Way(id=wid, nodes=[inner, nid], tags={"highway": "service"}, **_meta(1)))
    picked["split"] = (split, inner)
    # two segments joined: a road whose first node is an inner node of exactly one other road, deleted
    ways_of: dict[int, list[int]] = {}
    for v in order:
        for r in scan.ways[v][1]:
            ways_of.setdefault(r, []).append(v)

    def joins(w, refs):
        a = refs[0]
        if use[a] != 2:
            return False
        return any(v != w and v not in taken and a in scan.ways[v][1][1:-1] for v in ways_of[a])
    joined = road(joins, 0.3)
    objs.append(_way(scan, joined, nodes=[], tags={}, visible=False))
    picked["joined"] = joined
    # barrier added on an inner node, a traffic signal removed
    gate_road = road(lambda w, refs: len(inner_free(refs)) >= 1, 0.45)
    gate = inner_free(scan.ways[gate_road][1])[0]
    objs.append(_node(scan, gate, tags={**scan.nodes[gate][2], "barrier": "gate", "access": "private"}))
    signal = scan.signals[0]
    objs.append(_node(scan, signal, tags={k: v for k, v in scan.nodes[signal][2].items() if k not in ("highway", "crossing")}))
    picked.update(gate=gate, signal=signal)
    # a signal added on another inner node, a bollard (a barrier for cars) on a third
    sig_road = road(lambda w, refs: len(inner_free(refs)) >= 2, 0.5)
    new_sig, bollard = inner_free(scan.ways[sig_road][1])[:2]
    objs.append(_node(scan, new_sig, tags={"highway": "traffic_signals"}))
    objs.append(_node(scan, bollard, tags={"barrier": "bollard"}))
    # ways that become and stop being routable by a tag change
    becomes = sorted(scan.other_ways)[0]
    objs.append(_way(scan, becomes, tags={**scan.other_ways[becomes][0], "highway": "footway"}))
    proposed = road(lambda w, refs: True, 0.55)
    objs.append(_way(scan, proposed, tags={**scan.ways[proposed][0], "highway": "proposed"}))
    untagged = road(lambda w, refs: True, 0.6)
    objs.append(_way(scan, untagged, tags={"landuse": "grass"}))
    picked.update(becomes=becomes, proposed=proposed, untagged=untagged)
    # a junction node moved
    mover = road(lambda w, refs: any(use[r] >= 2 for r in refs[1:-1]), 0.65)
    junction = next(r for r in scan.ways[mover][1][1:-1] if use[r] >= 2)
    lon, lat = scan.nodes[junction][:2]
    objs.append(_node(scan, junction, location=(lon + 0.00011, lat - 0.00007)))
    # a road extended by a new node, and renamed with a ref
    ext = road(lambda w, refs: True, 0.7)
    lon, lat = scan.nodes[scan.ways[ext][1][-1]][:2]
    objs.append(osmium.osm.mutable.Node(id=nid + 1, location=(lon + 0.0002, lat), tags={}, **_meta(1)))
    objs.append(_way(scan, ext, nodes=scan.ways[ext][1] + [nid + 1],
                     tags={**scan.ways[ext][0], "name": "Patchgasse", "ref": "P 1"}))
    # a restriction deleted, another changed
    rels = sorted(scan.rels)
    tags, members, v = scan.rels[rels[0]]
    objs.append(osmium.osm.mutable.Relation(id=rels[0], members=[], tags={}, visible=False, **_meta(v + 1)))
    tags, members, v = scan.rels[rels[1]]
    objs.append(osmium.osm.mutable.Relation(id=rels[1], members=members,
                                            tags={**tags, "restriction": "no_u_turn"}, **_meta(v + 1)))
    # a road node deleted while the road still uses it (the road is cut there)
    cut_road = road(lambda w, refs: len(refs) >= 6 and len(inner_free(refs)) >= 2, 0.8)
    gone = inner_free(scan.ways[cut_road][1])[1]
    objs.append(_node(scan, gone, tags={}, visible=False, location=osmium.osm.Location()))
    # a new way through a node the extract lacks (and through two it has)
    a, b = scan.ways[cut_road][1][0], scan.ways[split][1][-1]
    absent = nid + 50
    objs.append(osmium.osm.mutable.Way(id=wid + 1, nodes=[a, absent, b], tags={"highway": "track"}, **_meta(1)))
    picked.update(junction=junction, extended=ext, restrictions=rels[:2], gone=gone, cut_road=cut_road,
                  absent=absent, new_ways=(wid, wid + 1), new_nodes=(nid, nid + 1))
    return objs, picked


def write_osc(path: Path, objs) -> Path:
    key = {"n": 0, "w": 1, "r": 2}
    kinds = {osmium.osm.mutable.Node: "n", osmium.osm.mutable.Way: "w", osmium.osm.mutable.Relation: "r"}
    w = osmium.SimpleWriter(str(path))
    try:
        for o in sorted(objs, key=lambda o: (key[kinds[type(o)]], o.id)):
            w.add(o)
    finally:
        w.close()
    return path


def _patched(old_graph: Path, files, old_extract: Path, out: Path) -> dict:
    osc = read_osc(files)
    raw = patch_raw(old_graph, osc, locations_of(old_extract, osc, out.parent / "store"))
    assert not isinstance(raw, str), raw
    counts = raw.pop("counts")
    out.mkdir(parents=True)
    write_raw(raw, out / RAW_DIR)
    graph_arrays(raw, out)
    return counts


def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def assert_same(patched: Path, full: Path):
    got, want = _files(patched), _files(full)
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name] == want[name], name


def _case(tmp: Path, old_graph: Path, src: Path, files) -> tuple[Path, Path, dict]:
    tmp.mkdir(parents=True, exist_ok=True)
    new = tmp / "new.osm.pbf"
    apply_changes(src, files, new, {})
    build_graph(new, tmp / "full")
    counts = _patched(old_graph, files, src, tmp / "patched")
    return new, tmp / "full", counts


def test_the_edits_of_the_update_test(old_graph, edits, tmp_path):
    new, full, counts = _case(tmp_path, old_graph, edits["old"], [edits["osc"]])
    assert_same(tmp_path / "patched", full)
    assert _files(full)["strings.bin"] != _files(old_graph)["strings.bin"]  # renamed: the table changed
    assert counts["ways_read_again"] == 2  # the new road and the renamed one


def test_the_traps_of_a_per_way_patch_and_a_second_change_on_top(old_graph, scan, tmp_path):
    objs, picked = trap_objects(scan)
    osc = write_osc(tmp_path / "traps.osc", objs)
    new, full, counts = _case(tmp_path / "one", old_graph, scan.src, [osc])
    assert_same(tmp_path / "one" / "patched", full)
    from geoengine.graph import Graph

    old, g = Graph.open(old_graph), Graph.open(full)
    # the traps reached the graph: a split, a join, a cut, new and gone ways, barriers and signals
    assert g.meta["counts"]["missing_node_refs"] == 2 and g.meta["counts"]["ways_cut"] == 2
    assert old.meta["counts"]["missing_node_refs"] == 0
    segs_of = lambda gr, w: int((np.asarray(gr.seg_way) == w).sum())  # noqa: E731
    assert segs_of(g, picked["split"][0]) == segs_of(old, picked["split"][0]) + 1
    assert segs_of(g, picked["becomes"]) >= 1 and segs_of(old, picked["becomes"]) == 0
    assert segs_of(g, picked["proposed"]) == 0 and segs_of(g, picked["untagged"]) == 0
    assert segs_of(g, picked["joined"]) == 0 and segs_of(old, picked["joined"]) >= 1
    assert g.meta["counts"]["barriers_applied"] > old.meta["counts"]["barriers_applied"]
    assert g.meta["counts"]["traffic_signals"] == old.meta["counts"]["traffic_signals"]  # one gone, one new
    assert g.meta["counts"]["restrictions"] == old.meta["counts"]["restrictions"] - 1
    assert counts["ways_changed"] == 7

    # a second change on the patched graph: the deleted node comes back, the gate goes, a way is deleted
    lon, lat, tags, v = scan.nodes[picked["gone"]]
    gate = scan.nodes[picked["gate"]]
    second = [osmium.osm.mutable.Node(id=picked["gone"], location=(lon, lat), tags=tags, **_meta(v + 2)),
              osmium.osm.mutable.Node(id=picked["gate"], location=gate[:2], tags=gate[2], **_meta(gate[3] + 2)),
              osmium.osm.mutable.Way(id=picked["new_ways"][0], nodes=[], tags={}, visible=False, **_meta(2))]
    osc2 = write_osc(tmp_path / "second.osc", second)
    new2 = tmp_path / "two" / "new.osm.pbf"
    new2.parent.mkdir()
    apply_changes(new, [osc2], new2, {})
    build_graph(new2, tmp_path / "two" / "full")
    _patched(tmp_path / "one" / "patched", [osc2], new, tmp_path / "two" / "patched")
    assert_same(tmp_path / "two" / "patched", tmp_path / "two" / "full")
    assert Graph.open(tmp_path / "two" / "full").meta["counts"]["missing_node_refs"] == 1  # the absent node


def test_declines_without_a_kept_read_or_for_a_change_too_large(old_graph, edits, scan, tmp_path):
    osc = read_osc([edits["osc"]])
    where = locations_of(edits["old"], osc, tmp_path / "store")
    bare = tmp_path / "bare"
    shutil.copytree(old_graph, bare)
    shutil.rmtree(bare / RAW_DIR)
    assert "keeps no read" in patch_raw(bare, osc, where)
    (bare / RAW_DIR).mkdir()
    (bare / RAW_DIR / "raw.json").write_text('{"format": 0}')
    assert "another format" in patch_raw(bare, osc, where)
    many = SimpleNamespace(nodes=osc.nodes, ways=osc.ways, relations=osc.relations, node_ids=osc.node_ids,
                           relation_ids=osc.relation_ids, way_ids=lambda: np.arange(len(scan.ways), dtype=np.int64))
    assert "more than" in patch_raw(old_graph, many, where)
