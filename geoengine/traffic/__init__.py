"""Traffic: measured speeds that replace the motor costings' profile speeds (docs/traffic.md).

    table = read_speed_table("speeds.csv")            # OSRM's segment speed file or the per-way form
    overlay = map_speeds(graph, table)                # SpeedOverlay: per covered edge, metres and seconds
    store = SpeedStore(bundle_path); store.apply(graph, "speeds.csv")   # stored beside the bundle

The router reads the store's current generation before each request (`SpeedStore.stamp`, one stat) and
switches every profile to the new speeds at once (geoengine.routing.router).
"""

from geoengine.traffic.speeds import (
    SpeedFileError,
    SpeedOverlay,
    SpeedStore,
    SpeedTable,
    map_speeds,
    read_speed_table,
    speeds_dir,
)

__all__ = ["SpeedFileError", "SpeedOverlay", "SpeedStore", "SpeedTable", "map_speeds", "read_speed_table",
           "speeds_dir"]
