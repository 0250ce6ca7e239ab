"""Reuse the graph fixtures of tests/graph/conftest.py (real regions and the hand-made file)."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("_graph_fixtures", Path(__file__).parents[1] / "graph" / "conftest.py")
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)

andorra_graph = _mod.andorra_graph
liechtenstein_graph = _mod.liechtenstein_graph
handmade_graph = _mod.handmade_graph
find_way = _mod.find_way
find_restrictions = _mod.find_restrictions
sample = _mod.sample
nominatim_graph = _mod.nominatim_graph
