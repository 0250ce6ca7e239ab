"""Instructions from locale templates (`data/locales/<tag>.json`), distances rounded per unit.

`render(maneuvers, language, units, directions_type)` turns maneuvers into plain dicts with the text of
each instruction in the requested language. Supported languages: `SUPPORTED_LANGUAGES`; a tag is matched
on its primary subtag (`fr-FR`, `fr_CA`, `FR` all give French; `en`, `en-GB` give `en-US`). An unsupported
language raises InvalidRequest listing the supported ones; nothing ever falls back silently.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

from ..config import data_path
from ..errors import InvalidRequest
from .maneuvers import METERS_PER_MILE, Maneuver, ManeuverType, normalize_units

__all__ = ["SUPPORTED_LANGUAGES", "DIRECTIONS_TYPES", "resolve_language", "load_locale", "format_distance",
           "round_distance", "ordinal", "render", "render_rows", "narrate", "Locale"]

#: locale file (tag) per primary language subtag
_LOCALE_BY_PRIMARY = {"en": "en-US", "hi": "hi", "fr": "fr", "de": "de", "es": "es", "ar": "ar"}
SUPPORTED_LANGUAGES = ("en-US", "en", "hi", "fr", "de", "es", "ar")
DIRECTIONS_TYPES = ("none", "maneuvers", "instructions")
#: a supported primary subtag (any case) with optional region/script subtags; the OpenAPI document
#: states this same pattern (JSON Schema regexes have no inline flags, hence the classes)
LANGUAGE_PATTERN = "^(" + "|".join("".join(f"[{c.upper()}{c}]" for c in p) for p in _LOCALE_BY_PRIMARY) + \
    ")([-_][A-Za-z0-9]{1,8})*$"
_TAG_RE = re.compile(LANGUAGE_PATTERN)
_FEET_PER_METER = 3.28084


def _locales_dir() -> Path:
    return data_path("locales")


def resolve_language(tag: str | None, field: str = "directions_options.language") -> str:
    """The locale tag (file name) for a language tag; InvalidRequest for anything unsupported."""
    if tag is None:
        return "en-US"
    t = str(tag)
    primary = t.replace("_", "-").split("-")[0].lower()
    if not _TAG_RE.fullmatch(t) or primary not in _LOCALE_BY_PRIMARY:
        raise InvalidRequest.field(
            field, f"unsupported language '{tag}'; supported languages: {', '.join(SUPPORTED_LANGUAGES)} "
                   "(region variants such as fr-FR are accepted)")
    return _LOCALE_BY_PRIMARY[primary]


class Locale:
    """One locale file: templates, unit words with plural forms, ordinals, cardinal directions, digits."""

    def __init__(self, tag: str, data: dict):
        self.tag = tag
        self.data = data
        self.templates: dict[str, dict[str, str]] = data["templates"]
        self.decimal = data.get("decimal_separator", ".")
        digits = data.get("digits")
        self._digits = str.maketrans("0123456789", digits) if digits else None
        self.plural_rule = data.get("plural_rule", "one_is_1")
        self.lowercase_after_alert = bool(data.get("lowercase_after_alert", False))
        self.list_separator = data.get("street_separator", "/")
        #: how the street names of one maneuver are joined when spoken (verbal_pre_transition_instruction)
        self.spoken_separator = data.get("spoken_street_separator", ", ")
        self._phrases: dict[tuple, str] = {}  # (value, unit, prepositional) -> phrase; bounded by rounding

    # numbers ---------------------------------------------------------------------------------------
    def number(self, value: float | int) -> str:
        if isinstance(value, float) and not value.is_integer():
            s = f"{value:.1f}".replace(".", self.decimal)
        else:
            s = str(int(value))
        return s.translate(self._digits) if self._digits else s

    def plural_category(self, value: float | int) -> str:
        rule = self.plural_rule
        integer = float(value).is_integer()
        if rule == "fr":  # 0 <= v < 2 is singular
            return "one" if value < 2 else "other"
        if rule == "ar":
            if not integer:
                return "other"
            n = int(value)
            if n == 0:
                return "zero"
            if n == 1:
                return "one"
            if n == 2:
                return "two"
            if 3 <= n % 100 <= 10:
                return "few"
            if 11 <= n % 100 <= 99:
                return "many"
            return "other"
        return "one" if integer and int(value) == 1 else "other"

    def unit_phrase(self, value: float | int, unit: str, prepositional: bool = False) -> str:
        key = (value, unit, prepositional)
        phrase = self._phrases.get(key)
        if phrase is None:
            phrase = self._unit_phrase(value, unit, prepositional)
            if len(self._phrases) < 4096:
                self._phrases[key] = phrase
        return phrase

    def _unit_phrase(self, value: float | int, unit: str, prepositional: bool) -> str:
        table = self.data["units_in"] if prepositional and "units_in" in self.data else self.data["units"]
        forms = table[unit]
        cat = self.plural_category(value)
        pattern = forms.get(cat) or forms["other"]
        return pattern.replace("{value}", self.number(value))

    def ordinal(self, n: int) -> str:
        words = self.data["ordinals"]
        if 1 <= n <= len(words):
            return words[n - 1]
        suffixes = self.data.get("ordinal_suffixes")
        if suffixes:  # English-style: 11th-13th, else by last digit
            key = "other" if 11 <= n % 100 <= 13 else str(n % 10)
            return f"{self.number(n)}{suffixes.get(key, suffixes['other'])}"
        return self.data["ordinal_fallback"].replace("{n}", self.number(n))

    def cardinal(self, bearing: float) -> str:
        return self.data["cardinal"][int(((bearing % 360) + 22.5) // 45) % 8]


@cache
def load_locale(tag: str) -> Locale:
    path = _locales_dir() / f"{tag}.json"
    with path.open(encoding="utf-8") as f:
        return Locale(tag, json.load(f))


def round_distance(meters: float, units: str) -> tuple[float | int, str]:
    """(value, unit) of a distance rounded for speech: metres to 10 below 100 m and to 50 below 1 km, then
    km to 0.1 below 10 km and whole km above; feet to 10 below 100 ft and to 50 below 0.1 mi, then miles to
    0.1 below 10 mi and whole miles above."""
    return _round_distance(meters, normalize_units(units))


def _round_distance(meters: float, units: str) -> tuple[float | int, str]:
    """`round_distance` for units already normalised."""
    m = max(float(meters), 0.0)
    if units == "kilometers":
        if m < 975:
            v = max(10, int(round(m / 10.0)) * 10) if m < 95 else int(round(m / 50.0)) * 50
            return v, "meters"
        km = m / 1000.0
        if km < 9.95:
            v = round(km, 1)
            return (int(v) if v.is_integer() else v), "kilometers"
        return int(round(km)), "kilometers"
    mi = m / METERS_PER_MILE
    if mi < 0.095:
        ft = m * _FEET_PER_METER
        v = max(10, int(round(ft / 10.0)) * 10) if ft < 95 else int(round(ft / 50.0)) * 50
        return v, "feet"
    if mi < 9.95:
        v = round(mi, 1)
        return (int(v) if v.is_integer() else v), "miles"
    return int(round(mi)), "miles"


def format_distance(meters: float, units: str, language: str = "en-US", prepositional: bool = False) -> str:
    """A rounded distance in words of the language, e.g. '200 meters', '0.3 miles', '1,5 kilomètre'."""
    loc = load_locale(resolve_language(language))
    value, unit = round_distance(meters, units)
    return loc.unit_phrase(value, unit, prepositional)


def ordinal(n: int, language: str = "en-US") -> str:
    return load_locale(resolve_language(language)).ordinal(n)


_GROUP = {
    ManeuverType.START: "start", ManeuverType.START_RIGHT: "start", ManeuverType.START_LEFT: "start",
    ManeuverType.DESTINATION: "destination", ManeuverType.DESTINATION_RIGHT: "destination",
    ManeuverType.DESTINATION_LEFT: "destination",
}
_SIDE_VARIANT = {"destination", "break", "via"}
#: arrivals are announced in the future tense, not as the instruction itself
_ARRIVAL_ALERT = {ManeuverType.DESTINATION: "arrive_alert", ManeuverType.DESTINATION_RIGHT: "arrive_alert",
                  ManeuverType.DESTINATION_LEFT: "arrive_alert", ManeuverType.VIA: "via_alert"}


_FIELD = re.compile(r"\{(\w+)\}")
#: template -> True when `str.format_map` fills it exactly as the `{name}` substitution would
_FORMAT_SAFE: dict[str, bool] = {}


def _safe(template: str) -> bool:
    """Whether `str.format_map` fills the template exactly as the `{name}` substitution would."""
    safe = _FORMAT_SAFE.get(template)
    if safe is None:  # once per template of the locale files: only `{name}` fields, no other braces
        rest = _FIELD.sub("", template)
        safe = "{" not in rest and "}" not in rest and not any(f[0].isdigit() for f in _FIELD.findall(template))
        _FORMAT_SAFE[template] = safe
    return safe


def _fill(template: str, values: dict[str, str]) -> str:
    """The template with each `{name}` replaced by `values[name]`."""
    if _safe(template):
        return template.format_map(values)
    return _FIELD.sub(lambda m: values[m.group(1)], template)


#: maneuver type code -> template group
_GROUP_OF = {int(t): _GROUP.get(t, t.key) for t in ManeuverType}
_KEY_OF = {int(t): t.key for t in ManeuverType}
_ARRIVAL_OF = {int(t): a for t, a in _ARRIVAL_ALERT.items()}
_ROUNDABOUT_ENTER = int(ManeuverType.ROUNDABOUT_ENTER)


class _Speech:
    """What `render_rows` looks up per maneuver, made once per locale: each template with its fields (and
    whether `str.format_map` fills it, see `_fill`), and the post-transition phrase of each rounded
    distance."""

    def __init__(self, loc: Locale):
        self.templates: dict[tuple[str, str], tuple[str, bool, bool, bool]] = {}
        for group, variants in loc.templates.items():
            for variant, t in variants.items():
                fields = set(_FIELD.findall(t))
                self.templates[group, variant] = (t, _safe(t), "stop" in fields, "cardinal" in fields)
        v = loc.data["verbal"]
        self.verbal = v
        self.alert, self.alert_safe = v["alert"], _safe(v["alert"])
        self.post, self.post_safe = v["post"], _safe(v["post"])
        self._posts: dict[tuple, tuple[str, str]] = {}  # (value, unit) -> (post text, distance_in)

    def post_phrases(self, loc: Locale, value, unit: str) -> tuple[str, str]:
        """(the post-transition instruction, the distance in words after a preposition) of a distance."""
        key = (value, unit)
        got = self._posts.get(key)
        if got is None:
            distance_in = loc.unit_phrase(value, unit, True)
            values = {"distance": loc.unit_phrase(value, unit), "distance_in": distance_in}
            got = (self.post.format_map(values) if self.post_safe else _fill(self.post, values), distance_in)
            if len(self._posts) < 4096:
                self._posts[key] = got
        return got


def _speech(loc: Locale) -> _Speech:
    sp = getattr(loc, "_speech", None)
    if sp is None:
        sp = loc._speech = _Speech(loc)
    return sp


def _instruction(loc: Locale, sp: _Speech, code: int, names: list[str], bearing_after: int,
                 stop_index: int | None, side: str | None, exit_count: int | None, exit_names: list[str],
                 previous_names: list[str], sep: str | None = None) -> tuple[str, str]:
    """(instruction text, template used) of one maneuver (type code `code`); `sep` joins the street names
    (default the locale's written separator)."""
    group = _GROUP_OF[code]
    if group == "destination" and stop_index is not None:
        group = "break"
    if sep is None:
        sep = loc.list_separator
    street = sep.join(names)
    previous = sep.join(previous_names)
    ordinal = ""
    if group in _SIDE_VARIANT:
        variant = side if side in ("left", "right") else "plain"
    elif group == "roundabout_enter":
        exit_street = sep.join(exit_names)
        if exit_count:
            ordinal = loc.ordinal(exit_count)
            street = exit_street
            variant = "exit_street" if exit_street else "exit"
        else:
            variant = "plain"
    elif group == "becomes":
        if street and previous:
            variant = "street"
        else:
            group, variant = "continue", ("street" if street else "plain")
    else:
        variant = "street" if street else "plain"
    template, safe, stop, cardinal = sp.templates[group, variant]
    values = {"street": street, "previous_street": previous, "ordinal": ordinal}
    if stop:
        values["stop"] = loc.number(stop_index or 0)
    if cardinal:
        values["cardinal"] = loc.cardinal(bearing_after)
    return (template.format_map(values) if safe else _fill(template, values)), template


#: a maneuver as `render_rows` reads it: (type code, street_names, length_m, time_s, begin_shape_index,
#: end_shape_index, bearing_before, bearing_after, roundabout_exit_count, side, stop_index, stop_kind,
#: exit_street_names, previous_street_names, and three the caller may use: cost, begin_edge, end_edge)
Row = tuple


def _options(language, units, directions_type, language_field) -> tuple[Locale, str, str]:
    dtype = directions_type or "instructions"
    if dtype not in DIRECTIONS_TYPES:
        raise InvalidRequest.field("directions_options.directions_type",
                                   f"unsupported directions_type '{directions_type}'; use one of: "
                                   f"{', '.join(DIRECTIONS_TYPES)}")
    units = normalize_units(units)
    return load_locale(resolve_language(language, language_field)), units, dtype


def render(maneuvers: list[Maneuver], language: str | None = "en-US", units: str | None = "kilometers",
           directions_type: str | None = "instructions", *, language_field: str = "directions_options.language"
           ) -> list[dict]:
    """Maneuvers as dicts: type (name), type_code, street_names, length (in `units`), length_m, time,
    begin/end_shape_index, bearing_before/after, roundabout_exit_count, side, stop_index; with
    directions_type 'instructions' also instruction and the verbal forms. 'none' gives []."""
    loc, units, dtype = _options(language, units, directions_type, language_field)
    if dtype == "none":
        return []
    return render_rows(loc, units, dtype, [
        (int(m.type), m.street_names, m.length_m, m.time_s, m.begin_shape_index, m.end_shape_index, m.bearing_before,
         m.bearing_after, m.roundabout_exit_count, m.side, m.stop_index, m.stop_kind, m.exit_street_names,
         m.previous_street_names, None, m.begin_edge, m.end_edge) for m in maneuvers])


def render_rows(loc: Locale, units: str, dtype: str, rows: list[Row]) -> list[dict]:
    """`render` of maneuvers given as `Row` tuples, for a locale, normalised units and a directions_type
    of 'maneuvers' or 'instructions' already checked."""
    unit_m = 1000.0 if units == "kilometers" else METERS_PER_MILE
    instructions = dtype == "instructions"
    if instructions:
        sp = _speech(loc)
        verbal, alert_t, alert_safe = sp.verbal, sp.alert, sp.alert_safe
        lower = loc.lowercase_after_alert
    out: list[dict] = []
    distance_in = None  # the previous maneuver's length in words (prepositional), when it has a length
    for (code, names, length_m, time_s, begin, end, before, after, exit_count, side, stop_index, stop_kind,
         exit_names, previous_names, _, _, _) in rows:
        d = {
            "type": _KEY_OF[code],
            "type_code": code,
            "street_names": list(names),
            "length": round(length_m / unit_m, 3),
            "length_m": round(length_m, 1),
            "time": round(time_s, 3),
            "begin_shape_index": begin,
            "end_shape_index": end,
            "bearing_before": before,
            "bearing_after": after,
            "roundabout_exit_count": exit_count,
        }
        if side is not None:
            d["side"] = side
        if stop_index is not None:
            d["stop_index"] = stop_index
            d["stop_kind"] = stop_kind
        if code == _ROUNDABOUT_ENTER and exit_names:
            d["exit_street_names"] = list(exit_names)
        if instructions:
            text, template = _instruction(loc, sp, code, names, after, stop_index, side, exit_count, exit_names,
                                          previous_names)
            d["instruction"] = text
            if len(names) > 1 or len(exit_names) > 1 or len(previous_names) > 1:  # names spoken as a list
                d["verbal_pre_transition_instruction"] = _instruction(
                    loc, sp, code, names, after, stop_index, side, exit_count, exit_names, previous_names,
                    loc.spoken_separator)[0]
            else:
                d["verbal_pre_transition_instruction"] = text
            if distance_in is not None:
                arrival = _ARRIVAL_OF.get(code)
                if arrival is not None:
                    if arrival == "arrive_alert" and stop_index is not None:
                        arrival = "break_alert"
                    alert = _fill(verbal[arrival], {"distance_in": distance_in, "stop": loc.number(stop_index or 0)})
                else:
                    body = text
                    if lower and not template.startswith("{"):
                        body = body[:1].lower() + body[1:] if body else body
                    values = {"distance_in": distance_in, "instruction": body}
                    alert = alert_t.format_map(values) if alert_safe else _fill(alert_t, values)
                d["verbal_transition_alert_instruction"] = alert
            if length_m > 0:
                post, distance_in = sp.post_phrases(loc, *_round_distance(length_m, units))
                d["verbal_post_transition_instruction"] = post
            else:
                distance_in = None
        out.append(d)
    return out


def narrate(path, language: str | None = "en-US", units: str | None = "kilometers",
            directions_type: str | None = "instructions", *, language_field: str = "directions_options.language"
            ) -> list[dict]:
    """`render(build_maneuvers(path, units), ...)`, with the language and options checked BEFORE any work."""
    from .maneuvers import build_maneuvers

    resolve_language(language, language_field)
    units = normalize_units(units)
    if (directions_type or "instructions") == "none":
        render([], language, units, directions_type, language_field=language_field)
        return []
    return render(build_maneuvers(path, units), language, units, directions_type, language_field=language_field)
