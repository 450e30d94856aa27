"""Database servers of the fault tests' own: a PostgreSQL cluster and a
MariaDB server in temporary directories, on free ports, that the tests may
crash (immediate stop, SIGKILL) and start again. The machine's servers are
never touched.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

from tests.e2e.processes import missing_service, tail
from tests.helpers import patience
from tests.servers import free_port
from wms.db.engine import make_engine


def _as(user: str, argv: list[str]) -> list[str]:
    """``argv`` run as ``user`` when we are root (PostgreSQL refuses to run as root)."""
    return ["runuser", "-u", user, "--", *argv] if os.geteuid() == 0 else argv


def _keep(log: Path, copy: Path | None) -> None:
    if copy is not None and log.exists():
        shutil.copyfile(log, copy)


def create_database(admin_url: str) -> None:
    """The database ``wms`` on the server of ``admin_url``."""
    admin = make_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text("CREATE DATABASE wms"))
    admin.dispose()


class PrivatePostgres:
    """A PostgreSQL cluster of our own: initdb, pg_ctl start, pg_ctl stop -m immediate."""

    def __init__(self) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        if not found:
            missing_service("PostgreSQL server binaries not found (/usr/lib/postgresql/*/bin)")
        self.bin = Path(found[-1]).parent
        # Under /tmp, not pytest's 0700 directory: the server runs as postgres.
        self.root = Path(tempfile.mkdtemp(prefix="wms-faults-pg-"))
        self.data, self.log = self.root / "data", self.root / "server.log"
        self.port = free_port()
        os.chmod(self.root, 0o755)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
        subprocess.run(_as("postgres", [str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U",
                                        "postgres", "--no-sync"]), check=True, capture_output=True)
        self.start()
        create_database(self.url("postgres"))

    def url(self, database: str = "wms") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _ctl(self, *args: str) -> None:
        result = subprocess.run(_as("postgres", [str(self.bin / "pg_ctl"), "-D", str(self.data), *args]),
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise AssertionError(f"pg_ctl {' '.join(args)}: {result.stderr}\n{tail(self.log)}")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=200"
        self._ctl("-o", options, "-l", str(self.log), "-w", "-t", str(int(patience(120))), "start")

    def crash(self) -> None:
        """As a power cut would leave it: no checkpoint, recovery at the next start."""
        self._ctl("-m", "immediate", "-w", "stop")

    def close(self, keep_log: Path | None = None) -> None:
        """Stop it and remove its files; its log is copied to ``keep_log`` first (for a failure report)."""
        subprocess.run(_as("postgres", [str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                                        "stop"]), capture_output=True)
        _keep(self.log, keep_log)
        shutil.rmtree(self.root, ignore_errors=True)


class PrivateMariaDB:
    """A MariaDB server of our own: mariadb-install-db, mariadbd, SIGKILL."""

    def __init__(self) -> None:
        install, server = shutil.which("mariadb-install-db"), shutil.which("mariadbd", path="/usr/sbin:/usr/bin")
        if install is None or server is None:
            missing_service("MariaDB server binaries not found (mariadb-install-db, mariadbd)")
        self.server = server
        self.root = Path(tempfile.mkdtemp(prefix="wms-faults-mariadb-"))
        self.data, self.log = self.root / "data", self.root / "server.log"
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        user = ["--user=root"] if os.geteuid() == 0 else []
        subprocess.run([install, "--no-defaults", f"--datadir={self.data}", "--auth-root-authentication-method=normal",
                        "--skip-test-db", *user], check=True, capture_output=True)
        self.start()
        create_database(self.url(""))

    def url(self, database: str = "wms") -> str:
        return f"mysql://root@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        user = ["--user=root"] if os.geteuid() == 0 else []
        with self.log.open("a") as log:
            self.process = subprocess.Popen(
                [self.server, "--no-defaults", f"--datadir={self.data}", f"--port={self.port}",
                 f"--socket={self.root / 'mariadb.sock'}", "--bind-address=127.0.0.1", "--skip-name-resolve",
                 f"--pid-file={self.root / 'mariadb.pid'}", "--max-connections=200", *user],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + patience(120)
        while True:
            engine = make_engine(self.url(""), pool_size=1, connect_args={"connect_timeout": 1})
            try:
                with engine.connect() as conn:
                    conn.execute(text("SELECT 1"))
                return
            except Exception as exc:  # noqa: BLE001 - not up yet
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"mariadbd did not start: {exc}\n{tail(self.log)}") from None
                time.sleep(0.2)
            finally:
                engine.dispose()

    def crash(self) -> None:
        """SIGKILL: InnoDB recovers from its log at the next start."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
            self.process = None

    def close(self, keep_log: Path | None = None) -> None:
        """Stop it and remove its files; its log is copied to ``keep_log`` first (for a failure report)."""
        self.crash()
        _keep(self.log, keep_log)
        shutil.rmtree(self.root, ignore_errors=True)
