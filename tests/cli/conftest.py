"""A real `wms server` process on SQLite (tests/servers.py), and a way to run
`wms` commands against it as separate processes, as a user would."""

from __future__ import annotations

import pytest

from tests.servers import Tokens, running_server

USERS = {
    "roland": ("roland", "lhcb_user", "lhcb", "user"),
    "andre": ("andre", "dteam_user", "dteam", "user"),
    "admin": ("admin", "lhcb_prod", "lhcb", "manager"),
    "pilot": ("pilot", "lhcb_pilot", "lhcb", "pilot"),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`wms server` on a fresh SQLite database; yields its handle: ``server(*args, token=)``
    runs ``wms``, ``server.ok``/``server.json`` check and parse, ``server.env`` is its environment."""
    with running_server(tmp_path_factory.mktemp("server"), tokens=USERS) as handle:
        yield handle


@pytest.fixture(scope="module")
def tokens(server) -> dict[str, str]:
    """Tokens of roland and andre (users), admin (manager), pilot (pilot), and of any pilot id asked for."""
    return Tokens(server)
