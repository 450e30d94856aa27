"""OpenID Connect access tokens: the issuers' signing keys, fetched and kept,
and the verification of a token against them (the checks that need no
network are in wms/core/oidc_tokens.py).

Each issuer's keys are found through OpenID Connect discovery
(``ISSUER/.well-known/openid-configuration``, whose ``issuer`` must be the
configured one, then its ``jwks_uri``) and kept for
``identity_provider_checks.jwks_cache_seconds``. A token signed with a key id not among them
makes the keys be fetched again at once, so that an issuer's key rotation
needs nothing here; but at most once per ``key_refresh_interval``, so
that forged key ids cost the identity provider one fetch a period, and
one fetch at a time per issuer (the others wait for it).

When the identity provider does not answer, the keys already kept go on
working (tokens signed with them are accepted, even past the cache
period); a token that needs a key not kept is answered 503: it may be
valid, nobody can tell yet.

Tokens are never logged: messages name the issuer, the key id and the
claims that failed, never the token.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
import jwt

from wms.config.models import IdentityProviderChecks, OidcIssuer
from wms.core.errors import Unauthorized, Unavailable
from wms.core.identity import Identity
from wms.core.oidc_tokens import Unverified, check_claims, map_identity, read_unverified, shown
from wms.http_bodies import TooLarge, read_limited

log = logging.getLogger(__name__)

#: The most bytes read of a discovery document or a key set.
MAX_DOCUMENT_BYTES = 1024 * 1024
#: The key type (and curve) each algorithm family needs: a key of another type is never tried.
KEY_TYPES = {"RS": ("RSA", None), "PS": ("RSA", None), "ES256": ("EC", "P-256"), "ES384": ("EC", "P-384"),
             "ES512": ("EC", "P-521"), "EdDSA": ("OKP", None)}

Fetch = Callable[[str, float], dict[str, Any]]


class FetchFailed(Exception):
    """The identity provider did not answer, or not with what it must."""


def fetch_json(url: str, timeout: float) -> dict[str, Any]:
    """A JSON object from ``url``, at most MAX_DOCUMENT_BYTES; FetchFailed saying why not."""
    try:
        with httpx.Client(timeout=timeout, follow_redirects=False) as client:
            with client.stream("GET", url, headers={"Accept": "application/json"}) as response:
                if response.status_code != 200:
                    raise FetchFailed(f"{url} answered HTTP {response.status_code}")
                body = read_limited(response, MAX_DOCUMENT_BYTES)
    except TooLarge:
        raise FetchFailed(f"{url} sent more than {MAX_DOCUMENT_BYTES} bytes") from None
    except httpx.HTTPError as exc:
        raise FetchFailed(f"{url}: {type(exc).__name__}: {exc}") from None
    try:
        value = json.loads(body)
    except ValueError:
        raise FetchFailed(f"{url} did not send JSON") from None
    if not isinstance(value, dict):
        raise FetchFailed(f"{url} did not send a JSON object")
    return value


def discovery_url(issuer: str) -> str:
    """OpenID Connect Discovery 1.0, section 4: the issuer, then the well-known path."""
    return issuer.rstrip("/") + "/.well-known/openid-configuration"


def key_fits(jwk: dict[str, Any], alg: str) -> bool:
    """Whether the published key ``jwk`` may check a signature made with ``alg``."""
    kty, crv = KEY_TYPES.get(alg, KEY_TYPES.get(alg[:2], ("", None)))
    if jwk.get("kty") != kty or (crv is not None and jwk.get("crv") != crv):
        return False
    if jwk.get("use", "sig") != "sig":
        return False
    return jwk.get("alg", alg) == alg


class IssuerKeys:
    """The signing keys of one issuer, fetched when needed (thread-safe)."""

    def __init__(self, issuer: str, settings: IdentityProviderChecks, fetch: Fetch = fetch_json,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.issuer = issuer
        self.settings = settings
        self.fetch = fetch
        self.clock = clock
        self.keys: list[dict[str, Any]] = []
        self.fetched_at: float | None = None      # when the keys held were fetched
        self.tried_at: float | None = None        # the last fetch, whatever came of it
        self.failure: str | None = None           # why the last fetch failed (None: it did not)
        self._parsed: dict[tuple[str | None, str], jwt.PyJWK] = {}
        self._lock = threading.Lock()

    def fresh(self) -> bool:
        return self.fetched_at is not None and self.clock() - self.fetched_at < self.settings.jwks_cache_seconds

    def cached(self, kid: str | None, alg: str) -> jwt.PyJWK | None:
        """The key for ``kid`` and ``alg`` among those kept and still fresh; None: fetch first."""
        return self._find(kid, alg) if self.fresh() else None

    def key(self, kid: str | None, alg: str) -> jwt.PyJWK:
        """The key for ``kid`` and ``alg``, fetching the key set when it is old or lacks it.

        Unauthorized when the issuer does not publish such a key;
        Unavailable when it could not be asked and no kept key fits."""
        found = self.cached(kid, alg)
        if found is not None:
            return found
        if not self._lock.acquire(blocking=False):
            # Another request is fetching: a kept key that fits will do, else wait for the fetch.
            found = self._find(kid, alg)
            if found is not None:
                return found
            self._lock.acquire()
        try:
            found = self.cached(kid, alg)
            if found is not None:
                return found
            if self._may_fetch():
                self._refresh()
            found = self._find(kid, alg)          # kept keys work while the provider is away
            if found is not None:
                return found
            if self.failure is not None:
                raise Unavailable(f"the identity provider {self.issuer} is not answering ({self.failure}): "
                                  f"cannot fetch its signing keys to check this token; try again later")
        finally:
            self._lock.release()
        named = f"key {shown(kid)}" if kid is not None else "a key it does not name (no kid)"
        raise Unauthorized(f"token signed with {named} for {alg}, which issuer {self.issuer} does not publish "
                           "(badly signed, or signed by another server)")

    def _may_fetch(self) -> bool:
        """Whether to ask the provider now: keys old, or fresh and yet without the key
        (a rotated key, or a forged id); either way at most once per
        key_refresh_interval, so that neither forged ids nor a provider that hangs
        makes every request wait on a fetch."""
        return self.tried_at is None or self.clock() - self.tried_at >= self.settings.key_refresh_interval

    def _refresh(self) -> None:
        self.tried_at = self.clock()
        try:
            document = self.fetch(discovery_url(self.issuer), self.settings.fetch_timeout)
            if document.get("issuer") != self.issuer:
                raise FetchFailed(f"its discovery document names issuer {shown(document.get('issuer'))}")
            jwks_uri = document.get("jwks_uri")
            if not isinstance(jwks_uri, str) or not jwks_uri.startswith(("https://", "http://")):
                raise FetchFailed("its discovery document has no jwks_uri")
            keys = self.fetch(jwks_uri, self.settings.fetch_timeout).get("keys")
            if not isinstance(keys, list):
                raise FetchFailed(f"{jwks_uri} holds no key list")
        except FetchFailed as exc:
            self.failure = str(exc)
            log.warning("fetching the signing keys of %s failed: %s", self.issuer, exc)
            return
        self.keys = [k for k in keys if isinstance(k, dict)]
        self._parsed = {}
        self.fetched_at, self.failure = self.tried_at, None
        log.info("fetched %d signing keys of %s", len(self.keys), self.issuer)

    def _find(self, kid: str | None, alg: str) -> jwt.PyJWK | None:
        candidates = [k for k in self.keys if key_fits(k, alg) and (kid is None or k.get("kid") == kid)]
        if kid is None and len(candidates) != 1:
            return None                  # without a kid only an issuer's one key of that type will do
        if not candidates:
            return None
        parsed = self._parsed.get((kid, alg))
        if parsed is None:
            try:
                parsed = jwt.PyJWK(candidates[0], algorithm=alg)
            except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
                return None
            self._parsed[(kid, alg)] = parsed
        return parsed


class Verifier:
    """Verifies the JWT access tokens of wms.yaml's ``identity_providers``."""

    def __init__(self, providers: list[OidcIssuer], settings: IdentityProviderChecks,
                 fetch: Fetch = fetch_json) -> None:
        self.providers = {entry.issuer: entry for entry in providers}
        self.settings = settings
        self.issuers = {entry.issuer: IssuerKeys(entry.issuer, settings, fetch) for entry in providers}

    def read(self, token: str) -> tuple[Unverified, OidcIssuer]:
        settings = self.settings
        unverified = read_unverified(token, max_bytes=settings.max_token_bytes, algorithms=settings.algorithms,
                                     issuers=list(self.issuers))
        return unverified, self.providers[unverified.issuer]     # read_unverified refuses the others

    def identity_if_cached(self, token: str, now: datetime) -> Identity | None:
        """The caller, when the issuer's keys are kept and fresh (no network); None: call :meth:`identity`."""
        unverified, entry = self.read(token)
        key = self.issuers[entry.issuer].cached(unverified.key_id, unverified.algorithm)
        return None if key is None else self._verified(token, unverified, entry, key, now)

    def identity(self, token: str, now: datetime) -> Identity:
        """The caller ``token`` stands for (may fetch the issuer's keys: run it on a thread)."""
        unverified, entry = self.read(token)
        key = self.issuers[entry.issuer].key(unverified.key_id, unverified.algorithm)
        return self._verified(token, unverified, entry, key, now)

    def _verified(self, token: str, unverified: Unverified, entry: OidcIssuer, key: jwt.PyJWK,
                  now: datetime) -> Identity:
        try:
            payload = jwt.PyJWS().decode(token, key=key, algorithms=[unverified.algorithm])
        except jwt.InvalidSignatureError:
            raise Unauthorized(f"token signature does not match key {shown(unverified.key_id)} of issuer "
                               f"{entry.issuer} (badly signed or altered)") from None
        except jwt.PyJWTError as exc:
            raise Unauthorized(f"token cannot be checked: {shown(str(exc))}") from None
        claims = json.loads(payload)             # the same bytes read_unverified decoded
        check_claims(claims, audience=entry.audience, now=now, skew=self.settings.clock_skew)
        identity = map_identity(claims, vo=entry.vo, user_claim=entry.user_claim, groups_claim=entry.groups_claim,
                                mappings=list(entry.mappings))
        return identity
