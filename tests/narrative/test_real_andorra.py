"""Maneuvers on REAL geometry: chains of connected ways read from the Andorra extract with osmium."""

from __future__ import annotations

import pytest

from geoengine.narrative import ManeuverType as T
from geoengine.narrative import build_maneuvers, render
from geoengine.narrative.maneuvers import SHORT_NAME_M
from tests.conftest import data_file

from .osm_paths import OsmWays, bearing, path_from

TURNS = {T.SLIGHT_RIGHT, T.RIGHT, T.SHARP_RIGHT, T.SLIGHT_LEFT, T.LEFT, T.SHARP_LEFT, T.UTURN_LEFT, T.UTURN_RIGHT,
         T.STAY_LEFT, T.STAY_RIGHT, T.STAY_STRAIGHT}


@pytest.fixture(scope="module")
def osm() -> OsmWays:
    return OsmWays(data_file("andorra/andorra.osm.pbf"))


def signed(a: float) -> float:
    return (a + 180.0) % 360.0 - 180.0


def oriented_from(w, node):
    """(way, from, to) walking way `w` away from `node` (one of its ends), or None."""
    if w.nodes[0] == node:
        return (w.id, 0, len(w.nodes) - 1)
    if w.nodes[-1] == node:
        return (w.id, len(w.nodes) - 1, 0)
    return None


def coords_of(w, sec):
    _, a, b = sec
    return w.coords[a:b + 1] if b >= a else w.coords[b:a + 1][::-1]


def junction_pairs(osm):
    """(A, B, section of B, degree, angle of the last/first segments, angle of the whole-way chords) for named
    non-roundabout ways A -> B of different names joined at A's last node, in way-id order."""
    for wid in sorted(osm.ways):
        a = osm.ways[wid]
        if not a.name or a.tags.get("junction") == "roundabout" or a.nodes[0] == a.nodes[-1]:
            continue
        node = a.nodes[-1]
        for bid in osm.ways_at[node]:
            b = osm.ways[bid]
            if bid == wid or not b.name or b.name == a.name or b.tags.get("junction") == "roundabout":
                continue
            sec = oriented_from(b, node)
            if sec is None or b.nodes[0] == b.nodes[-1]:
                continue
            bc = coords_of(b, sec)
            seg = signed(bearing(bc[0], bc[1]) - bearing(a.coords[-2], a.coords[-1]))
            chord = signed(bearing(bc[0], bc[-1]) - bearing(a.coords[0], a.coords[-1]))
            yield a, b, sec, osm.degree[node], seg, chord


def junction_maneuver(ms, shape_index):
    at = [m for m in ms if m.begin_shape_index == shape_index and m.type not in (T.START, T.DESTINATION)]
    assert len(at) == 1, [(m.type, m.begin_shape_index) for m in ms]
    return at[0]


def test_clear_turns_between_named_streets(osm):
    cases = [(a, b, sec, d, s, c) for a, b, sec, d, s, c in junction_pairs(osm)
             if d >= 3 and 60 <= abs(s) <= 120 and 60 <= abs(c) <= 120 and s * c > 0]
    assert len(cases) >= 5
    for a, b, sec, _, seg, _ in cases[:8]:
        path = path_from(osm, [(a.id, 0, len(a.nodes) - 1), sec])
        ms = build_maneuvers(path)
        junction = len(a.nodes) - 1
        m = junction_maneuver(ms, junction)
        assert m.type == (T.RIGHT if seg > 0 else T.LEFT), (a.name, b.name, seg, m)
        assert m.street_names[0] == b.name
        # the maneuver's own bearings agree with the geometry
        assert signed(m.bearing_after - m.bearing_before) * seg > 0
        assert 45 <= abs(signed(m.bearing_after - m.bearing_before)) <= 135
        # along way A (one street) nothing but real turns at junctions
        for before in ms[1:ms.index(m)]:
            assert before.type in TURNS, (a.name, before)
        assert ms[0].street_names[0] == a.name and ms[-1].type == T.DESTINATION
        steps = render(ms, "fr", "kilometers", "instructions")
        word = "droite" if seg > 0 else "gauche"
        assert steps[ms.index(m)]["instruction"] == f"Tournez à {word} sur {m.street_names[0] if len(m.street_names) == 1 else '/'.join(m.street_names)}."


def test_straight_name_changes(osm):
    straight = [(a, b, sec, d) for a, b, sec, d, s, c in junction_pairs(osm) if abs(s) < 6 and abs(c) < 6]
    assert any(d >= 3 for *_, d in straight) and any(d == 2 for *_, d in straight)
    for a, b, sec, degree in straight[:10]:
        ms = build_maneuvers(path_from(osm, [(a.id, 0, len(a.nodes) - 1), sec]))
        m = junction_maneuver(ms, len(a.nodes) - 1)
        assert m.street_names[0] == b.name
        if degree >= 3:
            assert m.type == T.CONTINUE, (a.name, b.name, m)
        else:
            assert m.type == T.BECOMES and m.previous_street_names[0] == a.name, (a.name, b.name, m)
            en = render(ms, "en", "kilometers", "instructions")[ms.index(m)]["instruction"]
            assert en == f"{'/'.join(m.previous_street_names)} becomes {'/'.join(m.street_names)}."


def test_following_a_street_across_ways_then_into_another(osm):
    """A and B: two ways of one street joined with a bend; C: another street. Only C starts a maneuver."""
    found = 0
    for wid in sorted(osm.ways):
        a = osm.ways[wid]
        if not a.name or a.nodes[0] == a.nodes[-1] or a.tags.get("junction"):
            continue
        j1 = a.nodes[-1]
        for bid in osm.ways_at[j1]:
            b = osm.ways[bid]
            sec_b = oriented_from(b, j1)
            if bid == wid or b.name != a.name or sec_b is None or b.nodes[0] == b.nodes[-1]:
                continue
            bc = coords_of(b, sec_b)
            bend = signed(bearing(bc[0], bc[min(1, len(bc) - 1)]) - bearing(a.coords[-2], a.coords[-1]))
            j2 = b.nodes[sec_b[2]]
            for cid in osm.ways_at[j2]:
                c = osm.ways[cid]
                sec_c = oriented_from(c, j2)
                if cid in (wid, bid) or not c.name or c.name == a.name or sec_c is None or c.nodes[0] == c.nodes[-1]:
                    continue
                path = path_from(osm, [(a.id, 0, len(a.nodes) - 1), sec_b, sec_c])
                ms = build_maneuvers(path)
                names = [m.street_names[0] if m.street_names else "" for m in ms]
                # the street keeps one maneuver across the joint of its two ways unless a real turn happens
                at_joint = [m for m in ms if m.begin_shape_index == len(a.nodes) - 1 and m.type != T.DESTINATION]
                if osm.degree[j1] == 2 or abs(bend) < 11:
                    assert not at_joint, (a.name, bend, at_joint)
                else:
                    assert all(m.type in TURNS for m in at_joint)
                joint_c = len(a.nodes) - 1 + abs(sec_b[2] - sec_b[1])
                m = junction_maneuver(ms, joint_c)
                assert m.street_names[0] == c.name and m.type not in (T.START, T.VIA)
                assert names[0] == a.name
                found += 1
                break
            if found >= 6:
                break
        if found >= 6:
            break
    assert found >= 3


def test_real_roundabouts_count_exits(osm):
    checked = 0
    for rid in sorted(osm.ways):
        r = osm.ways[rid]
        if r.tags.get("junction") != "roundabout" or r.nodes[0] != r.nodes[-1] or len(r.nodes) < 5:
            continue
        ring = r.nodes[:-1]
        # roads that end at the ring (entry / exit candidates), one per ring node
        spokes = []
        for pos, n in enumerate(ring):
            for wid in osm.ways_at[n]:
                w = osm.ways[wid]
                if wid != rid and w.tags.get("junction") != "roundabout" and oriented_from(w, n) is not None:
                    spokes.append((pos, w))
                    break
        if len(spokes) < 3:
            continue
        (p_in, e), (p_out, x) = spokes[0], spokes[-1]
        sec_e = oriented_from(e, ring[p_in])
        sec_e = (sec_e[0], sec_e[2], sec_e[1])  # walk the entry way TOWARDS the ring
        sec_x = oriented_from(x, ring[p_out])
        path = path_from(osm, [sec_e, (rid, p_in, p_out), sec_x])
        ms = build_maneuvers(path)
        kinds = [m.type for m in ms]
        assert kinds[0] in (T.START, T.START_LEFT, T.START_RIGHT) and kinds[-1] == T.DESTINATION
        assert T.ROUNDABOUT_ENTER in kinds and kinds.index(T.ROUNDABOUT_EXIT) == kinds.index(T.ROUNDABOUT_ENTER) + 1
        enter = ms[kinds.index(T.ROUNDABOUT_ENTER)]
        # independent count: ring nodes passed strictly between entry and exit where another road meets
        passed = sum(1 for n in ring[p_in + 1:p_out]
                     if any(w != rid and osm.ways[w].tags.get("junction") != "roundabout" for w in osm.ways_at[n]))
        assert enter.roundabout_exit_count == passed + 1, (rid, enter)
        assert enter.exit_street_names == ([x.name] if x.name else []) + ([x.tags["ref"]] if x.tags.get("ref") else [])
        ar = render(ms, "ar", "kilometers", "instructions")[kinds.index(T.ROUNDABOUT_ENTER)]["instruction"]
        assert "الدوّار" in ar
        checked += 1
    assert checked >= 5


def test_short_named_bridge_is_not_announced(osm):
    """Carrer de les Palanques crosses the 32 m Pont de les Palanques: one street, no maneuver."""
    a, bridge, b = osm.ways[24059122], osm.ways[24059295], osm.ways[24059296]
    assert a.name == b.name == "Carrer de les Palanques" and bridge.name == "Pont de les Palanques"
    assert a.nodes[-1] == bridge.nodes[0] and bridge.nodes[-1] == b.nodes[0]
    path = path_from(osm, [(a.id, 0, len(a.nodes) - 1), (bridge.id, 0, len(bridge.nodes) - 1),
                           (b.id, 0, len(b.nodes) - 1)])
    ms = build_maneuvers(path)
    assert [m.type for m in ms] == [T.START, T.DESTINATION]
    assert ms[0].length_m == pytest.approx(path.length_m.sum())


@pytest.mark.parametrize("a,b", [((1.5218, 42.5063), (1.5800, 42.5340)), ((1.5340, 42.5100), (1.4900, 42.5450))])
def test_real_route_narrative(osm, a, b):
    """A shortest path over the real ways (networkx, as a stand-in for the router): the narrative tiles the
    route, names every street followed for 200 m or more, and renders in every language."""
    import networkx as nx

    from .osm_paths import path_from_nodes, segment_graph

    g = segment_graph(osm)
    comp = max(nx.connected_components(g), key=len)
    coord = {n: c for w in osm.ways.values() for n, c in zip(w.nodes, w.coords, strict=True)}

    def near(p):
        return min(comp, key=lambda n: (coord[n][0] - p[0]) ** 2 + (coord[n][1] - p[1]) ** 2)

    nodes = nx.shortest_path(g, near(a), near(b), weight="weight")
    path = path_from_nodes(osm, g, nodes)
    assert path.n_edges > 20
    ms = build_maneuvers(path)
    assert ms[0].type == T.START and ms[-1].type == T.DESTINATION
    assert sum(m.length_m for m in ms) == pytest.approx(path.length_m.sum())
    for x, y in zip(ms, ms[1:], strict=False):
        assert y.begin_shape_index == x.end_shape_index
        if x.type in (T.BECOMES, T.CONTINUE) and y.type in (T.BECOMES, T.CONTINUE):
            assert x.street_names != y.street_names
    keys = [path.name[i] or path.ref[i] for i in range(path.n_edges)]
    for m in ms[:-1]:
        if m.type != T.ROUNDABOUT_ENTER:
            # a maneuver is named after its first edge, or after the street that follows a short stretch
            # (under SHORT_NAME_M) that was not announced
            name = (m.street_names[:1] or [""])[0]
            own = keys[m.begin_edge:m.end_edge]
            assert name in own, (name, own)
            assert path.length_m[m.begin_edge:m.begin_edge + own.index(name)].sum() < SHORT_NAME_M
    # every street followed for 200 m or more (outside roundabouts) is named by some maneuver
    mentioned = {s for m in ms for s in m.street_names + m.exit_street_names}
    run_start = 0
    for i in range(1, path.n_edges + 1):
        if i == path.n_edges or keys[i] != keys[run_start] or path.is_roundabout[i] != path.is_roundabout[run_start]:
            run = path.length_m[run_start:i].sum()
            if keys[run_start] and not path.is_roundabout[run_start] and run >= 200:
                assert keys[run_start] in mentioned, (keys[run_start], run)
            run_start = i
    assert len(ms) < path.n_edges
    for lang in ("en", "hi", "fr", "de", "es", "ar"):
        steps = render(ms, lang, "miles", "instructions")
        assert all(s["instruction"] for s in steps)
