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
    # A job token's job and the attempt (hand-out) it was minted for; None for other tokens.
    job_id: int | None = None
    attempt: int | None = None
    # The SHA-256 digest of the token that authenticated the caller; None
    # for identities not from a token.
    token_hash: str | None = field(default=None, compare=False, repr=False)
    # The slots a pilot-role token's pilot declared (tokens.slots); None: no declaration.
    slots: int | None = field(default=None, compare=False)
