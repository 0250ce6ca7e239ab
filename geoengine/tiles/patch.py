"""The tile stage's partial rebuild for `geoengine update` (`stage.patch`): which tiles an OSM change
touches, at every zoom.

A tile's bytes depend only on the features whose (simplified) bounds meet the tile grown by the clipping
buffer, in collection order, and where tiles exist only on the features' bounds. A feature comes from one
OSM object (a node's point, a way's line or area, a multipolygon's area, a named area's POI), so only the
features of these objects can differ between the old and the new extract:

- every changed node (created, moved, retagged or deleted);
- every changed way, and every way with a changed node (its line or area moves);
- every relation that makes an area (its tags, less `type`, give an area feature or a named POI) and
  that changed or has a changed member (its area is assembled from all its member ways);
- every changed administrative boundary relation (its member ways' boundary lines take their level from
  it), over all its members.

An unchanged object keeps its features (the classification reads only the object's own tags, and a way's
boundary level only its boundary relations, listed above). What is not per object is declined by the
caller: the extract's box (the `earth` polygon and the tile grid) and coastlines (they split land and sea).

The objects are found with pyosmium's IdTracker over each extract (ways and relations that reference the
changed ids, in C++), then read through id filters (only they reach Python); a small extract of them and
of what they are made of is collected as the stage collects (`features.collect`), in the old extract and
in the new one, and `touched_by_features` turns those features into tiles per zoom. Their bounds (the
boxes of the objects' node locations, `Affected.boxes`) are kept for the tests.
"""

from __future__ import annotations

import numpy as np
import osmium

from geoengine.arrays import unique
from geoengine.tiles import schema
from geoengine.tiles import tiler as T
from geoengine.tiles.features import WORLD


class Affected:
    """Lon/lat boxes (minlon, minlat, maxlon, maxlat) of what a change touches in one or both extracts,
    and why a patch may not be possible (`coastline`: a coastline way changed or moved)."""

    def __init__(self):
        self.boxes: list[tuple[float, float, float, float]] = []
        self.features: list[dict] = []  # (with a bbox) the features of the objects, per extract
        self.holders: dict = {"w": [], "r": []}  # the ways and relations read (see affected_in)
        self.coastline = False
        self.objects = {"n": 0, "w": 0, "r": 0}

    def extend(self, other: Affected) -> None:
        self.boxes.extend(other.boxes)
        self.features.extend(other.features)
        self.coastline |= other.coastline
        for k, v in other.objects.items():
            self.objects[k] += v


class TooManyIds(Exception):
    """The ids would need more memory in osmium's id sets than ID_SET_BUDGET_MB."""


# osmium's id sets (IdTracker, IdFilter) are dense: a 512 KB bitmap for every block of 4,194,304 ids
# that holds one of the ids. Ids spread over the whole id space (a diff that modifies old objects
# everywhere; the replicated benchmark extracts, whose copies' ids are billions apart) would take
# gigabytes: such a change is declined (the stage then runs in full).
ID_SET_BUDGET_MB = 512
_CHUNK_BITS = 22


def _check_id_set(ids) -> None:
    blocks = len({int(i) >> _CHUNK_BITS for i in ids})
    if blocks * 0.5 > ID_SET_BUDGET_MB:
        raise TooManyIds(f"the change's ids spread over {blocks:,} blocks of osmium's id sets "
                         f"({blocks * 0.5:,.0f} MB, more than {ID_SET_BUDGET_MB} MB)")


def _area_relation(tags: dict) -> bool:
    """Does a relation with these tags make an area feature (or a named area's POI)?"""
    tags = {k: v for k, v in tags.items() if k != "type"}
    if schema.area_features(tags):
        return True
    return bool(tags.get("name")) and schema.poi_feature(tags, is_area=True) is not None


def _admin_relation(tags: dict) -> bool:
    return tags.get("boundary") == "administrative" and schema.admin_level(tags) is not None


def affected_in(extract, changes, bbox=None, scratch=None, holders: dict | None = None) -> Affected:
    """What a change touches in `extract` (see the module's doc): the objects' boxes, and with `bbox`
    and a `scratch` folder their features too (`Affected.features`), collected from a small extract of
    those objects and what they are made of (the boundary relations that hold their ways included).

    `holders` (the old extract's `Affected.holders`, for the new extract): the ways and relations that
    held a changed object before. In the new extract an object holds a changed one only if it held it
    before or changed itself, so the forward references need not be searched again."""
    out = Affected()
    ch = {t: set(changes.low[t]) | set(changes.deleted[t]) for t in ("n", "w", "r")}
    for t in ("n", "w", "r"):
        _check_id_set(ch[t])
    tracker = osmium.IdTracker()
    for i in ch["n"]:
        tracker.add_node(i)
    for i in ch["w"] | set(holders["w"] if holders else ()):
        tracker.add_way(i)
    for i in ch["r"] | set(holders["r"] if holders else ()):
        tracker.add_relation(i)
    if holders is None:
        # the ways holding a changed node, the relations holding a changed node or way (or one of those)
        tracker.complete_forward_references(str(extract), relation_depth=0)
    out.holders = {"w": [], "r": []}
    ways: dict[int, list[int]] = {}
    rel_ways: list[int] = []
    rel_nodes: list[int] = []
    rel_members: list[tuple[list[int], list[int]]] = []
    rel_ids: list[int] = []  # the relations of the small extract: areas, and boundaries (their ways' levels)
    fp = osmium.FileProcessor(str(extract), osmium.osm.WAY | osmium.osm.RELATION).with_filter(tracker.id_filter())
    for o in fp:
        out.holders[o.type_str()].append(o.id)
        if o.is_way():
            ways[o.id] = [n.ref for n in o.nodes]
            if o.tags.get("natural") == "coastline":
                out.coastline = True
        else:
            tags = dict(o.tags)
            admin = _admin_relation(tags)
            if _area_relation(tags) or (o.id in ch["r"] and admin):
                mw = [m.ref for m in o.members if m.type == "w"]
                mn = [m.ref for m in o.members if m.type == "n"]
                rel_members.append((mw, mn))
                rel_ways.extend(mw)
                rel_nodes.extend(mn)
                rel_ids.append(o.id)
            elif admin:
                rel_ids.append(o.id)
            out.objects["r"] += 1
    out.objects["w"] = len(ways)
    extra = set(rel_ways) - set(ways)
    if extra:  # the other member ways of those relations: their node lists
        t2 = osmium.IdTracker()
        for i in extra:
            t2.add_way(i)
        for o in osmium.FileProcessor(str(extract), osmium.osm.WAY).with_filter(t2.id_filter()):
            ways[o.id] = [n.ref for n in o.nodes]
            if o.tags.get("natural") == "coastline":
                out.coastline = True
        del t2
    # (an id set holds a 512 KB bitmap per 4 M ids it meets: freed before the next one is made)
    del tracker, fp
    # the locations of every node of those ways, and of the changed and member nodes
    _check_id_set([r for refs in ways.values() for r in refs] + list(ch["n"]) + rel_nodes)
    _check_id_set(list(ways) + list(ch["w"]))
    t3 = osmium.IdTracker()
    for refs in ways.values():
        for r in refs:
            t3.add_node(r)
    for i in ch["n"]:
        t3.add_node(i)
    for i in rel_nodes:
        t3.add_node(i)
    loc: dict[int, tuple[float, float]] = {}
    if bbox is not None and scratch is not None:
        # one pass writes the small extract (these nodes, ways and relations); the locations and the
        # features are read from it
        for i in ways:
            t3.add_way(i)
        for i in rel_ids:
            t3.add_relation(i)
        feats = _features_of(extract, t3, bbox, scratch, loc)
        out.coastline |= feats.pop("coastline")
        out.features.append(feats)
    else:
        for o in osmium.FileProcessor(str(extract), osmium.osm.NODE).with_filter(t3.id_filter()):
            if o.location.valid():
                loc[o.id] = (o.location.lon, o.location.lat)
    del t3

    def box(refs) -> tuple | None:
        pts = [loc[r] for r in refs if r in loc]
        if not pts:
            return None
        a = np.asarray(pts, dtype=np.float64)
        return (float(a[:, 0].min()), float(a[:, 1].min()), float(a[:, 0].max()), float(a[:, 1].max()))

    for i in ch["n"]:
        if i in loc:
            x, y = loc[i]
            out.boxes.append((x, y, x, y))
            out.objects["n"] += 1
    way_box = {}
    for i, refs in ways.items():
        way_box[i] = box(refs)
    for i in list(ways):
        if i in extra:
            continue  # only as a relation's member
        if way_box[i] is not None:
            out.boxes.append(way_box[i])
    for mw, mn in rel_members:
        parts = [way_box[w] for w in mw if way_box.get(w) is not None]
        b = box(mn)
        if b is not None:
            parts.append(b)
        if parts:
            a = np.asarray(parts, dtype=np.float64)
            out.boxes.append((float(a[:, 0].min()), float(a[:, 1].min()), float(a[:, 2].max()), float(a[:, 3].max())))
    return out


def _features_of(extract, tracker, bbox, scratch, loc: dict) -> dict:
    """The features (Mercator bounds, min zoom, layer, size as the cut measures it) that the collection
    makes of the objects `tracker` holds, read from a small extract of them (features.collect: the
    same classification, geometry, clipping to the box)."""
    import shapely

    from geoengine.tiles.features import collect

    scratch.mkdir(parents=True, exist_ok=True)
    sub = scratch / f"affected-{len(list(scratch.iterdir()))}.osm.pbf"
    with osmium.SimpleWriter(str(sub)) as w:
        for o in osmium.FileProcessor(str(extract)).with_filter(tracker.id_filter()):
            w.add(o)
    for o in osmium.FileProcessor(str(sub), osmium.osm.NODE):  # (and the nodes' locations, in `loc`)
        if o.location.valid():
            loc[o.id] = (o.location.lon, o.location.lat)
    fs = collect(sub, bbox)
    sub.unlink()
    layer = np.asarray(fs.layer, dtype=np.int16)
    keep = layer != schema.LAYERS.index("earth")
    geoms = np.asarray(fs.geoms, dtype=object)[keep]
    dims = shapely.get_dimensions(geoms)
    size = np.where(dims == 2, np.sqrt(shapely.area(geoms)), np.where(dims == 1, shapely.length(geoms), np.inf))
    return {"bounds": shapely.bounds(geoms), "min_zoom": np.asarray(fs.min_zoom, dtype=np.int64)[keep],
            "layer": layer[keep], "size": size, "coastline": bool(fs.coastlines)}


def touched_by_features(features: list[dict], bbox, minzoom: int = T.MINZOOM,
                        maxzoom: int = T.MAXZOOM) -> dict[int, np.ndarray]:
    """Per zoom, the tiles whose bytes or existence the features of the changed objects (old and new)
    can alter: the tiles their bounds meet once grown by the zoom's clipping buffer, of the features the
    cut draws at that zoom (min zoom, landcover up to its zoom, at least a pixel below the maximum zoom:
    tiler._encode_batch's filter); and the tiles the bounds of every feature shown from that zoom meet
    (they decide which tiles the cut visits: tiler.tasks_for)."""
    b = np.concatenate([f["bounds"] for f in features]) if features else np.zeros((0, 4))
    mz = np.minimum(np.concatenate([f["min_zoom"] for f in features]), maxzoom) if features else np.zeros(0)
    lay = np.concatenate([f["layer"] for f in features]) if features else np.zeros(0)
    size = np.concatenate([f["size"] for f in features]) if features else np.zeros(0)
    ok = ~np.isnan(b).any(axis=1)  # (an empty geometry meets nothing)
    b, mz, lay, size = b[ok], mz[ok], lay[ok], size[ok]
    out = {}
    for z in range(minzoom, maxzoom + 1):
        rng = T.tile_range(bbox, z)
        tile = WORLD / (1 << z)
        shown = mz <= z
        drawn = shown.copy()
        if z > T.LANDCOVER_MAXZOOM:
            drawn &= lay != T._LANDCOVER
        if z < maxzoom:
            drawn &= size >= tile / 256.0 * (1 - 1e-9)
        grow = tile * T.BUFFER / T.EXTENT + 0.01 + tile * 1e-9
        ids = [spans_ids(b[drawn] + np.array([-grow, -grow, grow, grow]), z, rng)]
        eps = 0.01 + tile * 1e-9
        ids.append(spans_ids(b[shown] + np.array([-eps, -eps, eps, eps]), z, rng))
        out[z] = unique(np.concatenate(ids))
    return out


def affected(old_extract, new_extract, changes, bbox=None, scratch=None) -> Affected:
    """What a change touches in the old extract and in the new one."""
    out = affected_in(old_extract, changes, bbox, scratch)
    out.extend(affected_in(new_extract, changes, bbox, scratch, holders=out.holders))
    return out


def spans_ids(bounds: np.ndarray, z: int, rng) -> np.ndarray:
    """tiler._feature_tiles without its cap on a feature's tile count: every tile of `rng` the boxes meet."""
    return T._feature_tiles(bounds, z, rng, cap=None, drop_outside=True)


def planned_tiles(spool, plan, bbox) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """Per zoom, the sorted ids of every tile a full cut of `spool` visits, and of the tiles the features
    meet (tiler.tasks_for: the features shown at that zoom, earth aside; every tile of the box is visited
    where those are at least 1/FULL_GRID_FACTOR of them): `spool.plan_cut`'s low tasks below the
    partition zoom, what `_cut_partition` visits above. A tile visited may come out empty (no row)."""
    low: dict[int, list] = {}
    for z, tiles in plan.low_tasks:
        low.setdefault(z, []).extend((x << 32) | y for x, y in tiles)
    planned, met = {}, {}
    lb = np.asarray(spool.low_bounds, dtype=np.float64).reshape(-1, 5)
    ab = np.frombuffer(spool.all_bounds, dtype=np.float64).reshape(-1, 5) if len(spool.all_bounds) \
        else np.zeros((0, 5))
    for z in range(T.MINZOOM, spool.maxzoom + 1):
        rng = T.tile_range(bbox, z)
        if z < spool.pz:
            met[z] = T._feature_tiles(lb[np.minimum(lb[:, 4], spool.pz - 1) <= z, :4], z, rng)
            planned[z] = np.unique(np.asarray(low.get(z, []), dtype=np.int64))
            continue
        met[z] = T._feature_tiles(ab[np.minimum(ab[:, 4], spool.maxzoom) <= z, :4], z, rng)
        if plan.full_grid.get(z):
            xs, ys = np.meshgrid(np.arange(rng[0], rng[2] + 1, dtype=np.int64),
                                 np.arange(rng[1], rng[3] + 1, dtype=np.int64))
            planned[z] = np.sort(((xs << 32) | ys).ravel())
        else:
            planned[z] = met[z]
    return planned, met


def grid_may_have_grown(planned: dict, met: dict, stored: dict, touched: dict, bbox) -> int | None:
    """A zoom at which the new cut visits every tile of the box (FULL_GRID_FACTOR), the old cut may have
    visited only the tiles features met, and some untouched tile the new cut visits is not in the old
    archive (it may hold land now; None: no such zoom). Away from the touched tiles the features meet the
    same tiles in both extracts, so the old count of tiles met lies between the new count less the
    touched ones met and that plus every touched tile. (Where the old cut visited every tile and the new
    one does not, the tiles it no longer visits are simply not copied.)"""
    for z, ids in met.items():
        rng = T.tile_range(bbox, z)
        box = (rng[2] - rng[0] + 1) * (rng[3] - rng[1] + 1)
        if box > T.FULL_GRID_FACTOR * len(ids):
            continue  # the new cut visits the tiles features meet: those of the old cut, away from the change
        t = touched.get(z, np.empty(0, dtype=np.int64))
        lo = len(ids) - int(np.isin(ids, t).sum())
        if box <= T.FULL_GRID_FACTOR * lo:
            continue  # the old cut visited every tile too
        p = planned[z]
        if (~np.isin(p, t) & ~np.isin(p, stored.get(z, ()))).any():
            return z
    return None

