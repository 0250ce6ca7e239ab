"""The tile schema classifies an object the same way in every process: nothing depends on the order of a
set, which follows the interpreter's hash seed (an area tagged natural=water and waterway=riverbank came out
as `water` or `riverbank` in two builds of Liechtenstein)."""

from __future__ import annotations

import os
import subprocess
import sys

CODE = ("from geoengine.tiles.schema import area_features;"
        "print([(f.layer, f.kind, f.kind_detail) for f in area_features("
        "{'natural': 'water', 'waterway': 'riverbank', 'landuse': 'reservoir', 'leisure': 'swimming_pool'})])")


def test_area_classification_does_not_follow_the_hash_seed():
    seen = set()
    for seed in ("1", "2", "12", "13", "99"):
        out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}).stdout.strip()
        seen.add(out)
    assert seen == {"[('water', 'water', 'water')]"}
