"""Costings: the nine travel profiles, their option tables and vectorised edge costs.

    opts = parse_costing_options("auto", {"use_highways": 0.2})   # or default_options("auto")
    cost, time_s, length_m = edge_costs(graph, "auto", opts)      # float64[E] each, inf = not allowed

See docs/costing.md (generated from the tables by `geoengine.costing.docs.render`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from geoengine.costing import auto, bicycle, motorcycle, pedestrian, truck
from geoengine.costing.schema import (
    COSTINGS,
    TABLES,
    Option,
    Options,
    check_costing,
    costing_options_schema,
    default_options,
    parse_costing_options,
)
from geoengine.graph import tags as T

__all__ = [
    "COSTINGS", "TABLES", "Option", "Options", "check_costing", "costing_options_schema", "default_options",
    "parse_costing_options", "edge_costs", "MOTOR_COSTINGS", "turn_penalty", "mode_of", "inactive_options",
]

_MODULES = {
    "auto": auto, "auto_shorter": auto, "bus": auto, "taxi": auto, "truck": truck, "bicycle": bicycle,
    "pedestrian": pedestrian, "motorcycle": motorcycle, "motor_scooter": motorcycle,
}
_MODE = {"auto": "auto", "auto_shorter": "auto", "bus": "bus", "taxi": "taxi", "truck": "truck",
         "bicycle": "bicycle", "pedestrian": "pedestrian", "motorcycle": "motorcycle",
         "motor_scooter": "motor_scooter"}


def mode_of(costing: str) -> str:
    """The travel mode (access bit name in geoengine.graph.tags.MODE_BITS) of a costing."""
    return _MODE[check_costing(costing)]


#: the costings whose travel times measured speeds replace (`edge_costs(..., speeds=)`, docs/traffic.md)
MOTOR_COSTINGS = ("auto", "auto_shorter", "bus", "taxi", "truck", "motorcycle", "motor_scooter")


def edge_costs(graph, costing: str, options: Options | None = None,
               speeds=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per directed edge of `graph`: (cost float64[E], time_s float64[E], length_m float64[E]).

    Contract: cost is what routing minimises (seconds scaled by preferences and penalties, or metres
    when `shortest`), inf where the costing may not use the edge in its direction (access, oneway,
    limits, exclusions); time_s is the travel time in seconds (inf where not allowed); length_m the
    edge length in metres. Vectorised numpy over all edges; `options` defaults to the costing's defaults.
    `speeds`: measured speeds (`geoengine.traffic.SpeedOverlay`) the motor costings use instead of their
    profile speeds where given, capped by their own top speed.
    """
    check_costing(costing)
    if options is None:
        options = default_options(costing)
    if options.costing != costing:
        raise ValueError(f"options are for costing '{options.costing}', not '{costing}'")
    return _MODULES[costing].costs(graph, options, speeds)


def _motor_turns(angle: np.ndarray) -> np.ndarray:
    a = np.abs(angle)
    right = angle > 0
    # right-hand traffic: right turns are cheaper than left turns; U-turns cost most
    pen = np.where(a < 30, 0.0, np.where(right, 2.0 + 4.0 * a / 180.0, 4.0 + 8.0 * a / 180.0))
    return np.where(a > 170, 30.0, pen)


def _bike_turns(angle: np.ndarray) -> np.ndarray:
    a = np.abs(angle)
    return np.where(a < 45, 0.0, np.where(a > 170, 10.0, 2.0 * a / 180.0))


def turn_penalty(costing: str, options: Options | None = None) -> Callable[[np.ndarray], np.ndarray] | None:
    """Seconds added per turn for `geoengine.graph.turn_graph(..., turn_penalty=...)`: motor vehicles pay
    more for left than right turns (right-hand traffic) and 30 s for a U-turn at a dead end; bicycles a
    little; pedestrians and `shortest` requests nothing (None)."""
    check_costing(costing)
    if options is not None and options.get("shortest"):
        return None
    if costing == "pedestrian":
        return None
    if costing == "bicycle":
        return _bike_turns
    return _motor_turns


def inactive_options(graph, options: Options) -> list[str]:
    """Notes on options that the request set but that cannot change this graph's routes (say so to
    the caller rather than ignoring them silently): use_hills needs grade data the graph lacks."""
    notes = []
    if "use_hills" in options.given and not graph.meta.get("grades"):
        notes.append("use_hills has no effect: this bundle's graph carries no grade (elevation) data")
    _ = T
    return notes
