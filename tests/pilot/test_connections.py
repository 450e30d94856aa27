"""The pilot keeps its connection to the server between calls (pilot/connections.py),
against a real ``wms server`` behind a forwarder that counts the connections made."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

import pilot.connections
from pilot.client import Client, NetworkError
from tests.faults.netcuts import Forwarder
from tests.helpers import patience, wait_until
from tests.pilot.conftest import LOCAL
from tests.servers import WMS, ServerHandle, free_port


@pytest.fixture
def counted(server):
    """The server's address behind a forwarder that counts the connections it accepts."""
    host, port = server.url.split("//", 1)[1].rsplit(":", 1)
    forwarder = Forwarder(target=(host, int(port.split("/")[0]))).start()
    yield forwarder
    forwarder.stop()


def client(forwarder: Forwarder, token: str) -> Client:
    return Client(f"http://127.0.0.1:{forwarder.port}", token, timeout=patience(30), sleep=lambda s: None)


def test_a_pilot_makes_its_calls_on_one_connection(counted, tokens):
    c = client(counted, tokens["pilot"])
    for _ in range(20):
        assert c.submit_pools(*LOCAL) is not None
    with pytest.raises(Exception, match="HTTP 404"):      # an error answer keeps the connection too
        c.call("GET", "/no/such/route", retries=0)
    c.submit_pools(*LOCAL)
    assert (counted.accepted, c.connections.opened) == (1, 1)


def test_each_thread_has_its_own_connection(counted, tokens):
    c = client(counted, tokens["pilot"])
    threads = [threading.Thread(target=lambda: [c.submit_pools(*LOCAL) for _ in range(5)]) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counted.accepted == c.connections.opened == 3


def test_a_connection_idle_past_the_servers_keep_alive_is_opened_anew(counted, tokens, monkeypatch):
    """The server (uvicorn) closes a connection idle for 5 s. A pilot that
    waits longer opens a new one; one that reuses the closed connection
    anyway (here: told it may keep it for a minute) sends its call again on a
    new one, and the call succeeds without a retry."""
    c = client(counted, tokens["pilot"])
    c.submit_pools(*LOCAL)
    time.sleep(pilot.connections.KEEP_IDLE + 0.5)
    c.submit_pools(*LOCAL)
    assert counted.accepted == 2
    monkeypatch.setattr(pilot.connections, "KEEP_IDLE", 60.0)
    time.sleep(6.0)                                         # past uvicorn's timeout_keep_alive
    c = Client(c.base, c.token, retries=0, timeout=patience(30))
    c.submit_pools(*LOCAL)
    time.sleep(6.0)
    assert c.submit_pools(*LOCAL) is not None               # retries=0: the resend is not a retry
    assert c.connections.opened == 2


def test_a_call_that_timed_out_leaves_no_half_used_connection_behind(counted, tokens):
    """A call whose answer does not come in time is given up; the next call
    goes on a new connection (the old one is mid-exchange) and is answered."""
    from tests.faults.netcuts import Weather

    c = Client(f"http://127.0.0.1:{counted.port}", tokens["pilot"], timeout=0.5, retries=0, sleep=lambda s: None)
    c.submit_pools(*LOCAL)
    counted.weather = Weather(delay=2.0)
    with pytest.raises(NetworkError, match="timed out"):
        c.submit_pools(*LOCAL)
    counted.weather = Weather()
    time.sleep(2.5)                       # the delayed answer has gone by
    for _ in range(3):
        assert c.submit_pools(*LOCAL) is not None
    assert c.connections.opened == 2


def test_an_answer_not_read_to_its_end_gives_its_connection_up(counted, tokens):
    c = client(counted, tokens["pilot"])
    first = c.call("GET", "/matcher/submit-pools", query=dict(zip(("site", "ce", "queue"), LOCAL)),
                   sink=lambda answer: answer.read(1))
    assert first == b"["
    assert c.submit_pools(*LOCAL) is not None
    assert (counted.accepted, c.connections.opened) == (2, 2)


# ---------------------------------------------------------------- over HTTPS, the server's own TLS
def certificate_for_loopback(into: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, as PEM files."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "wms test server")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = into / "server.pem", into / "server.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@pytest.fixture(scope="module")
def https_server(wms_server, tmp_path_factory):
    """A second `wms server --tls-cert --tls-key` on the package server's database."""
    tmp = tmp_path_factory.mktemp("https")
    cert, key = certificate_for_loopback(tmp)
    url = f"https://127.0.0.1:{free_port()}"
    handle = ServerHandle(tmp, wms_server.config, url, {**wms_server.env, "WMS_URL": url},
                          ("--tls-cert", str(cert), "--tls-key", str(key)))
    handle.start(wait=False)
    try:
        wait_until(lambda: _answers(url, cert), patience(90), "the HTTPS server to answer",
                   details=lambda: handle.log.read_text()[-2000:])
        assert f"wms: serving {url}/api/v1" in handle.log.read_text()
        yield handle, cert
    finally:
        handle.stop()


def _answers(url: str, cert: Path) -> bool:
    import ssl

    import httpx

    try:
        return httpx.get(url + "/api/v1/health", verify=ssl.create_default_context(cafile=str(cert)),
                         timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def test_a_pilot_talks_https_on_one_connection_trusting_the_ca_it_is_given(https_server, tokens, monkeypatch):
    handle, cert = https_server
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))     # how a pilot is told the CA of its server
    c = Client(handle.url, tokens["pilot"], timeout=patience(30), sleep=lambda s: None)
    for _ in range(10):
        assert c.submit_pools(*LOCAL) is not None
    assert c.connections.opened == 1
    monkeypatch.delenv("SSL_CERT_FILE")
    monkeypatch.setenv("SSL_CERT_DIR", "/nonexistent")
    stranger = Client(handle.url, tokens["pilot"], timeout=patience(30), retries=0, sleep=lambda s: None)
    with pytest.raises(NetworkError, match="CERTIFICATE_VERIFY_FAILED"):
        stranger.submit_pools(*LOCAL)


def test_a_server_refuses_half_a_tls_pair_or_files_it_cannot_use(tmp_path, wms_server):
    cert, key = certificate_for_loopback(tmp_path)
    cases = [
        (("--tls-cert", str(cert)), "wms: --tls-cert and --tls-key go together"),
        (("--tls-cert", str(tmp_path / "none.pem"), "--tls-key", str(key)),
         f"wms: --tls-cert {tmp_path / 'none.pem'}: cannot read it: No such file or directory"),
        (("--tls-cert", str(key), "--tls-key", str(key)), f"wms: --tls-cert {key} with --tls-key {key}: not a "
                                                          "certificate and its key"),
    ]
    for options, says in cases:
        done = subprocess.run([*WMS, "server", "--bind", f"127.0.0.1:{free_port()}", *options],
                              env=wms_server.env, capture_output=True, text=True, timeout=patience(60))
        assert done.returncode == 1 and done.stderr.startswith(says), done.stderr
        assert len(done.stderr.splitlines()) == 1, done.stderr
