"""The checks of an identity provider's token that need no network
(wms/core/oidc_tokens.py), and the oidc: section of wms.yaml."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from wms.config.models import OidcMapping, Settings
from wms.core.errors import Forbidden, Unauthorized
from wms.core.identity import Identity
from wms.core.oidc_tokens import check_claims, map_identity, read_unverified

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=timezone.utc)
T = int(NOW.timestamp())
ISSUER = "https://iam.example.org/"
MAPPINGS = [OidcMapping(idp_group="/lhcb/prod", group="lhcb_prod", role="operator"),
            OidcMapping(scope="wms.manage", group="lhcb_admin", role="manager"),
            OidcMapping(idp_group="/lhcb", group="lhcb_user")]


def part(value) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def token(header=None, claims=None) -> str:
    return f"{part(header or {'alg': 'RS256', 'kid': 'k1'})}.{part(claims or {'iss': ISSUER})}.c2ln"


def read(text: str):
    return read_unverified(text, max_bytes=4096, algorithms=("RS256", "ES256"), issuers=[ISSUER])


def refusal(claims, skew=60) -> str:
    with pytest.raises(Unauthorized) as raised:
        check_claims(claims, audience="https://wms.example.org", now=NOW, skew=skew)
    return str(raised.value)


def valid(**more):
    return {"iss": ISSUER, "aud": "https://wms.example.org", "exp": T + 600, **more}


def test_a_well_formed_token_is_read_before_it_is_verified():
    unverified = read(token())
    assert (unverified.algorithm, unverified.key_id, unverified.issuer) == ("RS256", "k1", ISSUER)


@pytest.mark.parametrize("text, message", [
    ("x" * 5000, "token too long: 5000 bytes, at most 4096 (identity_provider_checks.max_token_bytes)"),
    (token({"alg": "HS256"}), "token signed with algorithm HS256, which this server does not accept "
                              "(it accepts RS256, ES256)"),
    (token({"alg": "none"}), "token signed with algorithm none, which this server does not accept "
                             "(it accepts RS256, ES256)"),
    (token({"alg": "RS256", "crit": ["exp"]}), 'token header has critical extensions ["exp"] this server does not '
                                                "know"),
    (token(claims={"sub": "x"}), "token names no issuer (iss)"),
    (token(claims={"iss": "https://evil.example/"}), "token issuer https://evil.example/ is not one this server "
                                                     f"trusts (trusted: {ISSUER})"),
    (token()[:-5] + ".", "token has no signature"),
])
def test_a_hostile_token_is_refused_before_any_key_is_fetched(text, message):
    with pytest.raises(Unauthorized) as raised:
        read(text)
    assert str(raised.value) == message


def test_the_clock_skew_is_allowed_on_exp_and_nbf_and_no_more():
    check_claims(valid(exp=T - 60, nbf=T + 60), audience="https://wms.example.org", now=NOW, skew=60)
    assert refusal(valid(exp=T - 61)) == ("token expired at 2026-11-29T11:58:59+00:00 (now 2026-11-29T12:00:00+00:00, "
                                          "60 s of clock skew allowed); sign in again (wms login)")
    assert refusal(valid(nbf=T + 61)) == ("token not valid before 2026-11-29T12:01:01+00:00 "
                                          "(now 2026-11-29T12:00:00+00:00, 60 s of clock skew allowed)")
    assert refusal(valid(iat=T + 61)).startswith("token issued in the future")


def test_a_token_must_end_and_name_this_server_among_its_audiences():
    check_claims(valid(aud=["https://other.example", "https://wms.example.org"]),
                 audience="https://wms.example.org", now=NOW, skew=0)
    assert refusal({"iss": ISSUER, "aud": "https://wms.example.org"}) == (
        "token has no expiry (exp): this server accepts only tokens that end")
    assert refusal(valid(aud=["a", "b"])) == "token audience is a, b, this server is https://wms.example.org"
    assert refusal(valid(aud=None)) == "token audience is not given, this server is https://wms.example.org"
    assert refusal(valid(exp="tomorrow")) == "token claim exp is not a time (seconds since 1970): tomorrow"


def test_the_first_mapping_that_matches_gives_group_and_role():
    def who(**claims) -> Identity:
        return map_identity({"sub": "u1", **claims}, vo="lhcb", user_claim="sub", groups_claim="wlcg.groups",
                            mappings=MAPPINGS)

    assert who(**{"wlcg.groups": ["/lhcb", "/lhcb/prod"]}) == Identity("u1", "lhcb_prod", "lhcb", "operator")
    assert who(**{"wlcg.groups": ["/lhcb"], "scope": "openid wms.manage"}) == Identity("u1", "lhcb_admin", "lhcb",
                                                                                      "manager")
    assert who(**{"wlcg.groups": ["/lhcb"]}) == Identity("u1", "lhcb_user", "lhcb", "user")


def test_a_token_without_a_user_or_a_mapped_group_is_refused():
    with pytest.raises(Unauthorized, match="token has no user: its preferred_username claim is missing or empty"):
        map_identity({"sub": "u1"}, vo="lhcb", user_claim="preferred_username", groups_claim="wlcg.groups",
                     mappings=MAPPINGS)
    with pytest.raises(Forbidden) as raised:
        map_identity({"sub": "u1", "wlcg.groups": ["/atlas"]}, vo="lhcb", user_claim="sub",
                     groups_claim="wlcg.groups", mappings=MAPPINGS)
    assert str(raised.value) == ("user u1 of VO lhcb is in no group this server maps (groups in wlcg.groups: /atlas); "
                                 "ask the VO's administrators for membership")


def provider(**more):
    return {"issuer": ISSUER, "vo": "lhcb", "audience": "https://wms.example.org",
            "mappings": [{"idp_group": "/lhcb", "group": "lhcb_user"}], **more}


@pytest.mark.parametrize("settings, message", [
    ({"identity_providers": [{k: v for k, v in provider().items() if k != "audience"}]},
     "identity_providers.0.audience\n  Field required"),
    ({"identity_providers": [provider(mappings=[{"idp_group": "/lhcb", "scope": "s", "group": "g"}])]},
     "a mapping names exactly one of idp_group or scope"),
    ({"identity_providers": [provider(mappings=[{"idp_group": "/lhcb", "group": "g", "role": "pilot"}])]},
     "Input should be 'user', 'operator' or 'manager'"),
    ({"identity_providers": [provider(issuer="iam.example.org")]}, "expected an http(s) URL"),
    ({"identity_providers": [provider(), provider()]}, f"issuer {ISSUER} is listed twice"),
    ({"identity_provider_checks": {"algorithms": ["HS256"]}}, "Input should be 'RS256'"),
])
def test_a_wrong_identity_provider_is_refused_saying_what(settings, message):
    with pytest.raises(ValidationError) as raised:
        Settings.model_validate(settings)
    assert message in str(raised.value)


@given(st.one_of(st.text(max_size=300), st.builds(lambda a, b, c: f"eyJ{a}.{b}.{c}", st.text(max_size=100),
                                                   st.text(max_size=100), st.text(max_size=50)),
                 st.builds(lambda h, c: token(h, c), st.dictionaries(st.text(max_size=5), st.recursive(
                     st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                 max_size=3)), max_size=4),
                           st.dictionaries(st.sampled_from(["iss", "aud", "exp", "nbf", "sub"]),
                                           st.integers() | st.text(max_size=5), max_size=5))))
def test_any_bearer_text_is_read_or_refused_in_one_line(text):
    try:
        read(text)
    except Unauthorized as refused:
        assert "\n" not in str(refused) and len(str(refused)) < 400
