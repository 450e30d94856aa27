"""Shared test helpers: the default configuration and callers."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from wms.config import Config, load_config
from wms.core.identity import Identity

REPO = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO / "config"
EXAMPLES = REPO / "examples"

ROLAND = Identity(user="roland", group="lhcb_user", vo="lhcb", role="user")
ALICE = Identity(user="alice", group="lhcb_user", vo="lhcb", role="user")
ANDRE = Identity(user="andre", group="dteam_user", vo="dteam", role="user")
ADMIN = Identity(user="admin", group="lhcb_prod", vo="lhcb", role="manager")
OPERATOR = Identity(user="oper", group="lhcb_prod", vo="lhcb", role="operator")
PILOT = Identity(user="pilot", group="lhcb_pilot", vo="lhcb", role="pilot")


def as_pilot(pilot_id: str) -> Identity:
    """PILOT as the token of one pilot (bound to ``pilot_id``) presents it."""
    return Identity(user=PILOT.user, group=PILOT.group, vo=PILOT.vo, role=PILOT.role, pilot_id=pilot_id)


@lru_cache(maxsize=1)
def default_config() -> Config:
    return load_config(CONFIG_DIR)


def run_concurrently(work, count: int) -> tuple[list, list]:
    """Run ``work(i)`` on ``count`` threads at once; (results, exceptions)."""
    import threading

    results, errors = [], []

    def call(i: int) -> None:
        try:
            results.append(work(i))
        except Exception as exc:  # noqa: BLE001 - returned to the test, which asserts on it
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors
