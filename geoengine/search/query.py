"""Reading a geocoding query as people type it: coordinates, `[key=value]` phrases, house numbers and
street-type abbreviations.

- `extract_coordinates(q)`: a coordinate pair at the start or the end of the query, in decimal degrees
  ("47.16, 9.51", "-33.9 151.2", "[47.16 9.51]"), with hemispheres ("47.16N 9.51E", "N 47.16 E 9.51",
  "33.9 S, 151.2 E") or in degrees-minutes(-seconds) ("47°09'36\"N 9°30'36\"E", "47° 9.6' N 9° 30.6' E",
  "N 47 9 36 E 9 30 36"). Returns (the rest of the query, lat, lon); a bare pair of integers ("11 20")
  is never read as coordinates: each half needs a decimal point, a degree sign or a hemisphere letter.
- `extract_osm_tag(q)`: "[amenity=restaurant] Vaduz" -> ("Vaduz", "amenity", "restaurant").
- `is_housenumber(token)`: a normalised token that can be a house number (11, 93a, 5b).
- `Abbreviations`: the street-type and title abbreviations of `data/search/abbreviations.json`, derived
  by `vendor/search-abbrev/generate.py` from Nominatim's maintained lists (settings/icu-rules, which
  take them from the OSM wiki's Name_finder:Abbreviations and USPS Pub. 28). `variants(token)` gives the
  words a query word may stand for: "av" -> avinguda, avenida, avenue, ...; "c" -> carrer, calle, ...;
  "hauptstr" -> hauptstrasse (a compound suffix, `~strasse -> str`); and a full word its short forms.
  Nothing here is a hand-typed abbreviation list.
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from pathlib import Path

from geoengine.config import data_path
from geoengine.search.text import normalise

# ------------------------------------------------------------------------------------------ coordinates
_HEMI = "NSEWnsew"
_NUM = r"\d{1,3}(?:\.\d+)?"
_SUB = r"\d{1,2}(?:\.\d+)?"


def _one(a: str, hemi: str) -> str:
    """One coordinate: a hemisphere before it (hemi "pre"), after it ("post") or none, an optional sign,
    degrees, optional minutes and seconds."""
    pre = rf"(?P<{a}h1>[{_HEMI}])\s*" if hemi == "pre" else rf"(?P<{a}h1>)"
    post = rf"\s*(?P<{a}h2>[{_HEMI}])(?![A-Za-z])" if hemi == "post" else rf"(?P<{a}h2>)"
    return (pre + rf"(?P<{a}sg>[+-])?(?P<{a}d>{_NUM})\s*(?P<{a}deg>[°º])?"
            rf"(?:\s*(?P<{a}m>{_SUB})\s*(?P<{a}ms>['′’]|(?=\s))"
            rf"(?:\s*(?P<{a}s>{_SUB})\s*(?P<{a}ss>\"|″|”|''|(?=\s|[{_HEMI}]|$)))?)?" + post)


_FORMS = []
for _h in ("pre", "post", "none"):
    _PAIR = _one("a", _h) + r"\s*[,;/]?\s*" + _one("b", _h)
    _FORMS.append(re.compile(r"^\s*\[?\s*" + _PAIR + r"\s*\]?(?:\s*[,;]?\s+|\s*[,;]\s*|\s*$)(?P<rest>.*)$", re.S))
    _FORMS.append(re.compile(r"^(?P<rest>.*?)(?:^|\s+|[,;]\s*)\[?\s*" + _PAIR + r"\s*\]?\s*$", re.S))


def _value(m: re.Match, a: str) -> tuple[float, str | None] | None:
    """(signed degrees, hemisphere letter upper-cased or None) of coordinate `a`, None when not one."""
    h1, h2 = m.group(a + "h1"), m.group(a + "h2")
    hemi = (h1 or h2 or "").upper() or None
    deg_sym = m.group(a + "deg") is not None
    d = m.group(a + "d")
    mins, secs = m.group(a + "m"), m.group(a + "s")
    if not (hemi or deg_sym or "." in d):
        return None  # a bare integer is a house number or a postcode, not a coordinate
    if mins is not None and not (hemi or deg_sym or m.group(a + "ms") in "'′’"):
        return None
    if mins is not None and "." in d or secs is not None and "." in (mins or ""):
        return None
    val = float(d) + (float(mins) / 60.0 if mins else 0.0) + (float(secs) / 3600.0 if secs else 0.0)
    if mins and float(mins) >= 60 or secs and float(secs) >= 60:
        return None
    if m.group(a + "sg") == "-":
        if hemi:
            return None
        val = -val
    if hemi in ("S", "W"):
        val = -val
    return val, hemi


def _pair(m: re.Match) -> tuple[float, float] | None:
    a, b = _value(m, "a"), _value(m, "b")
    if a is None or b is None:
        return None
    (va, ha), (vb, hb) = a, b
    if ha in ("E", "W") and hb in ("N", "S", None) or hb in ("N", "S") and ha is None:
        va, vb, ha, hb = vb, va, hb, ha  # longitude given first
    if ha in ("E", "W") or hb in ("N", "S"):
        return None
    lat, lon = va, vb
    if not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0) or math.isnan(lat) or math.isnan(lon):
        return None
    return lat, lon


def extract_coordinates(q: str) -> tuple[str, float | None, float | None]:
    """(the query without the coordinates, lat, lon); (q, None, None) when it holds none at its start or end."""
    for rx in _FORMS:
        m = rx.match(q)
        if m is not None:
            ll = _pair(m)
            if ll is not None:
                return m.group("rest").strip(" ,;"), ll[0], ll[1]
    return q, None, None


# ------------------------------------------------------------------------------------------ [key=value]
_TAG = re.compile(r"\[\s*([A-Za-z_:]+)\s*=\s*([A-Za-z0-9_:;-]+)\s*\]")


def extract_osm_tag(q: str) -> tuple[str, str | None, str | None]:
    """(the query without it, key, value) of a "[key=value]" phrase; (q, None, None) without one."""
    m = _TAG.search(q)
    if m is None:
        return q, None, None
    return (q[:m.start()] + " " + q[m.end():]).strip(" ,"), m.group(1), m.group(2)


# ------------------------------------------------------------------------------------------ house numbers
_HOUSE = re.compile(r"^\d{1,5}[a-z]{0,3}$|^[a-z]\d{1,4}$|^\d{1,5}[a-z]?-\d{1,5}[a-z]?$")
# a range or a fraction typed as one number ("3-7", "12/1"): one query word, as the number of its document
_RANGE = re.compile(r"(?<![\w.])(\d{1,5}[A-Za-z]?)\s*[-/]\s*(\d{1,5}[A-Za-z]?)(?![\w.])")


def is_housenumber(token: str) -> bool:
    """A normalised token that can be a house number: 11, 93a, 12bis, b3, 3-7."""
    return bool(_HOUSE.match(token))


# ------------------------------------------------------------------------------------------ abbreviations
def _data_file() -> Path:
    return data_path("search/abbreviations.json")


MIN_SUFFIX_STEM = 2  # "austr" -> "au" + strasse: a compound needs a stem of 2 letters or more


class Abbreviations:
    """Word variants of the abbreviation table (single words; multi-word rules are left out)."""

    def __init__(self, table: dict):
        self.meta = table.get("meta", {})
        self.word: dict[str, set[str]] = {}  # a word -> the words it may stand for (both directions)
        self.suffix: dict[str, set[str]] = {}  # a compound's short ending -> its full endings
        self.suffix_full: dict[str, set[str]] = {}  # a compound's full ending -> its short endings
        for rules in table.get("languages", {}).values():
            for r in rules:
                full = [w for w in r["full"] if " " not in w]
                abbr = [w for w in r["abbr"] if " " not in w]
                for f in full:
                    for a in abbr:
                        if r.get("suffix"):
                            self.suffix.setdefault(a, set()).add(f)
                            if len(a) >= 2:
                                self.suffix_full.setdefault(f, set()).add(a)
                        self.word.setdefault(a, set()).add(f)
                        if len(a) >= 2:  # a full word's one-letter short forms would match every initial
                            self.word.setdefault(f, set()).add(a)
        self._suffix_keys = sorted(self.suffix, key=len, reverse=True)
        self._suffix_full_keys = sorted(self.suffix_full, key=len, reverse=True)

    @lru_cache(maxsize=8192)  # noqa: B019 (one table per process)
    def variants(self, token: str) -> tuple[str, ...]:
        """The token itself first, then the words it may stand for."""
        out = [token]
        for w in sorted(self.word.get(token, ())):
            if w not in out:
                out.append(w)
        for keys, table in ((self._suffix_keys, self.suffix), (self._suffix_full_keys, self.suffix_full)):
            for s in keys:
                if len(token) - len(s) >= MIN_SUFFIX_STEM and token.endswith(s):
                    stem = token[:-len(s)]
                    for f in sorted(table[s]):
                        if stem + f not in out:
                            out.append(stem + f)
                    break
        return tuple(out)


@lru_cache(maxsize=1)
def abbreviations() -> Abbreviations:
    return Abbreviations(json.loads(_data_file().read_text(encoding="utf-8")))


def query_tokens(text: str) -> list[str]:
    """The normalised words of a query ("c/ de la Unió" -> ["c", "de", "la", "unio"]); a number range or
    fraction stays one word ("Landstrasse 3-7" -> ["landstrasse", "3-7"], "12/1" -> "12-1")."""
    ranges: list[str] = []

    def mark(m: re.Match) -> str:
        ranges.append(f"{m.group(1).lower()}-{m.group(2).lower()}")
        return f" qqrange{len(ranges) - 1}qq "

    n = normalise(_RANGE.sub(mark, text))
    toks = n.split() if n else []
    if ranges:
        toks = [ranges[int(t[7:-2])] if t.startswith("qqrange") and t.endswith("qq") and t[7:-2].isdigit() else t
                for t in toks]
    return toks
