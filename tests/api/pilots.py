"""Real pilots (wms-pilot processes) against real servers, for the tests of this package."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import text

from tests.helpers import REPO
from tests.pilot.conftest import LOCAL
from tests.servers import ServerHandle
from wms.core.identity import Identity
from wms.db.engine import make_engine
from wms.services.tokens import create_token


def pilot_tokens(database_url: str, pilot_ids: Iterable[str]) -> dict[str, str]:
    """A pilot token of lhcb per pilot id, made as `wms admin token create --role pilot` makes
    them (in this process: a command per token costs seconds on a busy machine)."""
    engine = make_engine(database_url)
    try:
        now = datetime.now(timezone.utc)
        identity = Identity(user="pilot", group="lhcb_pilot", vo="lhcb", role="pilot")
        return {pid: create_token(engine, identity, now, description=f"test pilot {pid}", lifetime=timedelta(hours=1))
                for pid in pilot_ids}
    finally:
        engine.dispose()


def start_pilot(server: ServerHandle, token: str, tmp_path: Path, pilot_id: str,
                max_empty: int, *options: str) -> tuple[subprocess.Popen, Path]:
    """One single-slot pilot of the local queue; its log in tmp_path/pilots (shown when a test fails)."""
    site, ce, queue = LOCAL
    logs = tmp_path / "pilots"
    logs.mkdir(exist_ok=True)
    log = logs / f"{pilot_id}.log"
    command = [sys.executable, "-m", "pilot.main", "--url", server.url, "--site", site, "--ce", ce, "--queue", queue,
               "--workdir", str(tmp_path / pilot_id), "--poll", "0.2", "--heartbeat", "5",
               "--max-empty", str(max_empty), "--min-time-left", "0", "--slots", "1", "--pilot-id", pilot_id,
               "--platform", "x86_64-el9", *options]
    with log.open("w") as out:
        process = subprocess.Popen(command, env={**os.environ, "WMS_PILOT_TOKEN": token}, cwd=REPO,
                                   stdout=out, stderr=subprocess.STDOUT, text=True)
    return process, log


def user_tokens(database_url: str, count: int) -> list[str]:
    """``count`` new tokens of roland, made in this process (as pilot_tokens makes pilots')."""
    engine = make_engine(database_url)
    try:
        now = datetime.now(timezone.utc)
        identity = Identity(user="roland", group="lhcb_user", vo="lhcb", role="user")
        return [create_token(engine, identity, now, description="test user", lifetime=timedelta(hours=1))
                for _ in range(count)]
    finally:
        engine.dispose()


class LockedTokens:
    """The tokens table locked by a connection of the test, until ``unlock()``:
    a server reading a token it has not cached waits."""

    def __init__(self, database_url: str) -> None:
        self.engine = make_engine(database_url)
        self.conn = self.engine.connect()
        if self.engine.dialect.name == "postgresql":
            self.conn.begin()
            self.conn.execute(text("LOCK TABLE tokens IN ACCESS EXCLUSIVE MODE"))
        else:
            self.conn.execute(text("LOCK TABLES tokens WRITE"))

    def unlock(self) -> None:
        if self.conn.closed:
            return
        if self.engine.dialect.name == "postgresql":
            self.conn.commit()
        else:
            self.conn.execute(text("UNLOCK TABLES"))
        self.conn.close()
        self.engine.dispose()
