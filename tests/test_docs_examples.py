"""The README's and docs' Python examples run, as written, against a built Andorra bundle.

Each ```python block is executed in a fresh namespace; a `geoengine.open("<path>")` call is pointed at
the session's Andorra bundle (the only edit). A block preceded by the line `<!-- not run -->` is a
fragment shown for illustration and is skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(<!-- not run -->\s*\n)?```python\n(.*?)```", re.S)
OPEN = re.compile(r"geoengine\.open\((['\"])[^'\"]*\1")


def _blocks():
    for path in FILES:
        for k, m in enumerate(BLOCK.finditer(path.read_text())):
            if not m.group(1):
                yield pytest.param(path, m.group(2), id=f"{path.relative_to(ROOT)}#{k}")


@pytest.mark.parametrize(("path", "code"), list(_blocks()))
def test_doc_example_runs(path, code, build_region, engine_for, monkeypatch, tmp_path):
    bundle = build_region("andorra")
    engine_for("andorra").warm()
    monkeypatch.chdir(tmp_path)
    code = OPEN.sub(lambda _m: f"geoengine.open({str(bundle)!r}", code)
    exec(compile(code, f"{path.name} example", "exec"), {"__name__": "docs_example"})
