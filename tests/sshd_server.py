"""A real OpenSSH server of the tests' own on a loopback port.

Its host key and the client key it accepts are generated in a temporary
directory; it lets in the user running the tests with that key only, and
a known_hosts file names its host key, so clients check it as they would
any host. ``stop()`` ends it and removes the directory.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.e2e.processes import stop
from tests.helpers import ENDS_WITH_TEST, patience
from tests.servers import free_port

SSHD_CONFIG = """\
ListenAddress 127.0.0.1
Port {port}
HostKey {dir}/host_key
PidFile {dir}/sshd.pid
AuthorizedKeysFile {dir}/authorized_keys
AllowUsers {user}
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
UsePAM no
# The temporary directory is not the user's home: skip the ownership checks on it.
StrictModes no
"""


def sshd_path() -> str | None:
    return shutil.which("sshd", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))


def why_not_runnable() -> str | None:
    if sshd_path() is None:
        return "sshd not found: the ssh backend tests need the package openssh-server (make test-packages)"
    if shutil.which("ssh") is None:
        return "ssh not found: the ssh backend tests need the package openssh-client"
    return None


class SshServer:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="wms-sshd-"))
        self.port = free_port()
        self.user = getpass.getuser()
        self.client_key = self.dir / "client_key"
        self.known_hosts = self.dir / "known_hosts"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> "SshServer":
        for key in (self.dir / "host_key", self.client_key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        (self.dir / "authorized_keys").write_text(Path(f"{self.client_key}.pub").read_text())
        host_key = Path(f"{self.dir / 'host_key'}.pub").read_text().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_key[0]} {host_key[1]}\n")
        config = self.dir / "sshd_config"
        config.write_text(SSHD_CONFIG.format(port=self.port, dir=self.dir, user=self.user))
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)    # sshd's privilege separation directory
        with open(self.dir / "sshd.log", "wb") as log:
            self.process = subprocess.Popen([*ENDS_WITH_TEST, sshd_path(), "-D", "-e", "-f", str(config)], stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        timeout = patience(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"sshd exited with {self.process.returncode}: {self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"sshd did not listen on {self.port} within {timeout} s: {self.log()}")

    def log(self) -> str:
        try:
            return (self.dir / "sshd.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def stop(self) -> None:
        stop(self.process)
        shutil.rmtree(self.dir, ignore_errors=True)
