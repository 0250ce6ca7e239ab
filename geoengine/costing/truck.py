"""Truck costing: hgv access, dimension and weight limits, hazmat, hgv tolls."""

from __future__ import annotations

from geoengine.costing.auto import dimension_ok, motor_cost, motor_time
from geoengine.costing.common import EdgeView, finish, shortest_cost
from geoengine.graph import tags as T

LIMITS = (("height", "maxheight"), ("width", "maxwidth"), ("length", "maxlength"), ("weight", "maxweight"),
          ("axle_load", "maxaxleload"), ("axle_count", "maxaxles"))


def costs(graph, opts, speeds=None):
    v = EdgeView(graph, speeds)
    allowed = (v.access & T.TRUCK) != 0
    allowed &= dimension_ok(v, opts, LIMITS)
    if opts["hazmat"]:
        allowed &= ~v.flag(T.F_HAZMAT_NO)
    time_s = motor_time(v, opts["top_speed"])
    if opts["shortest"]:
        cost = shortest_cost(v, T.TRUCK)
    else:
        cost = motor_cost(v, time_s, opts, T.TRUCK, toll_bit=T.F_TOLL_HGV)
    return finish(cost, time_s, v.length, allowed)
