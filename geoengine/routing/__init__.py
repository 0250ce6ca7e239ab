"""Routing algorithms over generic directed CSR graphs (vertex ids are whatever the graph stage uses:
routing runs on the edge-based, turn-expanded graph whose vertices are directed road edges).

- `ContractionHierarchy` (ch.py): contraction, bidirectional point-to-point (`query`), bucket many-to-many
  (`table`), batch point-to-point (`pairs`) over `Locations`, each thread's `Workspace`, path unpacking,
  save/load as .npy.
- `Graph`, `dijkstra`, `bidirectional_dijkstra`, `one_to_all`, `dijkstra_table` (dijkstra.py): exact searches over the
  original graph (option-weighted fallback, isochrones).

See docs/routing-algorithms.md.
"""

from geoengine.routing.ch import ContractionHierarchy, Locations, PathResult, Workspace, flatten_locations
from geoengine.routing.dijkstra import Graph, bidirectional_dijkstra, dijkstra, one_to_all
from geoengine.routing.dijkstra import table as dijkstra_table

__all__ = [
    "ContractionHierarchy",
    "Locations",
    "PathResult",
    "Workspace",
    "flatten_locations",
    "Graph",
    "dijkstra",
    "bidirectional_dijkstra",
    "one_to_all",
    "dijkstra_table",
]
