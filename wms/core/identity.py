"""Who is calling: taken from the bearer token, never from a JDL."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Identity:
    user: str
    group: str
    vo: str
    role: str
    # The pilot a pilot-role token speaks for; None when not bound (yet).
    pilot_id: str | None = None
    # The SHA-256 digest of the token that authenticated the caller; None
    # for identities not from a token.
    token_hash: str | None = field(default=None, compare=False, repr=False)
