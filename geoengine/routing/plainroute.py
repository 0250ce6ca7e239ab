"""A plain point-to-point route in one kernel call.

Most route requests are two locations without hints (no heading, side or street) on a costing's
default hierarchy. For those, the request path used to make a dozen separate calls, each a Numba
dispatch or a few numpy operations on tiny arrays: snap each location (`fastsnap`), the offsets of
its candidates (`Profile.source_offsets`/`target_offsets`), the hierarchy's query (`cch`), the
shape of the path (`pieces`), its road flags and bounding box, and the encoded polyline (`geo`).
Measured in process on Andorra (56 pairs), the Python around those kernels was about two thirds of a
0.13 ms route. `_plain_route` runs the same kernels, in the same order and on the same arrays, from
one call, so every number it gives is bit-identical to the general path's; the tests compare the
two documents on real extracts.

Whatever is not plain gives status PLAIN_DECLINED and the general path (`Router.route_legs`) answers:
a location with nothing in reach (its 422 names it), both locations on one edge (the trivial path
along it), no path (the 422 names the pair), a hierarchy without its elimination tree.
"""

from __future__ import annotations

import numba
import numpy as np

from geoengine.elevation.grades import path_climb
from geoengine.geo import encode_coords
from geoengine.routing.cch import et_query_kernel
from geoengine.routing.fastsnap import RADII, candidates_many_kernel
from geoengine.routing.pieces import piece_shape_kernel
from geoengine.routing.profile import offsets_kernel, time_share

PLAIN_FOUND = 1
PLAIN_DECLINED = 0
_NO_GRADES = np.zeros(0, np.float32)


@numba.njit(cache=True, nogil=True)
def _plain_route(pxs, pys, rads, default_radii, G, glon, glat, piece_a, piece_seg, piece_cum, piece_len, seg_len,
                 usable, comp, use_comp, seen, stamp, slack, kmax,
                 cost, time, length, tp_edges, tp_ptr, tp_len, tp_sec,
                 n, rank, order, parent, up_off, up_tgt, up_w, up_s, up_row, up_mid, up_c1, up_c2, up_hops,
                 dn_off, dn_tgt, dn_w, dn_s, dn_row, dn_mid, dn_c1, dn_c2, dn_hops,
                 fd, fs, fp, fst, bd, bs, bp, bst, ctr, fbuf, bbuf,
                 shape_off, shape_lon, shape_lat, seg_flags, seg_class, is_highway, grades, edge_climb,
                 edge_descent, scale):
    """The route between the two points (pxs[i], pys[i]) (rads[i] NaN: the default radii). Returns
    (status, candidates (edge, fraction, lon, lat, distance, ptr), primary, secondary, path, source
    index, target index, shape lon, lat, per-edge begin, end, covered fraction and seconds, OR of the
    segments' flags, any highway, bbox [min_lon, min_lat, max_lon, max_lat], climb and descent (0 unless
    `grades`), polyline bytes at `scale` (none when scale is 0))."""
    E, F, LO, LA, D, ptr, ok = candidates_many_kernel(pxs, pys, rads, default_radii, G, glon, glat, piece_a, piece_seg,
                                                piece_cum, piece_len, seg_len, usable, comp, use_comp, seen, stamp,
                                                slack, kmax)
    ei = np.empty(0, np.int64)
    ef = np.empty(0)
    box = np.zeros(4)
    eb = np.empty(0, np.uint8)
    declined = (PLAIN_DECLINED, E, F, LO, LA, D, ptr, np.inf, np.inf, ei, -1, -1, ef, ef, ei, ei, ef, ef, 0, False,
                box, 0.0, 0.0, eb)
    if not (ok[0] and ok[1]):
        return declined
    a, b, c = ptr[0], ptr[1], ptr[2]
    se, sf, te, tf = E[a:b], F[a:b], E[b:c], F[b:c]
    for i in range(se.shape[0]):
        for j in range(te.shape[0]):
            if se[i] == te[j]:
                return declined  # the trivial path along one edge: Router.shortest
    so, so2 = offsets_kernel(se, sf, cost, time, length, False, tp_edges, tp_ptr, tp_len, tp_sec)
    to, to2 = offsets_kernel(te, tf, cost, time, length, True, tp_edges, tp_ptr, tp_len, tp_sec)
    status, best, best2, path, si, ti = et_query_kernel(
        n, rank, order, parent, up_off, up_tgt, up_w, up_s, up_row, up_mid, up_c1, up_c2, up_hops, dn_off, dn_tgt,
        dn_w, dn_s, dn_row, dn_mid, dn_c1, dn_c2, dn_hops, se, so, so2, te, to, to2, True, fd, fs, fp, fst, bd, bs,
        bp, bst, ctr, fbuf, bbuf)
    if status != 1 or not np.isfinite(best) or path.shape[0] == 0:
        return declined
    lon, lat, begin, end, covered = piece_shape_kernel(path, sf[si], tf[ti], shape_off, shape_lon, shape_lat)
    flags = 0
    highway = False
    for i in range(path.shape[0]):
        k = path[i] >> 1
        flags |= seg_flags[k]
        if is_highway[seg_class[k]]:
            highway = True
    box[0], box[1], box[2], box[3] = lon.min(), lat.min(), lon.max(), lat.max()
    seconds = np.empty(path.shape[0])
    for i in range(path.shape[0]):
        seconds[i] = time[path[i]] * covered[i]
    # the two end edges over their pieces' own seconds, as the offsets count them (path has 2+ edges)
    last = path.shape[0] - 1
    seconds[0] = time[path[0]] * time_share(path[0], sf[si], tp_edges, tp_ptr, tp_len, tp_sec)
    seconds[last] = time[path[last]] * (1.0 - time_share(path[last], tf[ti], tp_edges, tp_ptr, tp_len, tp_sec))
    climb, descent = path_climb(edge_climb, edge_descent, path, covered) if grades else (0.0, 0.0)
    poly = encode_coords(lat, lon, scale) if scale > 0 else eb
    return (PLAIN_FOUND, E, F, LO, LA, D, ptr, best, best2, path, si, ti, lon, lat, begin, end, covered, seconds,
            np.int64(flags), highway, box, climb, descent, poly)


class PlainRoute:
    """`_plain_route` bound to one profile's arrays (made once per profile and kept on it)."""

    __slots__ = ("grid", "ch", "args", "grades")

    def __init__(self, graph, grid, prof, is_highway: np.ndarray):
        ch = prof.ch
        comp = prof.component
        climb, descent = getattr(graph, "edge_climb", None), getattr(graph, "edge_descent", None)
        grades = self.grades = bool(graph.meta.get("grades")) and climb is not None
        self.grid = grid
        self.ch = ch
        self.args = (
            (*grid.arrays, prof.usable, comp if comp is not None else prof.usable, comp is not None),
            (prof.cost, prof.time, prof.length, *prof.timing,
             ch.n, ch.rank, ch.order, ch.parent, ch.up_off, ch.up_tgt, ch.up_w, ch.up_s, ch.up_row, ch.up_mid,
             ch.up_c1, ch.up_c2, ch.up_hops, ch.dn_off, ch.dn_tgt, ch.dn_w, ch.dn_s, ch.dn_row, ch.dn_mid, ch.dn_c1,
             ch.dn_c2, ch.dn_hops),
            (np.asarray(graph.shape_offsets), np.asarray(graph.shape_lon), np.asarray(graph.shape_lat),
             np.asarray(graph.seg_flags), np.asarray(graph.seg_class), is_highway, grades,
             climb if grades else _NO_GRADES, descent if grades else _NO_GRADES))

    @staticmethod
    def usable_with(prof) -> bool:
        """Whether a profile's hierarchy can answer plainly (a customised hierarchy with its elimination
        tree: the perfect customisation)."""
        return getattr(prof.ch, "parent", None) is not None

    def __call__(self, pxs: np.ndarray, pys: np.ndarray, rads: np.ndarray, slack: float, kmax: int, scale: float):
        seen, stamp = self.grid.workspace()
        ws = self.ch.workspace()
        f, b = ws.forward, ws.backward
        fb, bb = ws.tree
        g, c, s = self.args
        return _plain_route(pxs, pys, rads, RADII, *g, seen, stamp, slack, kmax, *c,
                            f[0], f[1], f[2], f[3], b[0], b[1], b[2], b[3], ws.counter, fb, bb, *s, scale)
