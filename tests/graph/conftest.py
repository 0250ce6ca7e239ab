"""Graph fixtures: the real sample regions (built once per session through the pipeline) and one tiny
hand-made OSM file for tags that no sample region carries (ferry, motorway tolls, hazmat, maxaxles)."""

from __future__ import annotations

import osmium
import pytest

from geoengine.graph import Graph

HANDMADE_OSM = """<?xml version='1.0' encoding='UTF-8'?>
<osm version="0.6" generator="geoengine tests">
  <node id="1" lat="47.0000" lon="9.5000" version="1"/>
  <node id="2" lat="47.0000" lon="9.5100" version="1"/>
  <node id="3" lat="47.0000" lon="9.5200" version="1"/>
  <node id="4" lat="47.0100" lon="9.5200" version="1"/>
  <node id="5" lat="47.0100" lon="9.5100" version="1"/>
  <node id="6" lat="47.0100" lon="9.5000" version="1"/>
  <node id="7" lat="47.0050" lon="9.5000" version="1"/>
  <node id="8" lat="47.0050" lon="9.5050" version="1"/>
  <way id="101" version="1"><nd ref="1"/><nd ref="2"/>
    <tag k="highway" v="motorway"/><tag k="toll" v="yes"/><tag k="maxspeed" v="60 mph"/></way>
  <way id="102" version="1"><nd ref="2"/><nd ref="3"/>
    <tag k="route" v="ferry"/><tag k="duration" v="00:30"/></way>
  <way id="103" version="1"><nd ref="3"/><nd ref="4"/>
    <tag k="highway" v="secondary"/><tag k="hazmat" v="no"/><tag k="maxaxles" v="3"/>
    <tag k="maxlength" v="12"/><tag k="maxaxleload" v="8 t"/><tag k="maxwidth" v="7'"/></way>
  <way id="104" version="1"><nd ref="4"/><nd ref="5"/><nd ref="6"/>
    <tag k="highway" v="residential"/><tag k="access" v="destination"/></way>
  <way id="105" version="1"><nd ref="6"/><nd ref="7"/><nd ref="1"/>
    <tag k="highway" v="track"/><tag k="tracktype" v="grade4"/></way>
  <way id="106" version="1"><nd ref="7"/><nd ref="8"/>
    <tag k="highway" v="trunk"/><tag k="motorroad" v="yes"/><tag k="toll:hgv" v="yes"/></way>
  <way id="107" version="1"><nd ref="8"/><nd ref="5"/>
    <tag k="highway" v="trunk"/></way>
</osm>
"""


def first_way(pbf, predicate) -> int:
    """Id of the first way whose tag dict satisfies `predicate` (fails the test when none does)."""
    for obj in osmium.FileProcessor(str(pbf)).with_filter(osmium.filter.KeyFilter("highway", "route")):
        if obj.is_way() and predicate(dict(obj.tags)):
            return obj.id
    raise AssertionError("no way in the extract matches the predicate")


def restrictions(pbf) -> list[dict]:
    """Turn restriction relations of an extract: id, restriction, from/via/to member refs."""
    out = []
    for obj in osmium.FileProcessor(str(pbf)).with_filter(osmium.filter.KeyFilter("type")):
        if obj.is_relation() and obj.tags.get("type") == "restriction":
            m = {role: [] for role in ("from", "via", "to")}
            for mem in obj.members:
                if mem.role in m:
                    m[mem.role].append((mem.type, mem.ref))
            out.append({"id": obj.id, "restriction": obj.tags.get("restriction"), **m})
    return out


@pytest.fixture(scope="session")
def find_way():
    return first_way


@pytest.fixture(scope="session")
def find_restrictions():
    return restrictions


@pytest.fixture(scope="session")
def sample(shared_data_dir):
    """sample(rel) -> path of a file of ../shared/data."""
    def _p(rel):
        p = shared_data_dir / rel
        assert p.exists(), f"sample data {p} is missing"
        return p
    return _p


def _graph(build_region, name: str) -> Graph:
    return Graph.open(build_region(name) / "graph")


@pytest.fixture(scope="session")
def andorra_graph(build_region) -> Graph:
    return _graph(build_region, "andorra")


@pytest.fixture(scope="session")
def liechtenstein_graph(build_region) -> Graph:
    return _graph(build_region, "liechtenstein")


@pytest.fixture(scope="session")
def handmade_graph(tmp_path_factory) -> Graph:
    from geoengine.graph.build import build_graph

    d = tmp_path_factory.mktemp("handmade")
    osm = d / "handmade.osm"
    osm.write_text(HANDMADE_OSM)
    build_graph(osm, d / "graph")
    return Graph.open(d / "graph")


@pytest.fixture(scope="session")
def nominatim_graph(tmp_path_factory, sample) -> Graph:
    """Liechtenstein + surroundings (2021, Nominatim test set): has motorways and only_* restrictions."""
    from geoengine.graph.build import build_graph

    d = tmp_path_factory.mktemp("nominatim") / "graph"
    build_graph(sample("liechtenstein/nominatim-apidb-test-data.osm.pbf"), d)
    return Graph.open(d)
