"""OpenID Connect access tokens (JWTs, RFC 7519): the checks that need no
network, and the mapping of a token's claims to a caller here.

A bearer token that is a JWT is read in three steps, each refusing with
one line that says what is wrong:

1. :func:`read_unverified` bounds the cost of a hostile token: its size is
   checked before anything is decoded, the header must name an allowed
   public-key algorithm (never ``none``, never HS*: with a public key as
   the "secret" anyone could sign) and the issuer must be one wms.yaml
   lists, so that no token makes the server fetch from an address it
   chose;
2. the signature, against the issuer's published keys (services/oidc.py);
3. :func:`check_claims` (``iss``, ``aud``, ``exp``, ``nbf``, ``iat`` with a
   small clock skew) and :func:`map_identity`, which turns the subject and
   its groups (the WLCG token profile's ``wlcg.groups``) or scopes into a
   user, group, VO and role by the issuer's mappings, the first that
   matches.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from wms.core.errors import Forbidden, Unauthorized
from wms.core.identity import Identity

# Three base64url parts; the header a JSON object, so its text starts with "eyJ" ('{"').
_JWT = re.compile(r"^eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$")
# Key ids and names taken from a token are shown in messages: bounded and printable.
_SHOWN = 80
# The longest user name a token may give (the tokens table's user column holds 255).
MAX_USER = 255


def looks_like_jwt(token: str) -> bool:
    """Whether a bearer token has a JWT's shape (wms tokens start with ``wms``)."""
    return token.startswith("eyJ") and token.count(".") == 2


@dataclass(frozen=True)
class Unverified:
    """What a token says before its signature is checked: not to be trusted yet."""

    header: dict[str, Any]
    claims: dict[str, Any]

    @property
    def algorithm(self) -> str:
        return str(self.header["alg"])

    @property
    def key_id(self) -> str | None:
        kid = self.header.get("kid")
        return kid if isinstance(kid, str) else None

    @property
    def issuer(self) -> str:
        return str(self.claims["iss"])


def shown(value: Any) -> str:
    """A value from a token as a message may show it: printable, bounded."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def _part(text: str, what: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError, RecursionError):
        raise Unauthorized(f"malformed token: its {what} is not base64url-encoded JSON") from None
    if not isinstance(value, dict):
        raise Unauthorized(f"malformed token: its {what} is not a JSON object")
    return value


def read_unverified(token: str, *, max_bytes: int, algorithms: Sequence[str],
                    issuers: list[str]) -> Unverified:
    """The header and claims of ``token``, refused (Unauthorized) unless it is
    short enough, well formed, signed with an allowed algorithm and from a
    trusted issuer. Nothing here is verified yet."""
    if len(token) > max_bytes:
        raise Unauthorized(f"token too long: {len(token)} bytes, at most {max_bytes} (identity_provider_checks.max_token_bytes)")
    if not _JWT.match(token):
        raise Unauthorized("malformed token: not a JWT (three base64url parts separated by dots)")
    head, body, signature = token.split(".")
    header = _part(head, "header")
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in algorithms:
        raise Unauthorized(f"token signed with algorithm {shown(alg)}, which this server does not accept "
                           f"(it accepts {', '.join(algorithms)})")
    if not signature:
        raise Unauthorized("token has no signature")
    if "crit" in header:
        # RFC 7515 4.1.11: extensions this server does not understand must not be ignored.
        raise Unauthorized(f"token header has critical extensions {shown(header['crit'])} this server does not know")
    claims = _part(body, "payload")
    iss = claims.get("iss")
    if not isinstance(iss, str) or not iss:
        raise Unauthorized("token names no issuer (iss)")
    if iss not in issuers:
        trusted = ", ".join(issuers) if issuers else "none: wms.yaml identity_providers is empty"
        raise Unauthorized(f"token issuer {shown(iss)} is not one this server trusts (trusted: {trusted})")
    return Unverified(header, claims)


def _time(value: float) -> str:
    return datetime.fromtimestamp(value, timezone.utc).isoformat(timespec="seconds")


def _number(claims: dict[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1e11 < value < 1e11:
        raise Unauthorized(f"token claim {name} is not a time (seconds since 1970): {shown(value)}")
    return float(value)


def audiences(claims: dict[str, Any]) -> list[str]:
    aud = claims.get("aud")
    if isinstance(aud, str):
        return [aud]
    if isinstance(aud, list) and all(isinstance(a, str) for a in aud):
        return list(aud)
    if aud is None:
        return []
    raise Unauthorized(f"token audience (aud) is neither a string nor a list of strings: {shown(aud)}")


def check_claims(claims: dict[str, Any], *, audience: str, now: datetime, skew: int) -> None:
    """Unauthorized, saying which claim and why, unless the (verified) token is
    for ``audience`` and valid at ``now`` give or take ``skew`` seconds."""
    at = now.timestamp()
    expires = _number(claims, "exp")
    if expires is None:
        raise Unauthorized("token has no expiry (exp): this server accepts only tokens that end")
    if at > expires + skew:
        raise Unauthorized(f"token expired at {_time(expires)} (now {_time(at)}, {skew} s of clock skew allowed); "
                           "sign in again (wms login)")
    not_before = _number(claims, "nbf")
    if not_before is not None and at < not_before - skew:
        raise Unauthorized(f"token not valid before {_time(not_before)} (now {_time(at)}, "
                           f"{skew} s of clock skew allowed)")
    issued = _number(claims, "iat")
    if issued is not None and at < issued - skew:
        raise Unauthorized(f"token issued in the future, at {_time(issued)} (now {_time(at)}, "
                           f"{skew} s of clock skew allowed)")
    held = audiences(claims)
    if audience not in held:
        said = ", ".join(shown(a) for a in held[:5]) if held else "not given"
        raise Unauthorized(f"token audience is {said}, this server is {audience}")


def scopes(claims: dict[str, Any]) -> list[str]:
    """The ``scope`` claim (RFC 8693 4.2: one string, space-separated)."""
    value = claims.get("scope", "")
    if isinstance(value, list):          # some providers send a list ("scp" style)
        return [s for s in value if isinstance(s, str)]
    return value.split() if isinstance(value, str) else []


def idp_groups(claims: dict[str, Any], claim: str) -> list[str]:
    """The groups the identity provider gives (``wlcg.groups``: ``/lhcb``, ``/lhcb/prod``)."""
    value = claims.get(claim, [])
    if isinstance(value, str):
        return value.split(",") if "," in value else [value]
    return [g for g in value if isinstance(g, str)] if isinstance(value, list) else []


def map_identity(claims: dict[str, Any], *, vo: str, user_claim: str, groups_claim: str,
                 mappings: list[Any]) -> Identity:
    """The caller a verified token stands for: its user from ``user_claim``, its
    group and role (and VO, else ``vo``) from the first of ``mappings`` (each
    with ``idp_group`` or ``scope``, ``group``, ``role``, ``vo``) that the
    token's groups or scopes match.

    Forbidden when none matches: the identity provider knows the person,
    but this server gives them nothing."""
    user = claims.get(user_claim)
    if not isinstance(user, str) or not user.strip():
        raise Unauthorized(f"token has no user: its {user_claim} claim is missing or empty")
    if len(user) > MAX_USER or not user.isprintable():
        raise Unauthorized(f"token user ({user_claim}) is not a name this server keeps: {shown(user)}")
    groups, granted = idp_groups(claims, groups_claim), scopes(claims)
    for rule in mappings:
        if (rule.idp_group is not None and rule.idp_group in groups) or (
                rule.scope is not None and rule.scope in granted):
            return Identity(user=user, group=rule.group, vo=rule.vo or vo, role=rule.role)
    has = ", ".join(shown(g) for g in groups[:10]) or "none"
    raise Forbidden(f"user {shown(user)} of VO {vo} is in no group this server maps "
                    f"(groups in {groups_claim}: {has}); ask the VO's administrators for membership")
