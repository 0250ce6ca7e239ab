"""Turn-by-turn narrative: maneuvers from a routed path (`PathInfo`), instructions from locale templates.

    from geoengine.narrative import PathInfo, build_maneuvers, render
    maneuvers = build_maneuvers(path, units="kilometers")
    steps = render(maneuvers, language="fr", units="kilometers", directions_type="instructions")
"""

from .locales import DIRECTIONS_TYPES, SUPPORTED_LANGUAGES, format_distance, narrate, render, resolve_language
from .maneuvers import Maneuver, ManeuverType, build_maneuvers, normalize_units
from .path import ROAD_CLASS_BY_HIGHWAY, PathInfo, RoadClass, Stop, road_class_of

__all__ = ["PathInfo", "Stop", "RoadClass", "ROAD_CLASS_BY_HIGHWAY", "road_class_of", "Maneuver", "ManeuverType",
           "build_maneuvers", "normalize_units", "render", "narrate", "resolve_language", "format_distance",
           "SUPPORTED_LANGUAGES", "DIRECTIONS_TYPES"]
