"""Access tokens of a VO's identity provider (docs/security.md, "Authentication"),
against a real OpenID provider (tests/oidc.py) and a real `wms server`:
who a token makes the caller, and each refusal with what is wrong."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Iterator

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.helpers import patience, wait_until
from tests.oidc import (AUDIENCE, OTHER_CLIENT, PEOPLE, SHORT_CLIENT, config_with_oidc,
                        running_provider)
from tests.servers import ServerHandle, running_server


@pytest.fixture(scope="module")
def server(tmp_path_factory, provider) -> Iterator[ServerHandle]:
    tmp = tmp_path_factory.mktemp("oidc-server")
    config = config_with_oidc(tmp / "config-src", provider, clock_skew=1)
    with running_server(tmp / "server", config_dir=config) as handle:
        yield handle


def whoami(server: ServerHandle, token: str) -> httpx.Response:
    return httpx.get(server.url + "/api/v1/whoami", headers={"Authorization": f"Bearer {token}"},
                     timeout=patience(30))


def refused(server: ServerHandle, token: str, status: int = 401) -> str:
    response = whoami(server, token)
    assert response.status_code == status, response.text
    return response.json()["detail"]


def parts(token: str) -> tuple[dict, dict]:
    head, body, _ = token.split(".")
    return tuple(json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4))) for p in (head, body))  # type: ignore


def encode(value: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


# ---------------------------------------------------------------- who a token makes the caller
@pytest.mark.parametrize("user, expected", [
    ("roland", {"User": "roland", "Group": "lhcb_user", "VO": "lhcb", "Role": "user"}),
    ("oper", {"User": "oper", "Group": "lhcb_prod", "VO": "lhcb", "Role": "operator"}),
    ("admin", {"User": "admin", "Group": "lhcb_prod", "VO": "lhcb", "Role": "manager"}),
    ("andre", {"User": "andre", "Group": "dteam_user", "VO": "dteam", "Role": "user"}),
])
def test_the_providers_groups_make_the_callers_group_vo_and_role(server, provider, user, expected):
    token = provider.tokens_for(user)["access_token"]
    response = whoami(server, token)
    assert response.status_code == 200, response.text
    assert {k: response.json()[k] for k in expected} == expected


def test_a_signed_in_user_submits_and_owns_the_job(server, provider):
    token = provider.tokens_for("alice")["access_token"]
    with server.api(token) as api:
        submitted = api.post("/jobs", json={"jdls": [{"source": "a.jdl", "text": '[ Executable = "/bin/true"; ]'}]})
        assert submitted.is_success, submitted.text
        job = api.get(f"/jobs/{submitted.json()['job_ids'][0]}").json()
    assert (job["Owner"], job["OwnerGroup"]) == ("alice", "lhcb_user")


def test_wms_tokens_keep_working_beside_the_providers(server, provider):
    token = server.token("bob", "lhcb_user", "lhcb", "user")
    assert whoami(server, token).json()["User"] == "bob"
    assert whoami(server, provider.tokens_for("roland")["access_token"]).json()["User"] == "roland"


def test_the_server_names_its_providers_for_wms_login(server, provider):
    answer = httpx.get(server.url + "/api/v1/auth/issuers", timeout=patience(30)).json()
    assert answer == {"Issuers": [{"Issuer": provider.issuer, "VO": "lhcb", "ClientID": "wms-cli",
                                   "ConsoleClientID": "wms-console",
                                   "Scope": "openid offline_access wlcg.groups",
                                   "DeviceEndpoint": provider.issuer + "/device-authorization/"}]}


# ---------------------------------------------------------------- refusals: 401 with what is wrong
def test_an_expired_token_is_refused_with_its_end(server, provider):
    token = provider.tokens_for("roland", client_id=SHORT_CLIENT)["access_token"]
    expires = parts(token)[1]["exp"]
    detail = wait_until(lambda: whoami(server, token).status_code == 401 and refused(server, token),
                        timeout=10, what="the one-second token refused")
    assert detail.startswith("token expired at ")
    assert "1 s of clock skew allowed" in detail and "wms login" in detail
    from datetime import datetime, timezone
    assert datetime.fromtimestamp(expires, timezone.utc).isoformat(timespec="seconds") in detail


def test_a_token_for_another_service_is_refused_naming_both_audiences(server, provider):
    token = provider.tokens_for("roland", client_id=OTHER_CLIENT)["access_token"]
    assert refused(server, token) == f"token audience is https://other.example, this server is {AUDIENCE}"


def test_a_token_of_an_issuer_not_configured_is_refused(server, tmp_path):
    with running_provider(tmp_path / "other-op", AUDIENCE, {"roland": ["/lhcb"]}) as other:
        token = other.tokens_for("roland")["access_token"]
        detail = refused(server, token)
    assert detail.startswith(f"token issuer {other.issuer} is not one this server trusts (trusted: ")


def test_an_altered_token_is_refused_as_badly_signed(server, provider):
    token = provider.tokens_for("roland")["access_token"]
    head, claims = parts(token)
    claims["wlcg.groups"] = ["/lhcb", "/lhcb/admin"]            # a user making himself manager
    forged = ".".join([token.split(".")[0], encode(claims), token.split(".")[2]])
    assert refused(server, forged) == (f"token signature does not match key {head['kid']} of issuer "
                                       f"{provider.issuer} (badly signed or altered)")


def test_a_token_signed_with_another_key_under_the_providers_key_id_is_refused(server, provider):
    head, claims = parts(provider.tokens_for("roland")["access_token"])
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode(claims, other_key, algorithm="RS256", headers={"kid": head["kid"]})
    assert "token signature does not match key" in refused(server, forged)


def test_a_token_with_a_key_id_the_provider_does_not_publish_is_refused(server, provider):
    head, claims = parts(provider.tokens_for("roland")["access_token"])
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode(claims, other_key, algorithm="RS256", headers={"kid": "not-a-key-of-it"})
    assert refused(server, forged) == (f"token signed with key not-a-key-of-it for RS256, which issuer "
                                       f"{provider.issuer} does not publish (badly signed, or signed by another "
                                       "server)")


def test_a_flood_of_forged_key_ids_costs_the_provider_one_fetch_per_interval(server, provider):
    """key_refresh_interval (10 s here): unknown key ids make the server fetch the keys
    again at most once per interval, however many come."""
    head, claims = parts(provider.tokens_for("roland")["access_token"])
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def fetches() -> int:
        return provider.log.read_text().count("GET /o/.well-known/jwks.json")

    before = fetches()
    for n in range(20):
        forged = jwt.encode(claims, other_key, algorithm="RS256", headers={"kid": f"forged-{n}"})
        assert "which issuer" in refused(server, forged)
    assert fetches() - before <= 1
    assert fetches() >= 1              # the log does show the fetches (the server fetched at least once)


@pytest.mark.parametrize("alg", ["none", "HS256"])
def test_unsigned_and_shared_secret_tokens_are_refused_before_any_key_is_read(server, provider, alg):
    head, claims = parts(provider.tokens_for("roland")["access_token"])
    if alg == "none":
        forged = f"{encode({'alg': 'none', 'typ': 'JWT'})}.{encode(claims)}."
    else:
        # The provider's public key as an HMAC secret: the classic confusion attack.
        jwks = httpx.get(provider.discovery()["jwks_uri"], timeout=patience(10)).json()
        secret = json.dumps(jwks["keys"][0]).encode()
        signed = f"{encode({'alg': 'HS256', 'kid': head['kid']})}.{encode(claims)}"
        mac = hmac.new(secret, signed.encode(), hashlib.sha256).digest()
        forged = f"{signed}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"
    assert refused(server, forged).startswith(f"token signed with algorithm {alg}, which this server does not accept")


def test_a_token_past_the_size_limit_is_refused_before_it_is_decoded(server):
    token = "eyJ" + "A" * 20000 + ".e30.c2ln"
    assert refused(server, token) == "token too long: 20012 bytes, at most 16384 (identity_provider_checks.max_token_bytes)"


def test_a_malformed_token_is_refused_in_one_line(server):
    assert refused(server, "eyJ!!!.e30.x") == ("malformed token: not a JWT (three base64url parts separated by "
                                               "dots)")
    assert refused(server, f"{encode({'alg': 'RS256'})}.bm90IGpzb24.c2ln") == (
        "malformed token: its payload is not base64url-encoded JSON")


def test_a_person_in_no_mapped_group_is_forbidden_saying_so(server, provider):
    token = provider.tokens_for("stranger")["access_token"]
    assert refused(server, token, 403) == ("user stranger of VO lhcb is in no group this server maps (groups in "
                                           "wlcg.groups: /atlas); ask the VO's administrators for membership")


def test_a_refused_token_sent_with_a_body_is_refused_before_the_body_is_read(server, provider):
    token = provider.tokens_for("roland", client_id=OTHER_CLIENT)["access_token"]
    response = httpx.post(server.url + "/api/v1/jobs", headers={"Authorization": f"Bearer {token}"},
                          json={"jdls": [{"source": "a.jdl", "text": "[]"}]}, timeout=patience(30))
    assert response.status_code == 401
    assert response.json()["detail"].startswith("token audience is https://other.example")


# ---------------------------------------------------------------- key rotation, the provider away
def test_key_rotation_and_a_provider_that_does_not_answer(tmp_path):
    """Kept keys go on working while the provider is away; a token signed with a
    new key is 503 then (it may be valid: nobody can tell), and accepted once the
    provider answers again and publishes it. Nothing of a token reaches the log."""
    with running_provider(tmp_path / "op", AUDIENCE, PEOPLE) as op:
        config = config_with_oidc(tmp_path / "config-src", op, key_refresh_interval=0)
        with running_server(tmp_path / "server", config_dir=config) as server:
            before = op.tokens_for("roland")["access_token"]
            assert whoami(server, before).status_code == 200
            op.rotate()
            after = op.tokens_for("roland")["access_token"]
            assert parts(after)[0]["kid"] != parts(before)[0]["kid"]
            assert whoami(server, after).status_code == 200          # an unknown kid: the keys fetched again
            op.rotate()
            newest = op.tokens_for("alice")["access_token"]
            op.stop()
            assert whoami(server, before).json()["User"] == "roland"      # kept keys need no provider
            response = whoami(server, newest)
            assert response.status_code == 503, response.text
            assert response.json()["detail"].startswith(f"the identity provider {op.issuer} is not answering (")
            assert "cannot fetch its signing keys to check this token; try again later" in response.json()["detail"]
            assert response.headers["Retry-After"]
            op.start()
            assert whoami(server, newest).json()["User"] == "alice"
            server.stop()
            log = server.log.read_text()
        for token in (before, after, newest):
            assert token not in log and token.split(".")[2] not in log
