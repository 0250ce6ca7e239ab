#!/usr/bin/env python3
"""Derive geoengine's search category vocabulary (data/search/categories.json) from iD's tagging schema.

Source: the npm package @openstreetmap/id-tagging-schema, pinned in package.json / package-lock.json
next to this script and installed with `npm ci` here (`./dev setup` does it when missing). Its
`dist/presets.json` gives each preset's OSM tags; `dist/translations/<lang>.json` its name, terms and
aliases per language. Kept: presets whose tags are one or two concrete key=value pairs, the first
being the preset's own key (`amenity/pharmacy`: amenity=pharmacy), with a name in at least one of the
languages en, fr, de, es, ar, hi, ca (the search stage uses those whose key it indexes as a POI). The output records the package version and licence (ISC); a test checks that the
committed file is what this script makes from the pinned version.

    python vendor/search-vocab/generate.py            # rewrite data/search/categories.json
    python vendor/search-vocab/generate.py --check    # exit 1 when the committed file differs
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PKG = HERE / "node_modules" / "@openstreetmap" / "id-tagging-schema"
OUT = ROOT / "data" / "search" / "categories.json"
LANGUAGES = ("en", "fr", "de", "es", "ar", "hi", "ca")


def generate(pkg: Path = PKG) -> str:
    meta = json.loads((pkg / "package.json").read_text(encoding="utf-8"))
    presets = json.loads((pkg / "dist" / "presets.json").read_text(encoding="utf-8"))
    tr = {lang: json.loads((pkg / "dist" / "translations" / f"{lang}.json").read_text(encoding="utf-8"))[lang]
          .get("presets", {}).get("presets", {}) for lang in LANGUAGES}
    cats = {}
    for pid in sorted(presets):
        tags = presets[pid].get("tags", {})
        if not 1 <= len(tags) <= 2 or any(v == "*" or not v for v in tags.values()):
            continue
        if pid.split("/", 1)[0] not in tags:  # the preset's own key (amenity/pharmacy: amenity) is one of its tags
            continue
        names, terms = {}, {}
        for lang in LANGUAGES:
            t = tr[lang].get(pid) or {}
            if t.get("name"):
                names[lang] = t["name"]
            extra = [x for x in (t.get("aliases") or []) + (t.get("terms") or []) if isinstance(x, str) and x.strip()]
            if extra:
                terms[lang] = sorted({x.strip() for x in extra})
        if names:
            cats[pid] = {"tags": tags, "names": names, "terms": terms}
    head = {"source": meta["name"], "version": meta["version"], "licence": meta.get("license", ""),
            "copyright": "iD contributors", "languages": list(LANGUAGES),
            "generated_by": "vendor/search-vocab/generate.py"}
    lines = ["{", f'"meta": {json.dumps(head, ensure_ascii=False, sort_keys=True)},', '"categories": {']
    body = [f"{json.dumps(pid)}: {json.dumps(c, ensure_ascii=False, sort_keys=True)}" for pid, c in cats.items()]
    lines.append(",\n".join(body))
    lines.append("}}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Write data/search/categories.json from the pinned iD tagging schema "
                                             "(run `npm ci` in vendor/search-vocab first).")
    ap.add_argument("--check", action="store_true", help="compare with the committed file instead of writing it")
    ap.add_argument("--package", type=Path, default=PKG, help="folder of the installed npm package")
    args = ap.parse_args(argv)
    if not (args.package / "dist" / "presets.json").exists():
        print(f"{args.package} is missing: run `npm ci` in {HERE}", file=sys.stderr)
        return 2
    text = generate(args.package)
    if args.check:
        same = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        print("up to date" if same else f"{OUT} differs from what the pinned package gives")
        return 0 if same else 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
