#!/usr/bin/env python3
"""Derive geoengine's street-type and title abbreviation table (data/search/abbreviations.json) from
Nominatim's maintained variant lists.

Source: `settings/icu-rules/variants-<lang>.yaml` of https://github.com/osm-search/Nominatim (GPL-2.0;
the lists themselves come from the OSM wiki page Name_finder:Abbreviations and, for English, USPS
Publication 28). Read from a clone or a bare mirror of that repository at a given commit (the commit is
recorded in the output). Each rule `full[, full...] -> abbr[, abbr...]` becomes one entry per language:
{"full": [...], "abbr": [...]} with the words normalised as the search index does (geoengine.search.text);
`~` (the word may be a suffix of a compound: ~strasse -> str gives Hauptstr = Hauptstrasse) and `$` (only
at the end of a name) are kept as flags; `=>` rules (which only stop an abbreviation) are skipped.

    python vendor/search-abbrev/generate.py --nominatim /path/to/Nominatim[.git] [--commit SHA]
    python vendor/search-abbrev/generate.py --nominatim ... --check   # exit 1 when the committed file differs
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
from geoengine.search.text import normalise  # noqa: E402

OUT = ROOT / "data" / "search" / "abbreviations.json"


def _files(repo: Path, commit: str) -> dict[str, str]:
    """{file name: text} of settings/icu-rules/variants-*.yaml at `commit` (git) or in a checkout."""
    names = subprocess.run(["git", "--git-dir" if not (repo / ".git").exists() else "-C", str(repo), "ls-tree",
                            "--name-only", commit, "settings/icu-rules/"], check=True, capture_output=True,
                           text=True).stdout.split()
    out = {}
    for name in names:
        if Path(name).name.startswith("variants-"):
            out[Path(name).name] = subprocess.run(
                ["git", "--git-dir" if not (repo / ".git").exists() else "-C", str(repo), "show", f"{commit}:{name}"],
                check=True, capture_output=True, text=True).stdout
    return out


def _words(side: str) -> list[str]:
    return [w for w in (normalise(p.strip()) for p in side.split(",")) if w]


def parse_rule(rule: str) -> dict | None:
    """One `full -> abbr` rule as {full, abbr, suffix, end}; None for `=>` rules and what has no abbreviation."""
    rule = rule.split("#", 1)[0].strip()
    if "=>" in rule or "->" not in rule:
        return None
    left, right = rule.split("->", 1)
    left = left.replace("|", "").strip()
    suffix = left.startswith("~")
    end = left.endswith("$")
    left = left.strip("~$ ")
    right = right.strip().lstrip("~").rstrip("$")
    full, abbr = _words(left), _words(right)
    abbr = [a for a in abbr if a not in full]
    if not full or not abbr:
        return None
    return {"full": full, "abbr": abbr, **({"suffix": True} if suffix else {}), **({"end": True} if end else {})}


def generate(repo: Path, commit: str) -> str:
    sha = subprocess.run(["git", "--git-dir" if not (repo / ".git").exists() else "-C", str(repo), "rev-parse", commit],
                         check=True, capture_output=True, text=True).stdout.strip()
    langs: dict[str, list[dict]] = {}
    for fname, text in sorted(_files(repo, sha).items()):
        for block in yaml.safe_load(text) or []:
            lang = block.get("lang") or fname[len("variants-"):-len(".yaml")]
            rules = langs.setdefault(lang, [])
            for w in block.get("words", []):
                r = parse_rule(str(w))
                if r is not None and r not in rules:
                    rules.append(r)
    head = {"source": "https://github.com/osm-search/Nominatim settings/icu-rules/variants-*.yaml",
            "commit": sha, "licence": "GPL-2.0 (Nominatim); lists from the OSM wiki Name_finder:Abbreviations and USPS Pub. 28",
            "generated_by": "vendor/search-abbrev/generate.py"}
    lines = ["{", f'"meta": {json.dumps(head, ensure_ascii=False, sort_keys=True)},', '"languages": {']
    body = [f"{json.dumps(lang)}: {json.dumps(rules, ensure_ascii=False, sort_keys=True)}" for lang, rules in sorted(langs.items())]
    lines.append(",\n".join(body))
    lines.append("}}")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nominatim", required=True, type=Path, help="a clone or bare mirror of osm-search/Nominatim")
    ap.add_argument("--commit", default=None, help="the commit to read (default: the one recorded in the output, else HEAD)")
    ap.add_argument("--check", action="store_true", help="exit 1 when the committed file differs")
    a = ap.parse_args()
    commit = a.commit
    if commit is None:
        commit = json.loads(OUT.read_text(encoding="utf-8"))["meta"]["commit"] if OUT.exists() else "HEAD"
    text = generate(a.nominatim, commit)
    if a.check:
        same = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        print("abbreviations.json is " + ("current" if same else "NOT what the generator makes"))
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT} ({sum(1 for _ in text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
