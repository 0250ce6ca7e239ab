"""Real geocoding clients against a real server: geopy's Nominatim and Photon geocoders, unmodified, pointed
at a uvicorn server on loopback serving the Liechtenstein bundle, with the gateway key passed the way
docs/geocoding.md documents for geopy (the geocoder's `headers` dict). Each geocodes an address with its
house number and reverses the point back to that address.

The addresses are the bundle's own: the zoom-18 reverse answers (an address with its number) at documents
drawn at random (fixed seed) from the index, so the truth is the extract, not a hand-written answer.
(Andorra's extract puts its house numbers on named POIs only: no address documents to test with.)"""

from __future__ import annotations

import pytest

from geoengine.geo import haversine_m
from tests.serving import thread_server

geopy = pytest.importorskip("geopy")
from geopy.geocoders import Nominatim, Photon  # noqa: E402

N_ADDRESSES = 6


@pytest.fixture(scope="module")
def server(liechtenstein, settings, keystore, api_key):
    from geoengine.server.app import create_app

    liechtenstein.warm()
    with thread_server(create_app(liechtenstein, settings, keystore)) as port:
        yield f"127.0.0.1:{port}", {"X-Gateway-Key": api_key, "X-Gateway-Host": settings.gateway_host}


@pytest.fixture(scope="module")
def addresses(liechtenstein):
    """(lat, lon, house number, road, town) of N_ADDRESSES distinct addresses of the bundle."""
    import numpy as np

    ix = liechtenstein.search_index
    rng = np.random.default_rng(1)
    out = {}
    for row in rng.choice(ix.n, min(ix.n, 2000), replace=False):
        for place in liechtenstein.reverse(lon=float(ix.lon[row]), lat=float(ix.lat[row]), zoom=18):
            a = place.address
            town = a.get("city") or a.get("town") or a.get("village")
            if place.housenumber and a.get("road") and town:
                out.setdefault((place.housenumber, a["road"], town), (place.lat, place.lon, place.housenumber, a["road"],
                                                                       town))
        if len(out) >= N_ADDRESSES:
            break
    assert len(out) == N_ADDRESSES, f"the bundle has too few addresses: {out}"
    return list(out.values())


def _near(a_lat, a_lon, b_lat, b_lon, m=30.0) -> bool:
    return float(haversine_m(a_lat, a_lon, b_lat, b_lon)) <= m


def test_geopy_nominatim(server, addresses):
    domain, headers = server
    geo = Nominatim(domain=domain, scheme="http", user_agent="geoengine-tests", timeout=60)
    geo.headers.update(headers)  # docs/geocoding.md: geopy's geocoders send their `headers` dict
    hits = 0
    for lat, lon, number, road, town in addresses:
        loc = geo.geocode(f"{road} {number}, {town}", addressdetails=True)
        assert loc is not None, (road, number)
        addr = loc.raw["address"]
        if addr.get("house_number") == number and addr.get("road") == road and _near(loc.latitude, loc.longitude,
                                                                                         lat, lon):
            hits += 1
        back = geo.reverse((lat, lon), exactly_one=True)  # format=json, addressdetails=1, zoom 18
        assert back is not None
        assert back.raw["address"].get("house_number") == number and back.raw["address"].get("road") == road
        assert _near(back.latitude, back.longitude, lat, lon, 1.0)
    assert hits == len(addresses), f"{hits} of {len(addresses)} addresses geocoded to their house"


def test_geopy_nominatim_structured_and_errors(server, addresses):
    domain, headers = server
    geo = Nominatim(domain=domain, scheme="http", user_agent="geoengine-tests", timeout=60)
    geo.headers.update(headers)
    lat, lon, number, road, town = addresses[0]
    loc = geo.geocode({"street": f"{number} {road}", "city": town}, addressdetails=True)
    assert loc is not None and loc.raw["address"].get("house_number") == number
    # without the key the gateway refuses, and geopy reports it
    bare = Nominatim(domain=domain, scheme="http", user_agent="geoengine-tests", timeout=60)
    with pytest.raises(geopy.exc.GeocoderServiceError):
        bare.geocode(f"{road} {number}, {town}")


def test_geopy_photon(server, addresses):
    domain, headers = server
    geo = Photon(domain=f"{domain}/photon", scheme="http", user_agent="geoengine-tests", timeout=60)
    geo.headers.update(headers)
    hits = 0
    for lat, lon, number, road, town in addresses:
        loc = geo.geocode(f"{road} {number}, {town}")
        assert loc is not None, (road, number)
        props = loc.raw["properties"]
        if props.get("housenumber") == number and props.get("street") == road and _near(loc.latitude, loc.longitude,
                                                                                           lat, lon):
            hits += 1
        back = geo.reverse((lat, lon), exactly_one=True)
        assert back is not None
        assert back.raw["properties"].get("housenumber") == number and back.raw["properties"].get("street") == road
        assert _near(back.latitude, back.longitude, lat, lon, 1.0)
    assert hits == len(addresses), f"{hits} of {len(addresses)} addresses geocoded to their house"
