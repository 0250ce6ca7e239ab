"""Road graph: OSM tag rules (`tags`), the build (`build`), the memory-mapped store (`Graph`) and the
turn-expanded graph (`turn_graph`). docs/graph.md describes the arrays."""

from geoengine.graph.store import Graph
from geoengine.graph.turns import turn_graph

__all__ = ["Graph", "turn_graph"]
