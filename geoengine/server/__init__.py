"""The optional HTTP façade (`pip install geoengine[server]`). Nothing in the library imports it."""
