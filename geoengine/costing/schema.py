"""Option tables of the costings and everything they drive: validation, defaults, fingerprints,
the GET /costing/options/{costing} listing and docs/costing.md.

One `Option` row per option name and costing. `parse_costing_options` is the only way a request's
`costing_options` become an `Options` object.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from geoengine.errors import FieldError, InvalidRequest

COSTINGS = ("auto", "auto_shorter", "bicycle", "bus", "pedestrian", "truck", "motorcycle", "motor_scooter", "taxi")

BICYCLE_TYPES = ("Road", "Hybrid", "City", "Cross", "Mountain")
CYCLING_SPEED = {"Road": 25.0, "Hybrid": 18.0, "City": 18.0, "Cross": 20.0, "Mountain": 16.0}


@dataclass(frozen=True)
class Option:
    name: str
    type: str  # number | integer | boolean | string
    default: Any
    description: str
    minimum: float | None = None
    maximum: float | None = None
    enum: tuple[str, ...] | None = None

    def schema(self) -> dict:
        out: dict[str, Any] = {"type": self.type}
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        if self.enum is not None:
            out["enum"] = list(self.enum)
        out["default"] = self.default
        out["description"] = self.description
        return out


def _pref(name: str, what: str, default: float) -> Option:
    return Option(
        name, "number", default,
        f"Preference for {what}: 0 avoids them strongly (cost x5), 0.5 is neutral, 1 favours them (cost x0.75).",
        0.0, 1.0,
    )


def _penalty(name: str, what: str, default: float) -> Option:
    return Option(name, "number", default, f"Seconds added to the cost of each {what}.", 0.0, 43200.0)


SHORTEST = Option("shortest", "boolean", False,
                  "When true the cost is the distance alone: the shortest route that the mode may use "
                  "(preferences and penalties are then not applied; access and limits still are).")
TOP_SPEED = Option("top_speed", "number", 140.0, "Highest speed in km/h the vehicle travels; faster roads are "
                   "driven at this speed.", 10.0, 252.0)
USE_HIGHWAYS = _pref("use_highways", "motorways and trunk roads (and their links)", 0.5)
USE_TOLLS = _pref("use_tolls", "toll roads", 0.5)
USE_FERRY = _pref("use_ferry", "ferries", 0.5)


def _auto_table(height: float, width: float, top_speed: float, shortest: bool) -> tuple[Option, ...]:
    return (
        USE_HIGHWAYS,
        USE_TOLLS,
        USE_FERRY,
        _pref("use_living_streets", "living streets (highway=living_street)", 0.1),
        _pref("use_tracks", "tracks (highway=track)", 0.0),
        _penalty("service_penalty", "service road (highway=service) used", 15.0),
        _penalty("country_crossing_penalty", "road that crosses a border control (barrier=border_control)", 0.0),
        Option("shortest", "boolean", shortest, SHORTEST.description),
        Option("height", "number", height, "Vehicle height in metres; roads with a lower maxheight are excluded.",
               0.0, 10.0),
        Option("width", "number", width, "Vehicle width in metres; roads with a lower maxwidth are excluded.",
               0.0, 10.0),
        Option("exclude_unpaved", "boolean", False, "When true, unpaved roads (surface, tracktype or smoothness "
               "saying gravel, dirt, ground, grass, ...) are excluded."),
        Option("top_speed", "number", top_speed, TOP_SPEED.description, 10.0, 252.0),
    )


_MOTO = (
    USE_HIGHWAYS,
    USE_TOLLS,
    USE_FERRY,
    _pref("use_trails", "tracks and unpaved roads", 0.0),
    SHORTEST,
)

TABLES: dict[str, tuple[Option, ...]] = {
    "auto": _auto_table(1.9, 1.6, 140.0, False),
    "auto_shorter": _auto_table(1.9, 1.6, 140.0, True),
    "bus": _auto_table(3.5, 2.55, 100.0, False),
    "taxi": _auto_table(1.9, 1.6, 140.0, False),
    "truck": (
        Option("height", "number", 4.11, "Truck height in metres; roads with a lower maxheight are excluded.", 0.0, 10.0),
        Option("width", "number", 2.6, "Truck width in metres; roads with a lower maxwidth are excluded.", 0.0, 10.0),
        Option("length", "number", 21.64, "Truck length in metres; roads with a lower maxlength are excluded.", 0.0, 50.0),
        Option("weight", "number", 21.77, "Truck weight in tonnes; roads with a lower maxweight are excluded.", 0.0, 100.0),
        Option("axle_load", "number", 9.07, "Load per axle in tonnes; roads with a lower maxaxleload are excluded.",
               0.0, 40.0),
        Option("axle_count", "integer", 5, "Number of axles; roads with a lower maxaxles are excluded.", 2, 20),
        Option("hazmat", "boolean", False, "When true the truck carries hazardous materials: roads tagged "
               "hazmat=no (or hazmat:*=no) are excluded."),
        USE_HIGHWAYS,
        USE_TOLLS,
        USE_FERRY,
        SHORTEST,
        Option("top_speed", "number", 90.0, TOP_SPEED.description, 10.0, 252.0),
    ),
    "bicycle": (
        Option("bicycle_type", "string", "Hybrid", "Kind of bicycle: sets the default speed and how much each "
               "surface slows it (Road is hurt most by rough surfaces, Mountain least).", enum=BICYCLE_TYPES),
        Option("cycling_speed", "number", None, "Average speed in km/h on smooth flat roads; by default "
               "Road 25, Cross 20, Hybrid 18, City 18, Mountain 16.", 5.0, 60.0),
        Option("use_roads", "number", 0.5, "Willingness to ride on roads with motor traffic: 0 prefers "
               "cycleways and paths strongly, 1 takes roads as they come.", 0.0, 1.0),
        Option("use_hills", "number", 0.5, "Willingness to climb hills: 0 avoids climbs strongly (steep ones "
               "most), 1 takes the quickest way whatever it climbs. Uses the grades of bundles built with a "
               "DEM; without them it has no effect (a warning says so).", 0.0, 1.0),
        USE_FERRY,
        Option("avoid_bad_surfaces", "number", 0.25, "How much to avoid surfaces rough for the bicycle type: "
               "0 ignores surface, 1 excludes surfaces the type cannot ride.", 0.0, 1.0),
        SHORTEST,
    ),
    "pedestrian": (
        Option("walking_speed", "number", 5.1, "Walking speed in km/h.", 0.5, 25.0),
        Option("walkway_factor", "number", 1.0, "Cost factor on footways, paths and pedestrian streets "
               "(below 1 prefers them).", 0.1, 100.0),
        Option("sidewalk_factor", "number", 1.0, "Cost factor on roads with a sidewalk and on sidewalks "
               "(footway=sidewalk).", 0.1, 100.0),
        Option("alley_factor", "number", 2.0, "Cost factor on alleys (service=alley).", 0.1, 100.0),
        Option("driveway_factor", "number", 5.0, "Cost factor on driveways (service=driveway).", 0.1, 100.0),
        _penalty("step_penalty", "flight of steps (highway=steps)", 0.0),
        Option("use_ferry", "number", 1.0, USE_FERRY.description, 0.0, 1.0),
        _pref("use_living_streets", "living streets (highway=living_street)", 0.6),
        _pref("use_tracks", "tracks (highway=track)", 0.5),
        Option("use_hills", "number", 0.5, "Willingness to climb hills: 0 avoids climbs and steep descents "
               "strongly, 1 takes the quickest way whatever it climbs. Uses the grades of bundles built with "
               "a DEM; without them it has no effect (a warning says so).", 0.0, 1.0),
        Option("use_lit", "number", 0.0, "Preference for lit ways: 0 ignores lighting, 1 doubles the cost of "
               "ways not tagged lit.", 0.0, 1.0),
        SHORTEST,
        Option("max_hiking_difficulty", "integer", 1, "Hardest sac_scale allowed (1 hiking ... 6 "
               "difficult_alpine_hiking); paths tagged harder are excluded.", 1, 6),
    ),
    "motorcycle": (
        Option("use_highways", "number", 1.0, USE_HIGHWAYS.description, 0.0, 1.0),
        *_MOTO[1:],
    ),
    "motor_scooter": _MOTO,
}

USAGE = ("Send options in costing_options, flat ({{\"{first}\": ...}}) or under the costing key "
         "({{\"{costing}\": {{\"{first}\": ...}}}}).")


def _table(costing: str) -> dict[str, Option]:
    return {o.name: o for o in TABLES[costing]}


def check_costing(costing: Any, field_name: str = "costing", allowed: tuple[str, ...] = COSTINGS) -> str:
    """The costing name, or InvalidRequest naming the allowed ones."""
    if not isinstance(costing, str) or costing not in allowed:
        raise InvalidRequest.field(field_name, f"unknown costing {costing!r}; allowed: {', '.join(allowed)}")
    return costing


@dataclass(frozen=True)
class Options:
    """Validated options of one costing with every default filled in (`values`); `given` names the
    options the request set. Immutable; `fingerprint` is stable across processes."""

    costing: str
    values: Mapping[str, Any]
    given: frozenset[str] = field(default_factory=frozenset)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    @property
    def fingerprint(self) -> str:
        doc = json.dumps({"costing": self.costing, "values": dict(sorted(self.values.items()))}, sort_keys=True)
        return hashlib.sha256(doc.encode()).hexdigest()[:16]

    @property
    def is_default(self) -> bool:
        """True when every value equals the costing's default (a prebuilt CH for the costing applies)."""
        return self.fingerprint == default_options(self.costing).fingerprint


def _resolve(costing: str, values: dict) -> dict:
    if costing == "bicycle" and values.get("cycling_speed") is None:
        values["cycling_speed"] = CYCLING_SPEED[values["bicycle_type"]]
    return values


def default_options(costing: str) -> Options:
    """Options of `costing` with every default (bicycle's cycling_speed resolved from bicycle_type); one
    object per costing (Options is immutable)."""
    got = _DEFAULTS.get(costing)
    if got is None:
        check_costing(costing)
        values = {o.name: o.default for o in TABLES[costing]}
        got = _DEFAULTS[costing] = Options(costing, MappingProxyType(_resolve(costing, values)), frozenset())
    return got


_DEFAULTS: dict[str, Options] = {}


def _check_value(opt: Option, value: Any, path: str) -> tuple[Any, FieldError | None]:
    if opt.type == "boolean":
        if not isinstance(value, bool):
            return None, FieldError(path, f"must be a boolean (true or false), got {value!r}")
        return value, None
    if opt.type == "string":
        if not isinstance(value, str) or (opt.enum and value not in opt.enum):
            allowed = ", ".join(opt.enum or ())
            return None, FieldError(path, f"must be one of {allowed}, got {value!r}")
        return value, None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, FieldError(path, f"must be a {opt.type}, got {value!r}")
    if opt.type == "integer":
        if isinstance(value, float):
            if not value.is_integer():
                return None, FieldError(path, f"must be an integer, got {value!r}")
            value = int(value)
    else:
        value = float(value)
        if value != value or value in (float("inf"), float("-inf")):
            return None, FieldError(path, f"must be a finite number, got {value!r}")
    if opt.minimum is not None and value < opt.minimum:
        return None, FieldError(path, f"must be >= {opt.minimum:g}, got {value!r}")
    if opt.maximum is not None and value > opt.maximum:
        return None, FieldError(path, f"must be <= {opt.maximum:g}, got {value!r}")
    return value, None


def parse_costing_options(costing: str, raw: Any, *, field_name: str = "costing_options",
                          costing_field: str = "costing") -> Options:
    """Validate a request's costing options against the costing's table and return `Options`.

    `raw` is None, a flat object `{"use_highways": 0.3}` or an object nested under the costing's own
    key `{"auto": {"use_highways": 0.3}}` (keys of other costings are ignored, as Valhalla does). Unknown names (listing the allowed ones), wrong types and
    out-of-range values raise InvalidRequest with one FieldError per problem, at paths like
    `costing_options.use_highways` or `costing_options.auto.use_highways`.
    """
    check_costing(costing, costing_field)
    table = _table(costing)
    if raw is None:
        return default_options(costing)
    if not isinstance(raw, Mapping):
        raise InvalidRequest.field(field_name, "must be an object")
    path = field_name
    nested_keys = [k for k in raw if k in COSTINGS]
    if nested_keys:
        # Options nested under other costings' keys are ignored, as Valhalla does (a client may send the
        # options of every mode it offers and switch only the costing).
        others = [k for k in raw if k not in COSTINGS]
        if others:
            raise InvalidRequest(errors=[FieldError(f"{field_name}.{k}", "mixes flat options with options nested "
                                                    "under a costing key") for k in others])
        raw = raw.get(costing)
        path = f"{field_name}.{costing}"
        if raw is None:
            return default_options(costing)
        if not isinstance(raw, Mapping):
            raise InvalidRequest.field(path, "must be an object")
    errors: list[FieldError] = []
    values = {o.name: o.default for o in TABLES[costing]}
    given = set()
    for name, value in raw.items():
        opt = table.get(name)
        if opt is None:
            errors.append(FieldError(f"{path}.{name}", f"unknown option for costing '{costing}'; allowed: "
                                     f"{', '.join(table)}"))
            continue
        if value is None and opt.default is None:
            continue
        checked, err = _check_value(opt, value, f"{path}.{name}")
        if err:
            errors.append(err)
            continue
        values[name] = checked
        given.add(name)
    if errors:
        raise InvalidRequest(errors=errors)
    return Options(costing, MappingProxyType(_resolve(costing, values)), frozenset(given))


def options_object(costing: str, extra: dict | None = None, openapi: bool = False) -> dict:
    """The JSON Schema object of a costing's options (unknown names refused), `extra` properties added.
    `openapi`: an option without a default also takes null (as a request's model reads it)."""
    props = dict(extra or {})
    for o in TABLES[costing]:
        s = o.schema()
        props[o.name] = {"anyOf": [s, {"type": "null"}]} if openapi and o.default is None else s
    return {"type": "object", "additionalProperties": False, "properties": props}


def request_options_rule(costings, default: str, extra: dict | None = None) -> dict:
    """The OpenAPI rule of a request's `costing_options`: null, the costing's options flat, or objects under
    costing keys of which only the request's own costing is read (other costings' keys are ignored, as
    Valhalla does); one branch per costing (an absent costing is `default`). anyOf, not if/then:
    generators expand each if/then into two branches, and nine of them are 512 combinations."""

    def options_of(c: str) -> dict:
        flat = options_object(c, extra, openapi=True)
        nested = {"type": "object", "minProperties": 1, "propertyNames": {"enum": list(COSTINGS)},
                  "properties": {c: {"anyOf": [flat, {"type": "null"}]}}}
        return {"anyOf": [{"type": "null"}, flat, nested]}

    return {"anyOf": [{"properties": {"costing": {"const": c}, "costing_options": options_of(c)},
                       **({} if c == default else {"required": ["costing"]})} for c in costings]}


def costing_options_schema(costing: str) -> dict:
    """Body of GET /costing/options/{costing}: `costing`, `options` (a JSON-schema object whose
    `properties` map each option name to type, minimum, maximum, default, description) and `usage`."""
    check_costing(costing)
    table = TABLES[costing]
    return {"costing": costing, "options": options_object(costing),
            "usage": USAGE.format(costing=costing, first=table[0].name)}
