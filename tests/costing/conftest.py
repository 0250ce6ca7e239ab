"""Reuse the graph fixtures (real regions, the Nominatim test set, the hand-made file)."""

from tests.graph.conftest import (  # noqa: F401
    andorra_graph,
    find_restrictions,
    find_way,
    handmade_graph,
    liechtenstein_graph,
    nominatim_graph,
    sample,
)
