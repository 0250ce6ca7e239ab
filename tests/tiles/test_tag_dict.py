"""osmtags.tag_dict (a TagList read len(tags) times, not to pyosmium's C++ StopIteration) gives
exactly dict(tags), in the same order, for every object of a real extract."""

from __future__ import annotations

import osmium

from geoengine.osmtags import tag_dict

from ..conftest import data_file


class _Both(osmium.SimpleHandler):
    def __init__(self):
        super().__init__()
        self.seen = self.tagged = 0

    def _check(self, obj):
        got = tag_dict(obj.tags)
        want = dict(obj.tags)
        assert got == want and list(got) == list(want), obj.id
        self.seen += 1
        self.tagged += bool(want)

    node = way = relation = _check


def test_tag_dict_equals_dict_of_the_tag_list():
    h = _Both()
    h.apply_file(str(data_file("andorra/andorra.osm.pbf")))
    assert h.seen > 50_000 and h.tagged > 10_000
