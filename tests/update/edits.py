"""Two versions of a real extract and the OsmChange file between them, made with pyosmium.

`make_versions(src, out_dir)` picks real objects of `src` (deterministically) and edits them the way
mappers do: nodes of a road moved, a new road joining two roads, a road deleted, a street renamed, a
new address point, a new turn restriction at a real junction. It writes the new extract
(`new/<src name>`, every object of `src` with the edits, written object by object: not the code
under test's merge) and the change file (`change.osc.gz`: create / modify / delete by version, as
libosmium writes an .osc), and returns what it changed.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import osmium

WHEN = dt.datetime(2015, 7, 28, 10, 0, 0, tzinfo=dt.UTC)  # after the Liechtenstein extract's 2015-07-27
ROADS = ("residential", "unclassified", "tertiary", "secondary", "primary", "living_street", "service")
NEW_STREET = "Aktualisierungsweg"
RENAMED_TO = "Neuer Diffweg"


def _scan(src: Path):
    ways, use = {}, {}
    restriction_ways = set()
    for o in osmium.FileProcessor(str(src), osmium.osm.WAY | osmium.osm.RELATION):
        if o.is_way():
            hw = o.tags.get("highway")
            if hw in ROADS:
                refs = [n.ref for n in o.nodes]
                ways[o.id] = (hw, o.tags.get("name"), refs, o.version)
                for r in refs:
                    use[r] = use.get(r, 0) + 1
        else:
            for m in o.members:
                if m.type == "w":
                    restriction_ways.add(m.ref)
    return ways, use, restriction_ways


def make_versions(src: Path, out_dir: Path) -> dict:
    src = Path(src)
    out_dir.mkdir(parents=True, exist_ok=True)
    ways, use, in_relations = _scan(src)
    loc: dict[int, tuple[float, float]] = {}
    want = set(use)
    maxid = {"n": 0, "w": 0, "r": 0}
    for o in osmium.FileProcessor(str(src)):
        t = o.type_str()
        maxid[t] = max(maxid[t], o.id)
        if t == "n" and o.id in want:
            loc[o.id] = (o.location.lon, o.location.lat)
    named: dict[str, list[int]] = {}
    for wid, (_hw, name, _refs, _v) in ways.items():
        if name:
            named.setdefault(name, []).append(wid)
    order = sorted(ways)
    # a renamed street: the lowest-id residential street whose name only one way carries
    renamed = next(w for w in order if ways[w][0] == "residential" and ways[w][1] and len(named[ways[w][1]]) == 1
                   and w not in in_relations)
    # a deleted road: a residential way with 4+ nodes, not in a relation, not the renamed one
    deleted = next(w for w in order[len(order) // 3:] if ways[w][0] == "residential" and len(ways[w][2]) >= 4
                   and w not in in_relations and w != renamed)
    # moved nodes: the inner nodes (used by that way only) of a tertiary road, shifted ~30 m north-east
    mover = next(w for w in order[len(order) // 2:] if ways[w][0] in ("tertiary", "unclassified")
                 and sum(1 for r in ways[w][2][1:-1] if use[r] == 1) >= 3 and w not in (renamed, deleted))
    moved = [r for r in ways[mover][2][1:-1] if use[r] == 1][:5]
    # a turn restriction: a junction node where two roads meet (both end or pass there), no_left_turn
    junction = via_from = via_to = None
    for w in order[len(order) // 4:]:
        if w in (renamed, deleted, mover):
            continue
        end = ways[w][2][-1]
        if use.get(end, 0) < 2:
            continue
        other = next((v for v in order if v != w and v not in (renamed, deleted, mover) and end in ways[v][2]
                      and ways[v][2][0] == end and ways[v][0] in ROADS[:5]), None)
        if other is not None and ways[w][0] in ROADS[:5]:
            junction, via_from, via_to = end, w, other
            break
    assert junction is not None, "no junction found for the restriction"
    # a new road: joins the far ends of two roads ~100-600 m apart that do not touch
    ends = [(w, ways[w][2][0]) for w in order if ways[w][0] in ("residential", "unclassified")
            and w not in (renamed, deleted, mover)]
    a_end = b_end = None
    for i, (wa, na) in enumerate(ends[::7]):
        xa, ya = loc[na]
        for wb, nb in ends[i * 7 + 1:]:
            xb, yb = loc[nb]
            d = ((xa - xb) * 0.68) ** 2 + (ya - yb) ** 2
            if (0.001 ** 2) < d < (0.005 ** 2) and wa != wb:
                a_end, b_end = na, nb
                break
        if a_end:
            break
    assert a_end is not None, "no pair of road ends for the new road"

    nid, wid, rid = maxid["n"] + 1, maxid["w"] + 1, maxid["r"] + 1
    (xa, ya), (xb, yb) = loc[a_end], loc[b_end]
    mid = (nid, (xa + xb) / 2 + 0.0002, (ya + yb) / 2 + 0.0002)
    address = (nid + 1, *_near(loc[ways[renamed][2][0]]))
    street_of_address = RENAMED_TO
    meta = {"version": 1, "timestamp": WHEN, "changeset": 1, "uid": 1, "user": "geoengine-test"}

    def bumped(o, **kw):
        return o.replace(version=o.version + 1, timestamp=WHEN, changeset=1, uid=1, user="geoengine-test", **kw)

    new_nodes = [osmium.osm.mutable.Node(id=mid[0], location=(mid[1], mid[2]), tags={}, **meta),
                 osmium.osm.mutable.Node(id=address[0], location=(address[1], address[2]),
                                         tags={"addr:housenumber": "99", "addr:street": street_of_address,
                                               "addr:postcode": "9490", "addr:city": "Vaduz"}, **meta)]
    new_way = osmium.osm.mutable.Way(id=wid, nodes=[a_end, mid[0], b_end],
                                     tags={"highway": "residential", "name": NEW_STREET}, **meta)
    new_rel = osmium.osm.mutable.Relation(
        id=rid, members=[("w", via_from, "from"), ("n", junction, "via"), ("w", via_to, "to")],
        tags={"type": "restriction", "restriction": "no_left_turn"}, **meta)

    new_dir = out_dir / "new"
    new_dir.mkdir(exist_ok=True)
    new_path = new_dir / src.name
    osc_path = out_dir / "change.osc.gz"
    for p in (new_path, osc_path):
        p.unlink(missing_ok=True)
    h = osmium.io.Header()
    reader = osmium.io.Reader(str(src), osmium.osm.osm_entity_bits.NOTHING)
    box = reader.header().box()
    reader.close()
    h.add_box(box)
    h.set("osmosis_replication_timestamp", WHEN.strftime("%Y-%m-%dT%H:%M:%SZ"))
    full = osmium.SimpleWriter(str(new_path), header=h)
    change = osmium.SimpleWriter(str(osc_path))
    moved_set = set(moved)
    try:
        section = "n"
        for o in osmium.FileProcessor(str(src)):
            t = o.type_str()
            if t != section:  # new objects go after the last of their type, in id order
                _flush(section, full, change, new_nodes, new_way, new_rel)
                section = t
            if t == "n" and o.id in moved_set:
                x, y = o.location.lon, o.location.lat
                n = bumped(o, location=(x + 0.00025, y + 0.00018))
                full.add_node(n)
                change.add_node(n)
            elif t == "w" and o.id == deleted:
                change.add_way(bumped(o, visible=False, nodes=[], tags={}))
            elif t == "w" and o.id == renamed:
                tags = dict(o.tags)
                tags["name"] = RENAMED_TO
                w = bumped(o, tags=tags)
                full.add_way(w)
                change.add_way(w)
            elif t == "n":
                full.add_node(o)
            elif t == "w":
                full.add_way(o)
            else:
                full.add_relation(o)
        _flush(section, full, change, new_nodes, new_way, new_rel)
    finally:
        full.close()
        change.close()
    return {
        "old": src, "new": new_path, "osc": osc_path,
        "moved_nodes": moved, "moved_way": mover, "new_way": wid, "new_street": NEW_STREET,
        "new_road_ends": (a_end, b_end), "deleted_way": deleted, "deleted_name": ways[deleted][1],
        "renamed_way": renamed, "renamed_from": ways[renamed][1], "renamed_to": RENAMED_TO,
        "address_node": address[0], "address": f"{RENAMED_TO} 99",
        "restriction": rid, "restriction_members": (via_from, junction, via_to),
        "locations": {"moved": [loc[r] for r in moved], "new_road": [loc[a_end], loc[b_end]],
                      "deleted": [loc[r] for r in ways[deleted][2]], "renamed": [loc[r] for r in ways[renamed][2]],
                      "address": [address[1:]], "junction": [loc[junction]]},
        "when": WHEN,
    }


def _near(p):
    return (p[0] + 0.0001, p[1] + 0.00005)


def _flush(section, full, change, new_nodes, new_way, new_rel):
    if section == "n":
        for n in new_nodes:
            full.add_node(n)
            change.add_node(n)
    elif section == "w":
        full.add_way(new_way)
        change.add_way(new_way)
    elif section == "r":
        full.add_relation(new_rel)
        change.add_relation(new_rel)
