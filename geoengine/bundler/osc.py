"""The objects of OsmChange files, as `geoengine update` hands them to the stages' patches
(`PatchInputs.osc`): per type, every changed object in its newest version (deleted ones flagged),
with its tags, a node's location, a way's node refs, a relation's members. A change is small next to
the extract (a day of a country's diffs is a few hundred thousand objects), so these are Python
objects; the node arrays (`node_arrays`) serve the stages' vectorised lookups."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class OscObject:
    id: int
    version: int
    deleted: bool
    tags: dict[str, str]
    lon: float | None = None  # nodes: osmium's Location.lon/.lat (None when deleted or invalid)
    lat: float | None = None
    x: int | None = None  # nodes: the same as int32 1e-7 degrees (osmium's fixed point)
    y: int | None = None
    refs: list[int] = field(default_factory=list)  # ways: node ids
    members: list[tuple[str, int, str]] = field(default_factory=list)  # relations: (type n/w/r, ref, role)


class OscObjects:
    """The newest version of every object of a set of change files (`add` them in any order)."""

    def __init__(self):
        self.nodes: dict[int, OscObject] = {}
        self.ways: dict[int, OscObject] = {}
        self.relations: dict[int, OscObject] = {}
        self._ids: dict[str, np.ndarray] = {}
        self._node_arrays = None

    def of(self, t: str) -> dict[int, OscObject]:
        return {"n": self.nodes, "w": self.ways, "r": self.relations}[t]

    def add(self, obj) -> None:
        """An osmium object of a change file; kept when it is the newest version of its id seen yet."""
        t = obj.type_str()
        store = self.of(t)
        have = store.get(obj.id)
        if have is not None and obj.version < have.version:
            return
        deleted = bool(obj.deleted)
        o = OscObject(id=obj.id, version=obj.version, deleted=deleted,
                      tags={} if deleted else {tag.k: tag.v for tag in obj.tags})
        if t == "n":
            loc = obj.location
            if not deleted and loc.valid():
                o.lon, o.lat, o.x, o.y = loc.lon, loc.lat, loc.x, loc.y
        elif t == "w":
            if not deleted:
                o.refs = [n.ref for n in obj.nodes]
        elif not deleted:
            o.members = [(m.type, m.ref, m.role) for m in obj.members]
        store[obj.id] = o
        self._ids.pop(t, None)
        self._node_arrays = None

    def drop(self, objects) -> None:
        """Forget these (type, id) pairs (objects the extract already has in their newest version)."""
        for t, i in objects:
            self.of(t).pop(i, None)
        self._ids.clear()
        self._node_arrays = None

    def ids(self, t: str) -> np.ndarray:
        """Sorted int64 ids of every changed object of type `t` (deleted ones included)."""
        if t not in self._ids:
            self._ids[t] = np.sort(np.fromiter(self.of(t).keys(), np.int64, len(self.of(t))))
        return self._ids[t]

    def node_ids(self) -> np.ndarray:
        return self.ids("n")

    def way_ids(self) -> np.ndarray:
        return self.ids("w")

    def relation_ids(self) -> np.ndarray:
        return self.ids("r")

    def node_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(ids sorted, x, y, live): the changed nodes; `live` False for a deleted one (or one without a
        valid location)."""
        if self._node_arrays is None:
            ids = self.ids("n")
            objs = [self.nodes[i] for i in ids.tolist()]
            live = np.fromiter((not o.deleted and o.x is not None for o in objs), bool, len(objs))
            x = np.fromiter((o.x or 0 for o in objs), np.int32, len(objs))
            y = np.fromiter((o.y or 0 for o in objs), np.int32, len(objs))
            self._node_arrays = (ids, x, y, live)
        return self._node_arrays
