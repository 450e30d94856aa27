"""A token issuer of the tests' own: an RSA key made with openssl, its
OpenID discovery document and key set served over HTTPS on a loopback
port (with a certificate the caller gives), and JWTs (RS256) it signs,
for services that check tokens against their issuer's published keys
(the ARC CE of tests/arc.py, which takes keys fetched over https only)."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from tests.servers import free_port

KEY_ID = "wms-test-key"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class TokenIssuer:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="wms-issuer-"))
        self.port = free_port()
        self.url = f"https://localhost:{self.port}"
        self.key = self.dir / "issuer-key.pem"
        self._server: ThreadingHTTPServer | None = None

    def start(self, cert: Path, key: Path) -> "TokenIssuer":
        """Serve the documents over TLS with ``cert`` and ``key`` (a host certificate for localhost)."""
        subprocess.run(["openssl", "genrsa", "-out", str(self.key), "2048"], check=True, capture_output=True)
        modulus = subprocess.run(["openssl", "rsa", "-in", str(self.key), "-noout", "-modulus"], check=True,
                                 capture_output=True, text=True).stdout.strip().split("=", 1)[1]
        jwks = {"keys": [{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": KEY_ID,
                          "n": _b64url(bytes.fromhex(modulus)), "e": _b64url((65537).to_bytes(3, "big"))}]}
        discovery = {"issuer": self.url, "jwks_uri": f"{self.url}/jwks",
                     "id_token_signing_alg_values_supported": ["RS256"]}
        documents = {"/.well-known/openid-configuration": discovery, "/jwks": jwks}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                # A-REX asks in the absolute form (GET http://host:port/path).
                document = documents.get(urlsplit(self.path).path)
                body = json.dumps(document).encode() if document is not None else b"{}"
                self.send_response(200 if document is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def token(self, subject: str, lifetime: int = 3600) -> str:
        """A signed JWT for ``subject`` living ``lifetime`` seconds."""
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": KEY_ID}
        claims = {"iss": self.url, "sub": subject, "aud": "https://wlcg.cern.ch/jwt/v1/any", "iat": now,
                  "nbf": now - 60, "exp": now + lifetime, "scope": "compute.create compute.read compute.modify "
                  "compute.cancel", "wlcg.ver": "1.0", "jti": f"{subject}-{now}"}
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(self.key)],
                                   input=signing_input.encode(), check=True, capture_output=True).stdout
        return f"{signing_input}.{_b64url(signature)}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
