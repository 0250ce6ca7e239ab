"""The Engine exposes the graph, the snapper and the costing listings."""

from __future__ import annotations

import numpy as np
import pytest

from geoengine.errors import InvalidRequest


def test_engine_graph_and_snapper(andorra):
    g = andorra.graph
    assert g.n_edges > 1000 and andorra.graph is g
    c = andorra.snapper.snap(1.5218, 42.5063, g.mode_mask("auto"))
    assert len(c) and c.distance[0] < 200 and np.all(g.mode_mask("auto")[c.edge])


def test_engine_costing_listing(andorra):
    assert andorra.costings()[0] == "auto" and len(andorra.costings()) == 9
    assert "use_highways" in andorra.costing_options("auto")["options"]["properties"]
    with pytest.raises(InvalidRequest):
        andorra.costing_options("rocket")
