"""Fixtures of the tile tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def andorra_source(andorra) -> str:
    ids = [s.id for s in andorra.tiles.sources()]
    assert ids == ["andorra"], ids
    return "andorra"
