"""A real ARC CE of the tests' own: A-REX 6.17 from Debian with its REST
interface and the fork LRMS, on a free loopback port.

Everything lives in one temporary directory: a test CA, a host
certificate for ``localhost`` and a user certificate made with
``arcctl test-ca``; arc.conf, which maps that user's subject to
``nobody:nogroup`` (A-REX refuses to run jobs as root), and so the tokens
for ``TOKEN_SUBJECT`` of the fixture's own issuer (tests/token_issuer.py,
over https with the CE's host certificate); and the two arched processes
A-REX 6 is made of, the grid manager (runs the jobs, the LRMS scripts and
the information provider) and the web-service front end (TLS, REST). The
one thing outside that directory: A-REX checks a token issuer's
certificate against /etc/grid-security/certificates only, so the test
CA's hashed files go there while the CE runs (a CA name of its own per
instance, so that sessions never meet).

The arched configurations are written here rather than by the packaged
start scripts, for three reasons: those listen on every interface (arc.conf
cannot choose one); they start a 4096-bit Diffie-Hellman generation that
takes minutes when no parameters exist (written here at once, 2048-bit
DSA-style); and the information provider, from which REST job states are
read, runs every 60 s by default: a job would look unfinished for a
minute after it ends. ``InfoproviderWakeupPeriod`` is in tenths of a
second in this version; 20 makes it run every 2 s.

Fork-LRMS jobs inherit the grid manager's process group and outlive a
cancel (the fork LRMS kills the watcher it recorded, not the payload), so
each arched runs in a session of its own and ``stop()`` signals both
groups. ``start()`` returns once the REST interface answers and the first
information document is written (submission needs it).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from tests.helpers import ENDS_WITH_TEST, patience
from tests.servers import free_port
from tests.token_issuer import TokenIssuer

# What a machine needs (Debian package names) and a file each brings.
PACKAGES = {
    "nordugrid-arc-arex": "/usr/sbin/arched",
    "nordugrid-arc-plugins-arcrest": "/usr/lib/arc/libaccARCREST.so",
    "nordugrid-arc-arcctl": "/usr/sbin/arcctl",
    "nordugrid-arc-client": "/usr/bin/arcsub",
}
ARCHED = "/usr/sbin/arched"
SYSTEM_CA_DIR = Path("/etc/grid-security/certificates")
CONFIG_PARSER = "/usr/lib/arc/arcconfig-parser"
USER_NAME = "WMS Test Director"
# The unprivileged account the CE runs jobs as.
JOB_ACCOUNT = "nobody:nogroup"
# The token subject the CE lets in (from the fixture's own issuer).
TOKEN_SUBJECT = "wms-test-director"

ARC_CONF = """\
[common]
hostname = localhost
x509_host_key = {dir}/host-localhost-key.pem
x509_host_cert = {dir}/host-localhost-cert.pem
x509_cert_dir = {dir}/certificates

[authtokens]

[authgroup:director]
subject = {subject}

[authgroup:tokens]
authtokens = {token_subject} {issuer} * * *

[mapping]
map_to_user = director {account}
map_to_user = tokens {account}

[lrms]
lrms = fork

[arex]
loglevel = 3
logfile = {dir}/log/arex.log
pidfile = {dir}/run/arex.pid
controldir = {dir}/control
sessiondir = {dir}/session
tmpdir = {dir}/tmp
runtimedir = {dir}/rte
wakeupperiod = 2

[arex/ws]
wsurl = https://localhost:{port}/arex
logfile = {dir}/log/ws.log
pidfile = {dir}/run/ws.pid

[arex/ws/jobs]
allowaccess = director
allowaccess = tokens

[infosys]
logfile = {dir}/log/infoprovider.log

[infosys/glue2]

[infosys/cluster]

[queue:fork]
"""

GRID_MANAGER_XML = """\
<?xml version="1.0"?>
<ArcConfig xmlns="http://www.nordugrid.org/schemas/ArcConfig/2007"
  xmlns:arex="http://www.nordugrid.org/schemas/a-rex/Config">
  <Server><Logger><File>{dir}/log/arex.log</File><Level>INFO</Level></Logger>
    <Watchdog>false</Watchdog></Server>
  <ModuleManager><Path>/usr/lib/arc/</Path></ModuleManager>
  <Plugins><Name>arex</Name></Plugins>
  <Chain><Service name="a-rex" id="a-rex">
    <arex:endpoint>https://localhost:{port}/arex</arex:endpoint>
    <arex:InfoproviderWakeupPeriod>20</arex:InfoproviderWakeupPeriod>
    <arex:gmconfig>{dir}/run/arex.cfg</arex:gmconfig>
  </Service></Chain>
</ArcConfig>
"""

WS_XML = """\
<?xml version="1.0"?>
<ArcConfig xmlns="http://www.nordugrid.org/schemas/ArcConfig/2007"
  xmlns:tcp="http://www.nordugrid.org/schemas/ArcMCCTCP/2007"
  xmlns:arex="http://www.nordugrid.org/schemas/a-rex/Config">
  <Server><Logger><File>{dir}/log/ws.log</File><Level>INFO</Level></Logger>
    <Watchdog>false</Watchdog></Server>
  <ModuleManager><Path>/usr/lib/arc/</Path></ModuleManager>
  <Plugins><Name>mcctcp</Name></Plugins><Plugins><Name>mcctls</Name></Plugins>
  <Plugins><Name>mcchttp</Name></Plugins><Plugins><Name>mccsoap</Name></Plugins>
  <Plugins><Name>arex</Name></Plugins><Plugins><Name>identitymap</Name></Plugins>
  <Plugins><Name>arcshc</Name></Plugins><Plugins><Name>arcshclegacy</Name></Plugins>
  <Plugins><Name>arcshcotokens</Name></Plugins>
  <Chain>
    <Component name="tcp.service" id="tcp"><next id="tls"/>
      <tcp:Listen><tcp:Interface>127.0.0.1</tcp:Interface><tcp:Port>{port}</tcp:Port></tcp:Listen>
    </Component>
    <Component name="tls.service" id="tls"><next id="http"/>
      <KeyPath>{dir}/host-localhost-key.pem</KeyPath>
      <CertificatePath>{dir}/host-localhost-cert.pem</CertificatePath>
      <CACertificatesDir PolicyGlobus="true">{dir}/certificates</CACertificatesDir>
      <VOMSProcessing>standard</VOMSProcessing><ClientAuthn>false</ClientAuthn>
      <Ciphers>HIGH:!eNULL:!aNULL</Ciphers><Protocol>TLSv1.2 TLSv1.3</Protocol>
      <Curve>secp521r1</Curve><DHParamFile>{dir}/control/dhparam.pem</DHParamFile>
    </Component>
    <Component name="http.service" id="http"><next id="soap">POST</next><next id="plexer"/>
      <SecHandler name="otokens.handler" event="incoming"/>
      <SecHandler name="arclegacy.handler" event="incoming">
        <ConfigFile>{dir}/run/arex.cfg</ConfigFile></SecHandler>
    </Component>
    <Component name="soap.service" id="soap"><next id="plexer"/>
      <ContinueNonSOAP>true</ContinueNonSOAP></Component>
    <Plexer name="plexer.service" id="plexer"><next id="a-rex">^/arex</next></Plexer>
    <Service name="a-rex" id="a-rex">
      <SecHandler name="arclegacy.map" event="incoming"><ConfigBlock>
        <ConfigFile>{dir}/run/arex.cfg</ConfigFile><BlockName>mapping</BlockName>
      </ConfigBlock></SecHandler>
      <arex:endpoint>https://localhost:{port}/arex</arex:endpoint>
      <arex:gmconfig>{dir}/run/arex.cfg</arex:gmconfig>
      <arex:gmrun>none</arex:gmrun>
    </Service>
  </Chain>
</ArcConfig>
"""


def missing_packages() -> list[str]:
    return [package for package, path in PACKAGES.items() if not Path(path).exists()]


def why_not_runnable() -> str | None:
    """Why a private A-REX cannot start here, or None."""
    missing = missing_packages()
    if missing:
        return f"the ARC CE tests need the packages {', '.join(missing)} (make test-packages)"
    if os.geteuid() != 0:
        return "the ARC CE tests need root (A-REX maps jobs to another account)"
    return None


class ArcCE:
    """A private A-REX; ``endpoint``, ``ca_dir``, ``user_cert`` and ``user_key`` are what a client needs."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="wms-arex-"))
        self.port = free_port()
        self.endpoint = f"https://localhost:{self.port}/arex"
        self.ca_dir = self.dir / "certificates"
        self.user_cert = self.dir / f"client-{USER_NAME.replace(' ', '-')}-cert.pem"
        self.user_key = self.dir / f"client-{USER_NAME.replace(' ', '-')}-key.pem"
        self.session_dir = self.dir / "session"
        self.processes: list[subprocess.Popen] = []
        # A CA of its own name: two sessions on one machine never share a hash in SYSTEM_CA_DIR.
        self.ca_id = f"wms{secrets.token_hex(4)}"
        self.installed: list[Path] = []
        # The CE also takes the tokens of this issuer for TOKEN_SUBJECT.
        self.issuer = TokenIssuer()

    # -- set-up ------------------------------------------------------------------------
    def _arcctl(self, *args: str) -> None:
        subprocess.run(["arcctl", "-c", "/dev/null", "test-ca", "--ca-dir", str(self.ca_dir), "--ca-id", self.ca_id,
                        *args], cwd=self.dir, check=True, capture_output=True, timeout=60)

    def _prepare(self) -> None:
        # The jobs run as nobody: their session directories must be reachable.
        self.dir.chmod(0o755)
        for sub in ("run", "log", "control", "rte"):
            (self.dir / sub).mkdir()
        for sub in ("session", "tmp"):
            (self.dir / sub).mkdir(mode=0o1777)
            (self.dir / sub).chmod(0o1777)
        self._arcctl("init")
        self._arcctl("hostcert", "-n", "localhost")
        self._arcctl("usercert", "-n", USER_NAME, "--no-auth")
        subject = subprocess.run(["openssl", "x509", "-in", str(self.user_cert), "-noout", "-subject",
                                  "-nameopt", "compat"], check=True, capture_output=True, text=True
                                 ).stdout.strip().removeprefix("subject=")
        self.subject = subject
        self._trust_ca_system_wide()
        self.issuer.start(self.dir / "host-localhost-cert.pem", self.dir / "host-localhost-key.pem")
        # Without it the front end would start generating 4096-bit parameters (minutes).
        subprocess.run(["openssl", "dhparam", "-dsaparam", "-out", str(self.dir / "control" / "dhparam.pem"), "2048"],
                       check=True, capture_output=True, timeout=60)
        values = {"dir": self.dir, "port": self.port, "subject": subject, "account": JOB_ACCOUNT,
                  "token_subject": TOKEN_SUBJECT, "issuer": self.issuer.url}
        (self.dir / "arc.conf").write_text(ARC_CONF.format(**values))
        subprocess.run([CONFIG_PARSER, "--config", str(self.dir / "arc.conf"), "--runconfig",
                        str(self.dir / "run" / "arex.cfg"), "--save"], check=True, capture_output=True, timeout=60)
        (self.dir / "gm.xml").write_text(GRID_MANAGER_XML.format(**values))
        (self.dir / "ws.xml").write_text(WS_XML.format(**values))

    def _trust_ca_system_wide(self) -> None:
        """A-REX fetches a token issuer's keys (over https only) with the
        default trust store, not the configured CA directory: the test CA,
        which signed the issuer's certificate, goes there until stop()."""
        SYSTEM_CA_DIR.mkdir(parents=True, exist_ok=True)
        for source in [*self.ca_dir.glob("*.0"), *self.ca_dir.glob("*.signing_policy")]:
            target = SYSTEM_CA_DIR / source.name
            if source.name.startswith("ARC-TestCA-") or target.exists():
                continue
            shutil.copyfile(source, target)
            self.installed.append(target)

    def start(self, timeout: float = 60) -> "ArcCE":
        self._prepare()
        env = {**os.environ, "X509_CERT_DIR": str(self.ca_dir)}
        for name in ("gm", "ws"):
            with open(self.dir / "log" / f"{name}.out", "wb") as out:
                # A session each: stop() signals the groups, fork-LRMS payloads included.
                self.processes.append(subprocess.Popen(
                    [*ENDS_WITH_TEST, ARCHED, "-f", "-c", str(self.dir / f"{name}.xml")], stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, env=env, start_new_session=True))
        deadline = time.monotonic() + patience(timeout)
        info = self.dir / "control" / "info.xml"
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"arched exited with {process.returncode}: {self.log()}")
            if self._listening() and info.exists() and info.stat().st_size > 0:
                return self
            time.sleep(0.2)
        raise RuntimeError(f"A-REX did not come up on port {self.port} within {timeout} s: {self.log()}")

    def _listening(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    # -- use ----------------------------------------------------------------------------
    def ca_file(self) -> Path:
        return self.ca_dir / f"ARC-TestCA-{self.ca_id}.pem"

    def get(self, path: str) -> bytes:
        """GET a REST path (``/jobs/ID/session/FILE``) as the test user: for checks."""
        context = ssl.create_default_context(cafile=str(self.ca_file()))
        context.load_cert_chain(str(self.user_cert), str(self.user_key))
        with urllib.request.urlopen(f"{self.endpoint}/rest/1.0{path}", context=context, timeout=30) as answer:
            return answer.read()

    def user_certificate(self, name: str, directory: Path) -> None:
        """Another user certificate of the CE's CA (``client-<name>-cert.pem`` and key in
        ``directory``), whose subject the CE maps to no account."""
        subprocess.run(["arcctl", "-c", "/dev/null", "test-ca", "--ca-dir", str(self.ca_dir), "--ca-id", self.ca_id,
                        "usercert", "-n", name, "--no-auth"], cwd=directory, check=True, capture_output=True,
                       timeout=60)

    def log(self) -> str:
        parts = []
        for name in ("gm.out", "ws.out", "arex.log", "ws.log"):
            try:
                parts.append(f"--- {name}\n" + (self.dir / "log" / name).read_text(errors="replace")[-1500:])
            except OSError:
                pass
        return "\n".join(parts)

    def stop(self) -> None:
        for process in self.processes:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for process in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        # Payloads the fork LRMS left in the grid manager's group.
        for process in self.processes:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.issuer.stop()
        for path in self.installed:
            path.unlink(missing_ok=True)
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.issuer.dir, ignore_errors=True)
