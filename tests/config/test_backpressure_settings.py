"""wms.yaml's ``backpressure:`` (docs/configuration.md): defaults, values, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.config.test_config import NO_ENV, _error, _write
from wms.config import load_config


def test_backpressure_has_defaults_and_can_be_set(tmp_path: Path) -> None:
    default = load_config(tmp_path, environ=NO_ENV).settings.backpressure
    assert (default.max_in_flight, default.retry_after, default.retry_after_max) == (32, 5, 30)
    _write(tmp_path, "wms.yaml", "backpressure:\n  max_in_flight: 200\n  retry_after: 5\n  retry_after_max: 60\n")
    chosen = load_config(tmp_path, environ=NO_ENV).settings.backpressure
    assert (chosen.max_in_flight, chosen.retry_after, chosen.retry_after_max) == (200, 5, 60)


def test_the_door_has_defaults_and_can_be_set(tmp_path: Path) -> None:
    """The deadlines of headers and bodies, and each caller's part of a process."""
    default = load_config(tmp_path, environ=NO_ENV).settings.backpressure
    assert (default.header_seconds, default.body_seconds, default.body_min_rate) == (20, 20, 500)
    assert (default.identity_share, default.share(), default.bodies_per_identity) == (0.25, 8, 16)
    _write(tmp_path, "wms.yaml", "backpressure:\n  header_seconds: 2.5\n  body_seconds: 5\n  body_min_rate: 100\n"
                                 "  identity_share: 0.01\n  bodies_per_identity: 4\n")
    chosen = load_config(tmp_path, environ=NO_ENV).settings.backpressure
    assert (chosen.header_seconds, chosen.body_seconds, chosen.body_min_rate) == (2.5, 5, 100)
    assert (chosen.share(), chosen.bodies_per_identity) == (1, 4)          # a share is one request at least


def test_request_threads_follow_the_pool_unless_set(tmp_path: Path) -> None:
    """The pool keeps a connection for each thread: the match threads' and the others'."""
    _write(tmp_path, "wms.yaml", "database_pool:\n  size: 6\n")
    settings = load_config(tmp_path, environ=NO_ENV).settings
    assert (settings.request_threads(), settings.backpressure.match_threads) == (4, 2)
    _write(tmp_path, "wms.yaml", "database_pool:\n  size: 6\nbackpressure:\n  match_threads: 3\n")
    assert load_config(tmp_path, environ=NO_ENV).settings.request_threads() == 3
    _write(tmp_path, "wms.yaml", "database_pool:\n  size: 2\nbackpressure:\n  match_threads: 4\n")
    assert load_config(tmp_path, environ=NO_ENV).settings.request_threads() == 1
    _write(tmp_path, "wms.yaml", "database_pool:\n  size: 6\nbackpressure:\n  request_threads: 4\n")
    assert load_config(tmp_path, environ=NO_ENV).settings.request_threads() == 4


@pytest.mark.parametrize("text, line, message", [
    ("backpressure: {max_in_flight: 0}\n", 1, "backpressure.max_in_flight: must be greater than 0, got 0"),
    ("backpressure:\n  retry_after: 0.5\n", 2, "backpressure.retry_after: expected an integer, got 0.5"),
    ("backpressure:\n  max_in_flight: lots\n", 2, "backpressure.max_in_flight: expected an integer, got 'lots'"),
    ("backpressure:\n  max_inflight: 10\n", 2, "backpressure.max_inflight: unknown key"),
    ("backpressure:\n  retry_after_max: -1\n", 2, "backpressure.retry_after_max: must be greater than 0, got -1"),
    ("backpressure:\n  request_threads: 0\n", 2, "backpressure.request_threads: must be greater than 0, got 0"),
    ("backpressure:\n  match_threads: many\n", 2, "backpressure.match_threads: expected an integer, got 'many'"),
    ("backpressure:\n  identity_share: 1.5\n", 2, "backpressure.identity_share: must be at most 1, got 1.5"),
    ("backpressure:\n  identity_share: 0\n", 2, "backpressure.identity_share: must be greater than 0, got 0"),
    ("backpressure:\n  body_seconds: 0\n", 2, "backpressure.body_seconds: must be greater than 0, got 0"),
    ("backpressure:\n  header_seconds: true\n", 2, "backpressure.header_seconds:"),
    ("backpressure:\n  body_min_rate: 0\n", 2, "backpressure.body_min_rate: must be greater than 0, got 0"),
    ("backpressure:\n  bodies_per_identity: -1\n", 2, "backpressure.bodies_per_identity: must be greater than 0"),
])
def test_bad_backpressure_settings_name_file_line_and_problem(tmp_path: Path, text: str, line: int,
                                                              message: str) -> None:
    error = _error(tmp_path, "wms.yaml", text)
    assert error.where == f"{tmp_path}/wms.yaml:{line}"
    assert message in error.message, error.message
