"""The computing-element backends of the SiteDirector: one interface
(wms/backends/base.py) and one module a backend, found by name in
wms/backends/registry.py."""
