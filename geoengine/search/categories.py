"""Search categories: the multilingual vocabulary of OSM presets, categories of a document's tags, and
the category words of a query.

The vocabulary is `data/search/categories.json`, derived by `vendor/search-vocab/generate.py` from the
npm package @openstreetmap/id-tagging-schema (iD's presets and their translations; ISC licence, version
recorded in the file): for every preset (`amenity/pharmacy`) its tags (amenity=pharmacy; a second tag for
presets such as `amenity/fast_food/pizza`), and per language (en, fr, de, es, ar, hi, ca) its name and
search terms. Nothing here is a hand-typed category list.

A document's categories are the presets whose tags it carries (a `;`-separated value counts for each
part). A query's category words are found by `CategoryTerms.parse`: the longest run of query words
(at most 8) at the start or the end of the query that is a preset name, a part of a name split at "/"
("Estación de servicio / Gasolinera"), the preset's own value ("pharmacy", "fast food", "pizza"), a
term or an alias, in any of the languages. Names and values win over terms: "hotel" is the Hotel
preset, not every preset that lists "hotel" among its terms. The rest of the query is the place or
name to look for ("pizza Encamp", "hotel near Vaduz": connector words between the two are dropped).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from geoengine.config import data_path
from geoengine.search.text import normalise

LANGUAGES = ("en", "fr", "de", "es", "ar", "hi", "ca")
MAX_TERM_WORDS = 8
# Words that join a category and a place ("hotel near Vaduz", "farmacia en Encamp"): dropped between
# the two. Not a category vocabulary: grammar, per language.
CONNECTORS = {
    "en": ("near", "in", "at", "around", "close to", "near to", "nearby"),
    "fr": ("a", "au", "aux", "en", "pres de", "près de", "proche de", "dans", "autour de", "de"),
    "de": ("in", "bei", "nahe", "in der nahe von", "in der nähe von", "im", "am", "um"),
    "es": ("en", "cerca de", "junto a", "de", "del"),
    "ar": ("في", "قرب", "بالقرب من", "عند"),
    "hi": ("में", "के पास", "पास"),
    "ca": ("a", "prop de", "a prop de", "de", "del", "en"),
}


def _data_file() -> Path:
    return data_path("search/categories.json")


@lru_cache(maxsize=1)
def vocabulary() -> dict:
    """The whole vocabulary file: {"meta": {...}, "categories": {preset id: {tags, names, terms}}}."""
    return json.loads(_data_file().read_text(encoding="utf-8"))


def _split_values(v: str) -> list[str]:
    return [p.strip() for p in v.split(";") if p.strip()]


KNOWN_TAG_SETS = 100_000  # the distinct tag sets TagMatcher keeps the answer of


class TagMatcher:
    """Categories (preset ids) of an object's tags, for presets whose own key is in `keys`."""

    def __init__(self, keys, vocab: dict | None = None):
        cats = (vocab or vocabulary())["categories"]
        self.by_tag: dict[tuple[str, str], list[tuple[str, tuple[tuple[str, str], ...]]]] = {}
        for pid, c in cats.items():
            key = pid.split("/", 1)[0]
            if key not in keys:
                continue
            first = (key, c["tags"][key])
            rest = tuple((k, v) for k, v in c["tags"].items() if k != key)
            self.by_tag.setdefault(first, []).append((pid, rest))
        self.keys = {k for k, _ in self.by_tag}
        # every key a match reads (the presets' own keys and their further tags'): the answer is a function
        # of these tags alone, so it is kept per distinct set of them (objects repeat a few thousand of them)
        self.read_keys = frozenset(self.keys | {k for lst in self.by_tag.values() for _, rest in lst for k, _ in rest})
        self._known: dict[tuple, tuple[str, ...]] = {}

    def __call__(self, tags: dict) -> list[str]:
        read = self.read_keys.intersection(tags)
        if not read:
            return []
        key = tuple(sorted((k, tags[k]) for k in read))
        hit = self._known.get(key)
        if hit is None:
            hit = tuple(self._match(tags))
            if len(self._known) < KNOWN_TAG_SETS:
                self._known[key] = hit
        return list(hit)

    def _match(self, tags: dict) -> list[str]:
        out: list[str] = []
        for key in self.keys.intersection(tags):
            for val in _split_values(tags[key]):
                for pid, rest in self.by_tag.get((key, val), ()):
                    if all(v in _split_values(tags.get(k, "")) for k, v in rest) and pid not in out:
                        out.append(pid)
        # the most specific preset first (amenity/fast_food/pizza before amenity/fast_food)
        out.sort(key=lambda p: (-p.count("/"), p))
        return out


def preset_terms(pid: str, c: dict) -> tuple[set[str], set[str]]:
    """(name-level phrases, term-level phrases) of one preset, normalised."""
    names = {normalise(pid.rsplit("/", 1)[-1].replace("_", " "))}
    for name in c.get("names", {}).values():
        bare = _PAREN.sub(" ", name)  # "Bar (latam) / Bar de copas (es)": also "bar", "bar de copas"
        for n in (name, bare):
            names.add(normalise(n))
            names.update(normalise(p) for p in n.split("/"))
    terms = {normalise(t) for ts in c.get("terms", {}).values() for t in ts}
    names.discard("")
    terms.discard("")
    return names, terms - names


def build_terms(pids, vocab: dict | None = None) -> dict[str, list[list[str]]]:
    """{normalised phrase: [preset ids naming it, preset ids listing it as a term]} for presets `pids`, in
    an order that does not depend on the interpreter's string hashing (the bundle's `categories.json` is the
    same bytes from build to build)."""
    cats = (vocab or vocabulary())["categories"]
    out: dict[str, list[list[str]]] = {}
    for pid in sorted(pids):
        names, terms = preset_terms(pid, cats[pid])
        for level, phrases in ((0, names), (1, terms)):
            for ph in sorted(phrases):
                if len(ph.split()) <= MAX_TERM_WORDS and _long_enough(ph):
                    out.setdefault(ph, [[], []])[level].append(pid)
    return out


_PAREN = re.compile(r"\([^)]*\)")


def _long_enough(phrase: str) -> bool:
    """3+ characters, or 2 in a script whose words are short (Arabic "سد", Hindi "नदी" normalised)."""
    return len(phrase) >= 3 or (len(phrase) == 2 and not phrase.isascii())


_CONNECTORS = sorted({normalise(c) for cs in CONNECTORS.values() for c in cs}, key=lambda c: -len(c.split()))


def strip_connectors(words: list[str], at_start: bool) -> list[str]:
    """`words` without connector words on the side that touched the category words."""
    changed = True
    while words and changed:
        changed = False
        for c in _CONNECTORS:
            cw = c.split()
            if len(cw) < len(words) and (words[:len(cw)] == cw if at_start else words[-len(cw):] == cw):
                words = words[len(cw):] if at_start else words[:-len(cw)]
                changed = True
                break
    return words


class CategoryTerms:
    """The category phrases of one bundle: `parse(tokens)` finds the category words of a query."""

    def __init__(self, terms: dict[str, list[list[str]]]):
        self.terms = terms

    def lookup(self, phrase: str) -> list[str]:
        hit = self.terms.get(phrase)
        if not hit:
            return []
        return hit[0] or hit[1]

    def parse(self, toks: list[str]) -> tuple[list[str], list[str]] | None:
        """(preset ids, remaining words) when the query starts or ends with category words, else None.
        The longest run wins; at the same length the start of the query."""
        n = len(toks)
        for length in range(min(n, MAX_TERM_WORDS), 0, -1):
            for start in ((0, n - length) if n > length else (0,)):
                phrase = " ".join(toks[start:start + length])
                if not _long_enough(phrase):
                    continue
                pids = self.lookup(phrase)
                if pids:
                    rest = toks[start + length:] if start == 0 else toks[:start]
                    return pids, strip_connectors(rest, at_start=start == 0)
        return None


@lru_cache(maxsize=1)
def global_terms() -> CategoryTerms:
    """The category phrases of every preset of the vocabulary (to tell an absent category from a wrong one)."""
    return CategoryTerms(build_terms(vocabulary()["categories"]))
