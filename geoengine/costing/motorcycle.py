"""Motorcycle and motor_scooter costings (scooters: moped access, top speed 45 km/h)."""

from __future__ import annotations

from geoengine.costing.auto import motor_cost, motor_time
from geoengine.costing.common import EdgeView, finish, shortest_cost
from geoengine.graph import tags as T

MODE = {"motorcycle": T.MOTORCYCLE, "motor_scooter": T.MOTOR_SCOOTER}
TOP_SPEED = {"motorcycle": 140.0, "motor_scooter": 45.0}


def costs(graph, opts, speeds=None):
    v = EdgeView(graph, speeds)
    allowed = (v.access & MODE[opts.costing]) != 0
    time_s = motor_time(v, TOP_SPEED[opts.costing])
    bit = MODE[opts.costing]
    cost = shortest_cost(v, bit) if opts["shortest"] else motor_cost(v, time_s, opts, bit)
    return finish(cost, time_s, v.length, allowed)
