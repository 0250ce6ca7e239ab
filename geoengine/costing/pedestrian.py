"""Pedestrian costing: walking speed (Tobler on slopes), way-kind factors, steps, lighting, hiking
difficulty, hills."""

from __future__ import annotations

import numpy as np

from geoengine.costing import hills
from geoengine.costing.common import EdgeView, finish, preference, shortest_cost
from geoengine.graph import tags as T

DESTINATION_PENALTY_S = 120.0
STEPS_SPEED_FACTOR = 0.5  # steps are walked at half speed
WALKWAYS = ("footway", "path", "pedestrian", "bridleway", "cycleway")


def costs(graph, opts, speeds=None):  # measured motor speeds do not apply
    v = EdgeView(graph)
    allowed = (v.access & T.PEDESTRIAN) != 0
    allowed &= v.sac() <= opts["max_hiking_difficulty"]
    steps = v.is_class("steps")
    speed = opts["walking_speed"] * np.where(steps, STEPS_SPEED_FACTOR, 1.0)
    time_s = v.length / (speed / 3.6)
    penalty = 0.0
    grades = hills.profile_of(graph, v.length)
    if grades is not None:  # Tobler's hiking function; use_hills weighs climbs and steep descents
        ferry = v.flag(T.F_FERRY)
        time_s, penalty = hills.pedestrian(grades, speed, opts["use_hills"], ~(steps | ferry))
        penalty = np.where(ferry, 0.0, penalty)
    if opts["shortest"]:
        cost = shortest_cost(v, T.PEDESTRIAN)
    else:
        cost = time_s + penalty
        cost[v.is_class(*WALKWAYS)] *= opts["walkway_factor"]
        cost[v.flag(T.F_SIDEWALK)] *= opts["sidewalk_factor"]
        cost[v.flag(T.F_ALLEY)] *= opts["alley_factor"]
        cost[v.flag(T.F_DRIVEWAY)] *= opts["driveway_factor"]
        cost[steps] += opts["step_penalty"]
        cost[v.flag(T.F_FERRY)] *= preference(opts["use_ferry"])
        cost[v.is_class("living_street")] *= preference(opts["use_living_streets"], 3.0)
        cost[v.is_class("track")] *= preference(opts["use_tracks"], 3.0)
        cost[~v.flag(T.F_LIT)] *= 1.0 + opts["use_lit"]
        cost[(v.dest & T.PEDESTRIAN) != 0] += DESTINATION_PENALTY_S
    return finish(cost, time_s, v.length, allowed)
