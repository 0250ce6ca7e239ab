"""Shared pieces of the edge cost functions: per-edge attribute views and the preference curve."""

from __future__ import annotations

import numpy as np

from geoengine.graph import tags as T

# Speed factor per surface class (unknown, paved_smooth, paved, paved_rough, compacted, gravel, dirt,
# impassable) for motor vehicles.
MOTOR_SURFACE_SPEED = np.array([1.0, 1.0, 1.0, 0.85, 0.75, 0.6, 0.5, 0.3])
DESTINATION_PENALTY_S = 300.0
SIGNAL_DELAY_S = 5.0  # average wait per traffic signal passed by bicycle
# per traffic signal passed by a motor vehicle: OSRM car.lua's traffic_signal_penalty (lib/obstacles.lua)
MOTOR_SIGNAL_DELAY_S = 2.0
TAGGED_SPEED_FACTOR = 0.8  # motor vehicles drive 80 % of a tagged maxspeed on average (as OSRM)
# With `shortest` the cost is metres; destination-only edges still must not carry through traffic.
DESTINATION_PENALTY_M = 2000.0
HIGHWAY_CLASSES = (T.CLASS["motorway"], T.CLASS["trunk"])
ROAD_CLASSES = tuple(T.CLASS[c] for c in ("motorway", "trunk", "primary", "secondary", "tertiary", "unclassified",
                                          "residential", "service", "living_street", "road", "busway"))


def preference(u: float, strength: float = 5.0) -> float:
    """Cost factor on edges the option is about: strength at 0, 1 at 0.5, 0.75 at 1 (monotone)."""
    if u <= 0.5:
        return float(strength ** (1.0 - 2.0 * u))
    return 1.0 - 0.5 * (u - 0.5)


class EdgeView:
    """Per-directed-edge numpy views of a Graph used by the cost functions."""

    def __init__(self, graph, speeds=None):
        self.graph = graph
        #: measured speeds (`geoengine.traffic.SpeedOverlay`, or any object with `edges`, `cov_len`,
        #: `cov_time`) that replace the profile speed on part or all of some edges; None: profile speeds
        self.speeds = speeds
        self.length = graph.edge_length
        self.cls = graph.edge_class
        self.flags = graph.edge_flags
        self.surface = graph.edge_attr(graph.seg_surface)
        self.access = np.asarray(graph.edge_access)
        self.dest = np.asarray(graph.edge_dest_only)
        self.speed = np.asarray(graph.edge_speed, dtype=np.float64)
        self.signals = np.asarray(graph.edge_signals, dtype=np.float64)

    @property
    def motor_obstacles(self) -> np.ndarray:
        """Seconds a motor vehicle waits on each edge: OSRM car.lua's obstacles (`graph.edge_obstacle_s`:
        traffic signals by direction, stop and give-way signs, gates); on a graph built before them,
        MOTOR_SIGNAL_DELAY_S per traffic signal passed."""
        return motor_obstacles(self.graph)

    def flag(self, bit: int) -> np.ndarray:
        return (self.flags & bit) != 0

    def is_class(self, *names_or_ids) -> np.ndarray:
        ids = [T.CLASS[n] if isinstance(n, str) else n for n in names_or_ids]
        return np.isin(self.cls, ids)

    def limit(self, name: str) -> np.ndarray:
        col = T.LIMIT_NAMES.index(name)
        return self.graph.edge_attr(np.asarray(self.graph.seg_limits)[:, col]).astype(np.float64)

    def sac(self) -> np.ndarray:
        return self.graph.edge_attr(self.graph.seg_sac)


def shortest_cost(v: EdgeView, mode_bit: int) -> np.ndarray:
    """Cost in metres for `shortest`: the length, plus DESTINATION_PENALTY_M on destination-only edges."""
    cost = v.length.copy()
    cost[(v.dest & mode_bit) != 0] += DESTINATION_PENALTY_M
    return cost


def finish(cost: np.ndarray, time_s: np.ndarray, length: np.ndarray, allowed: np.ndarray):
    cost = np.where(allowed, cost, np.inf)
    time_s = np.where(allowed, time_s, np.inf)
    return cost.astype(np.float64), time_s.astype(np.float64), np.asarray(length, dtype=np.float64)


def motor_obstacles(graph, edges=None) -> np.ndarray:
    """float64[E]: `EdgeView.motor_obstacles` of `graph` (of `edges` only, when given)."""
    obs = getattr(graph, "edge_obstacle_s", None)
    if obs is not None:
        obs = np.asarray(obs)
        return (obs if edges is None else obs[edges]).astype(np.float64)
    sig = np.asarray(graph.edge_signals)
    return MOTOR_SIGNAL_DELAY_S * (sig if edges is None else sig[edges]).astype(np.float64)
