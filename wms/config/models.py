"""The schema of the configuration directory (INTERFACE.md, "Configuration
directory").

Four files, one pydantic model each:

* ``wms.yaml``: :class:`Settings` (services, agents, Grid Engine globals);
* ``resources.yaml``: :class:`ResourcesFile` plus :func:`check_sites`, the
  DIRAC Resources tree of SPEC 002 (RFC #7, "Resources description"):
  arbitrary parameters on Sites, CEs and Queues, for every VO or one VO;
* ``cluster.yaml``: :class:`ClusterConfig`, the Grid Engine objects
  (complexes, global and host complex_values, host groups, user sets,
  projects, parallel environments) and the users;
* ``operations.yaml``: :class:`OperationsConfig`, DIRAC's Operations
  section: JobDescription (CPU time bounds, how Requirements compare) and
  group Shares.

Every model forbids unknown keys, so a misspelt key is an error. The
Sites tree holds arbitrary parameter names and cannot forbid unknown
keys; :func:`check_sites` instead checks its shape, names and values by
hand, the values against their declared types.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    model_validator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
)

from wms.core.requirements import (
    LIST,
    NUMBER,
    STRING,
    normalise_resource_value,
    normalise_type_name,
)
from wms.core.limits import CEILING, DEFAULT as DEFAULT_LIMITS, Limits
from wms.core import caps, paging, visibility
from wms.core.pilot_backends import backend_parameter_problem
from wms.core.resources import CES_KEY, QUEUES_KEY, VO_KEY
from wms.core.sandboxes import SandboxLimits

KeyPath = tuple[Any, ...]
Problem = tuple[KeyPath, str]


# -- reusable field types ------------------------------------------------------
def _no_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    return value


Seconds = Annotated[int, BeforeValidator(_no_bool), Field(gt=0)]
PositiveInt = Annotated[int, BeforeValidator(_no_bool), Field(gt=0)]
NonNegativeInt = Annotated[int, BeforeValidator(_no_bool), Field(ge=0)]
NonNegativeFloat = Annotated[float, BeforeValidator(_no_bool), Field(ge=0)]
PositiveFloat = Annotated[float, BeforeValidator(_no_bool), Field(gt=0)]


def _plain_name(value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError(f"expected a name (a string), got {value!r}")
    if not value.strip() or value != value.strip():
        raise ValueError(f"a name must be non-empty, without surrounding blanks, got {value!r}")
    return value


Name = Annotated[str, BeforeValidator(_plain_name)]


def _url(value: Any) -> Any:
    if not isinstance(value, str) or not re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*://", value):
        raise ValueError(f"expected a URL such as sqlite:///var/wms.db, got {value!r}")
    return value


Url = Annotated[str, BeforeValidator(_url)]

_BIND = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+):(?P<port>[0-9]{1,5})$")


def parse_bind(value: str) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port); ``[::1]:8080`` for IPv6. ValueError otherwise."""
    if not isinstance(value, str):
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    match = _BIND.match(value.strip())
    if not match:
        raise ValueError(f"expected HOST:PORT (e.g. 127.0.0.1:8080), got {value!r}")
    port = int(match["port"])
    if not 1 <= port <= 65535:
        raise ValueError(f"port must be 1..65535, got {port}")
    return match["host"].strip("[]"), port


def _bind(value: Any) -> Any:
    parse_bind(value)
    return value.strip()


Bind = Annotated[str, BeforeValidator(_bind)]

_OPTIMIZER = re.compile(
    r"^(?:[A-Za-z_][A-Za-z0-9_]*|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*)$"
)


def _optimizer(value: Any) -> Any:
    if not isinstance(value, str) or not _OPTIMIZER.match(value):
        raise ValueError(
            f"expected an executor name (JobSanity) or package.module:ClassName, got {value!r}"
        )
    return value


OptimizerName = Annotated[str, BeforeValidator(_optimizer)]


def _scalar(value: Any) -> Any:
    if value is None or not isinstance(value, (str, int, float, bool)):
        raise ValueError(f"expected a plain value (string, number or boolean), got {value!r}")
    return value


Scalar = Annotated[Any, BeforeValidator(_scalar)]


def _number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number, got {value!r}")
    return value


Number = Annotated[Any, BeforeValidator(_number)]


def _flag(value: Any) -> Any:
    """YES/NO flags of complex(5); a YAML boolean is read as YES/NO."""
    if isinstance(value, bool):
        return "YES" if value else "NO"
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected YES, NO or another complex(5) keyword, got {value!r}")
    return value.strip().upper()


Flag = Annotated[str, BeforeValidator(_flag)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


# -- wms.yaml ----------------------------------------------------------------------
AGENT_PERIOD_DEFAULTS: dict[str, int] = {
    "submit_pool_refresher": 900,
    "submit_pool_cleaner": 3600,
    "site_director": 60,
    "lease_reaper": 30,
    "task_queue_priorities": 300,
    "reservation_manager": 30,
    "sandbox_cleaner": 3600,
    "job_purger": 3600,
}
AgentName = Literal[
    "submit_pool_refresher",
    "submit_pool_cleaner",
    "site_director",
    "lease_reaper",
    "task_queue_priorities",
    "reservation_manager",
    "sandbox_cleaner",
    "job_purger",
]

DEFAULT_OPTIMIZERS = ("JobSanity", "JobRequirements", "JobScheduling", "TaskQueue")
DEFAULT_CPU_TIME_SEGMENTS = (
    360, 1800, 3600, 21600, 43200, 86400, 172800, 345600, 604800, 1209600,
)


class SmtpSettings(_Model):
    host: Name
    port: Annotated[int, BeforeValidator(_no_bool), Field(ge=1, le=65535)] = 25
    sender: Name


class LimitsSettings(_Model):
    """``limits:``: the bounds on what one request may send (docs/security.md)."""

    request_bytes: PositiveInt = DEFAULT_LIMITS.request_bytes
    jdl_bytes: PositiveInt = DEFAULT_LIMITS.jdl_bytes
    depth: Annotated[int, BeforeValidator(_no_bool), Field(gt=0, le=CEILING.depth)] = DEFAULT_LIMITS.depth
    expression_terms: Annotated[int, BeforeValidator(_no_bool), Field(gt=0, le=CEILING.expression_terms)] = (
        DEFAULT_LIMITS.expression_terms
    )
    statement_timeout: NonNegativeFloat = DEFAULT_LIMITS.statement_timeout
    evaluation_ms: PositiveFloat = DEFAULT_LIMITS.evaluation_ms

    def core(self) -> Limits:
        """The same values for the code that enforces them."""
        return Limits(**self.model_dump())


class SandboxSettings(_Model):
    """``sandboxes:``: where input and output sandboxes live and for how long
    (docs/configuration.md, "Sandboxes")."""

    # directory: files under `directory` (one server, `wms up`); database:
    # in the database every server reaches (several `wms server`).
    store: Literal["directory", "database"] = "directory"
    directory: Annotated[str, Field(min_length=1)] = "var/sandboxes"
    file_bytes: PositiveInt = 10 * 1024 * 1024
    job_bytes: PositiveInt = 50 * 1024 * 1024
    # A finished job's sandboxes go this long after its end.
    max_age: Seconds = 14 * 86400
    # Files uploaded for a submission that never came (or was refused) go
    # after this; the sandbox_cleaner (every hour) removes them within hours.
    orphan_grace: Seconds = 7200
    # Bytes one user's sandboxes may hold (what they uploaded and what their
    # jobs name, each content once), and all sandboxes together; 0: no quota.
    user_bytes: NonNegativeInt = 5 * 1024**3
    total_bytes: NonNegativeInt = 500 * 1024**3

    def limits(self) -> SandboxLimits:
        return SandboxLimits(file_bytes=self.file_bytes, job_bytes=self.job_bytes)


class PagingSettings(_Model):
    """``paging:``: how many rows one page of a list holds (wms/core/paging.py)."""

    # Rows of a page when the caller names no limit.
    page_size: PositiveInt = paging.DEFAULT_PAGE_SIZE
    # The most rows one page holds: a larger limit gets this many, and the
    # answer's next cursor leads on to the rest.
    max_page_size: PositiveInt = paging.DEFAULT_MAX_PAGE_SIZE


class CapsSettings(_Model):
    """``caps:``: the most jobs one user and one VO may have (wms/core/caps.py); 0: no cap."""

    # Jobs not yet final (Grid Engine's max_u_jobs, Slurm's MaxSubmitJobs).
    user_jobs: NonNegativeInt = caps.DEFAULT_USER_JOBS
    # Jobs not yet handed to a pilot (Received, Checking, Waiting).
    user_waiting: NonNegativeInt = caps.DEFAULT_USER_WAITING
    vo_jobs: NonNegativeInt = caps.DEFAULT_VO_JOBS
    vo_waiting: NonNegativeInt = caps.DEFAULT_VO_WAITING

    def core(self) -> caps.Caps:
        """The same values for the code that enforces them."""
        return caps.Caps(**self.model_dump())


class BackpressureSettings(_Model):
    """``backpressure:``: how much one server process takes on at once (docs/deployment.md)."""

    # Requests one server process works on at once (waiting for a request
    # thread included); one more is answered 429 at once, with Retry-After.
    # It sets how long an admitted request waits (at about 400 matches a
    # second, 32 waiting are 80 ms of work), not the rate (docs/benchmarks.md).
    max_in_flight: PositiveInt = 32
    # Requests one process runs at the same time, each in a thread of its
    # own; the others wait their turn. Unset: database_pool.size less
    # match_threads, so that every running request finds a connection the
    # pool keeps open.
    request_threads: PositiveInt | None = None
    # Pilots' job requests (request-job, request-jobs) one process runs at
    # the same time, on threads of their own: a pilot never waits behind a
    # submission or a `wms why`, and so few threads leave the interpreter
    # lock to the one that holds a claim (docs/journal/benchmarks.md: at 32 pilots
    # 2 threads matched about 30 % more a second than 10, p99 45 ms
    # against 77-83).
    match_threads: PositiveInt = 2
    # Seconds a refused client is told to wait (the Retry-After header), at
    # least: while many are refused, long enough that they come back at no
    # more than a twentieth of what this process answers, up to
    # retry_after_max (wms/api/backpressure.py).
    retry_after: Seconds = 5
    retry_after_max: Seconds = 30
    # The share of max_in_flight one caller (one bearer token; without a
    # token, one client address) may hold in progress at once; past it, its
    # next request is answered 429 while others are served (at least 1).
    identity_share: Annotated[float, BeforeValidator(_no_bool), Field(gt=0, le=1)] = 0.25
    # Request bodies one caller may be sending to one process at once; each
    # may hold up to limits.request_bytes in memory until it is whole.
    bodies_per_identity: PositiveInt = 16
    # Seconds from a new connection, or from the first byte of a request on
    # a kept-alive one, to the end of the request's headers; past it the
    # connection is closed (408 when part of a request had come).
    header_seconds: Annotated[float, BeforeValidator(_no_bool), Field(gt=0)] = 20
    # A body must arrive within body_seconds of the server asking for it,
    # plus one second for every body_min_rate bytes received (bytes a
    # second); else 408 and the connection is closed (wms/api/deadlines.py).
    body_seconds: Annotated[float, BeforeValidator(_no_bool), Field(gt=0)] = 20
    body_min_rate: PositiveInt = 500

    def share(self) -> int:
        """Requests one caller may hold in progress in one process."""
        return max(1, int(self.identity_share * self.max_in_flight))


Scope = Literal["owner", "group", "vo", "all"]
OwnerOrAll = Literal["owner", "all"]


class VisibilitySettings(_Model):
    """``visibility:``: what a user sees of other users' objects (wms/core/visibility.py)."""

    jobs: Scope = visibility.DEFAULT.jobs
    task_queues: Scope = visibility.DEFAULT.task_queues
    reservations: OwnerOrAll = visibility.DEFAULT.reservations
    quota_usage: OwnerOrAll = visibility.DEFAULT.quota_usage

    def core(self) -> visibility.Visibility:
        """The same scopes for the code that applies them."""
        return visibility.Visibility(**self.model_dump())


class DatabasePoolSettings(_Model):
    """``database_pool:``: the connections each process keeps to PostgreSQL
    or MariaDB (SQLite ignores it). docs/deployment.md, "Database
    connections", counts them against the server's max_connections."""

    size: PositiveInt = 10
    max_overflow: NonNegativeInt = 30
    # Seconds before a connection is replaced (0: never); below the
    # server's idle time-out (MariaDB wait_timeout, a proxy's).
    recycle: NonNegativeInt = 3600
    pre_ping: bool = False
    # Seconds a request waits for a free connection before it fails.
    timeout: Annotated[float, BeforeValidator(_no_bool), Field(gt=0)] = 30
    # Seconds a new connection may take to open.
    connect_timeout: PositiveInt = 10


def _increasing(values: list[int]) -> list[int]:
    if any(b <= a for a, b in zip(values, values[1:])):
        raise ValueError(f"segments must be strictly increasing, got {values}")
    return values


def _unique(values: list[str]) -> list[str]:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{value!r} is listed twice")
        seen.add(value)
    return values


# The signature algorithms an OpenID Connect token may use: public-key ones
# only. ``none`` and the HS* family (a shared secret: with a public key as the
# "secret", anyone could sign) are never accepted, whatever wms.yaml says.
OIDC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
OidcAlgorithm = Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
# Roles an identity provider's groups may grant: a pilot signs in with a
# pilot token of its own (docs/security.md, "Pilots and tokens").
OidcRole = Literal["user", "operator", "manager"]


def _http_url(value: Any) -> Any:
    if not isinstance(value, str) or not re.match(r"^https?://[^\s/]+", value) or value != value.strip():
        raise ValueError(f"expected an http(s) URL such as https://iam.example.org/, got {value!r}")
    return value


HttpUrl = Annotated[str, BeforeValidator(_http_url)]


class OidcMapping(_Model):
    """One rule of ``identity_providers[].mappings``: a group of the identity provider
    (a value of the groups claim, e.g. ``/lhcb/prod``) or a scope of the token
    gives a group and role here. The first rule that matches wins."""

    idp_group: Annotated[str, Field(min_length=1)] | None = None
    scope: Annotated[str, Field(min_length=1, pattern=r"^\S+$")] | None = None
    group: Name
    role: OidcRole = "user"
    # The VO this group belongs to, when the provider serves several (EGI Check-in); default the issuer's vo.
    vo: Name | None = None

    @model_validator(mode="after")
    def _one_condition(self) -> "OidcMapping":
        if (self.idp_group is None) == (self.scope is None):
            raise ValueError("a mapping names exactly one of idp_group or scope")
        return self


class OidcIssuer(_Model):
    """One entry of ``identity_providers``: an issuer, the audience its tokens must name,
    and how their claims map to users, groups, VOs and roles here."""

    issuer: HttpUrl
    vo: Name
    # What the token's ``aud`` must hold (RFC 7519 4.1.3): this server's name at the provider,
    # so that a token made for another service is refused.
    audience: Annotated[str, Field(min_length=1)]
    # The public client `wms login` and the console sign in with (none: they do not offer this issuer).
    client_id: Annotated[str, Field(min_length=1)] | None = None
    # The public client the web console signs in as (authorization code with PKCE, redirect URI
    # SERVER/ui/); none: the console offers only a token.
    console_client_id: Annotated[str, Field(min_length=1)] | None = None
    # The device authorization endpoint (RFC 8628), for a provider whose discovery document omits it.
    device_endpoint: HttpUrl | None = None
    scope: Annotated[str, Field(min_length=1)] = "openid offline_access wlcg.groups"
    user_claim: Annotated[str, Field(min_length=1)] = "sub"
    groups_claim: Annotated[str, Field(min_length=1)] = "wlcg.groups"
    mappings: Annotated[list[OidcMapping], Field(min_length=1)]


class IdentityProviderChecks(_Model):
    """``identity_provider_checks:``: how the tokens of every identity provider are
    checked (docs/security.md, "Authentication")."""

    # Seconds of clock difference tolerated on exp, nbf and iat.
    clock_skew: Annotated[int, BeforeValidator(_no_bool), Field(ge=0, le=600)] = 60
    # Seconds the signing keys of an issuer are used before they are fetched again.
    jwks_cache_seconds: Seconds = 3600
    # The least seconds between two fetches caused by tokens signed with a key not
    # known yet: a flood of forged key ids costs the identity provider one fetch a period.
    key_refresh_interval: NonNegativeFloat = 10
    # Seconds one request to the identity provider (discovery, keys) may take.
    fetch_timeout: PositiveFloat = 5
    # A longer bearer token is refused before it is decoded.
    max_token_bytes: Annotated[int, BeforeValidator(_no_bool), Field(ge=1024, le=65536)] = 16384
    algorithms: Annotated[list[OidcAlgorithm], Field(min_length=1), AfterValidator(_unique)] = (
        Field(default_factory=lambda: list(OIDC_ALGORITHMS))  # type: ignore[arg-type]
    )


def _distinct_issuers(entries: list[OidcIssuer]) -> list[OidcIssuer]:
    seen: set[str] = set()
    for entry in entries:
        if entry.issuer in seen:
            raise ValueError(f"issuer {entry.issuer} is listed twice")
        seen.add(entry.issuer)
    return entries


class Settings(_Model):
    """wms.yaml: every key optional; see docs/configuration.md."""

    database_url: Url = "sqlite:///var/wms.db"
    database_pool: DatabasePoolSettings = Field(default_factory=DatabasePoolSettings)
    broker_url: Url = "redis://127.0.0.1:6379/0"
    bind: Bind = "127.0.0.1:8080"
    agent_periods: dict[AgentName, Seconds] = Field(default_factory=dict)
    submit_pool_refresh: Seconds = 900
    submit_pool_grace: Seconds = 3600
    match_lease: Seconds = 300
    heartbeat_timeout: Seconds = 1800
    beat_lock_timeout: Seconds = 60
    max_reschedule: NonNegativeInt = 3
    # A deleted job (wms delete) is purged, with its history, output and
    # sandboxes, this long after its deletion (the job_purger agent).
    deleted_job_retention: Seconds = 7 * 86400
    max_advance_reservations: NonNegativeInt = 0
    duration_offset: NonNegativeInt = 60
    # Seconds a new advance reservation waits, stored but unconfirmed, until
    # every Matcher process sees it (twice their one-second cache), before it
    # is checked again and confirmed (docs/reservations.md, "Two-phase grant").
    reservation_settle: NonNegativeFloat = 2.0
    optimizers: Annotated[list[OptimizerName], Field(min_length=1), AfterValidator(_unique)] = (
        Field(default_factory=lambda: list(DEFAULT_OPTIMIZERS))
    )
    cpu_time_segments: Annotated[
        list[Seconds], Field(min_length=1), AfterValidator(_increasing)
    ] = Field(default_factory=lambda: list(DEFAULT_CPU_TIME_SEGMENTS))
    smtp: SmtpSettings | None = None
    max_jobs_per_submission: PositiveInt = 10000
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    sandboxes: SandboxSettings = Field(default_factory=SandboxSettings)
    paging: PagingSettings = Field(default_factory=PagingSettings)
    caps: CapsSettings = Field(default_factory=CapsSettings)


    backpressure: BackpressureSettings = Field(default_factory=BackpressureSettings)
    visibility: VisibilitySettings = Field(default_factory=VisibilitySettings)
    # Pilot logs and exit files of the SiteDirector's backends; for Slurm
    # pilots a directory the worker nodes share (docs/deployment.md).
    pilot_log_dir: Annotated[str, Field(min_length=1)] = "var/pilots"
    # Seconds a token of `wms admin token create` lives unless --lifetime
    # says otherwise; pilot tokens (the SiteDirector's and hand-made ones)
    # live pilot_token_lifetime and are renewed by their pilot while it
    # runs (docs/security.md, "Pilots and tokens").
    token_lifetime: Seconds = 30 * 86400
    pilot_token_lifetime: Seconds = 4 * 3600
    # The SiteDirector's pause at a queue after a second round in a row of
    # its pilots that ran nothing, doubling with each further round, at most the _max (never
    # below the first); a pilot there that runs a job ends the pauses
    # (wms.core.pilot_backoff; docs/agents.md).
    empty_pilot_backoff: Seconds = 60
    empty_pilot_backoff_max: Seconds = 3600
    # Seconds a server process trusts a token it verified without reading it
    # again: a revocation made through another process takes effect within
    # this time (at once in the process that made it); 0 reads every time.
    token_cache_seconds: NonNegativeFloat = 10
    # Addresses whose X-Forwarded-For / X-Forwarded-Proto headers the server
    # believes (the TLS reverse proxy in front of it): uvicorn's
    # forwarded_allow_ips, comma-separated, "*" for any (docs/deployment.md).
    forwarded_allow_ips: Annotated[str, Field(min_length=1)] = "127.0.0.1"
    # Access tokens of the VOs' identity providers (OpenID Connect), beside wms tokens.
    identity_providers: Annotated[list[OidcIssuer], AfterValidator(_distinct_issuers)] = Field(default_factory=list)
    identity_provider_checks: IdentityProviderChecks = Field(default_factory=IdentityProviderChecks)

    def model_post_init(self, context: Any, /) -> None:
        # Fill in the periods not given; the refresher follows submit_pool_refresh.
        periods = dict(AGENT_PERIOD_DEFAULTS)
        periods["submit_pool_refresher"] = self.submit_pool_refresh
        periods.update(self.agent_periods)
        object.__setattr__(self, "agent_periods", periods)

    @property
    def bind_host(self) -> str:
        return parse_bind(self.bind)[0]

    @property
    def bind_port(self) -> int:
        return parse_bind(self.bind)[1]

    def request_threads(self) -> int:
        """How many requests other than the pilots' job requests one server
        process runs at once (backpressure.request_threads)."""
        return self.backpressure.request_threads or max(1, self.database_pool.size - self.backpressure.match_threads)

    def agent_period(self, name: str, default: int | None = None) -> int:
        """The period of an agent in seconds; ``default`` for agents this
        schema does not know yet (KeyError if none)."""
        if name in self.agent_periods:
            return self.agent_periods[name]
        if default is None:
            raise KeyError(f"no period configured for agent {name!r}")
        return default


# -- operations.yaml -------------------------------------------------------------
def _type_name(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected number, string or list, got {value!r}")
    return normalise_type_name(value)


ParameterType = Annotated[str, BeforeValidator(_type_name)]


class JobDescriptionSection(_Model):
    DefaultCPUTime: Seconds = 86400
    MinCPUTime: Seconds = 100
    MaxCPUTime: Seconds = 500000
    Parameters: dict[Name, ParameterType] = Field(default_factory=dict)
    # VO -> the attributes its pilots publish beyond the built-in ones: names
    # a Requirements expression may read without a warning (core/vocabulary.py).
    PilotAttributes: dict[Name, list[Name]] = Field(default_factory=dict)

    def problems(self, path: KeyPath) -> list[Problem]:
        out: list[Problem] = []
        if not self.MinCPUTime <= self.DefaultCPUTime <= self.MaxCPUTime:
            out.append(
                (
                    path + ("DefaultCPUTime",),
                    f"expected MinCPUTime <= DefaultCPUTime <= MaxCPUTime, got "
                    f"{self.MinCPUTime} / {self.DefaultCPUTime} / {self.MaxCPUTime}",
                )
            )
        seen: dict[str, str] = {}
        for name in self.Parameters:
            if not _PARAMETER_NAME.match(name):
                out.append((path + ("Parameters", name), _bad_parameter_name(name)))
            folded = name.casefold()
            if folded in seen:
                out.append(
                    (path + ("Parameters", name),
                     f"described twice (as {seen[folded]!r} and {name!r}); names ignore case")
                )
            seen[folded] = name
        for vo, names in self.PilotAttributes.items():
            for name in names:
                if not _PARAMETER_NAME.match(name):
                    out.append((path + ("PilotAttributes", vo), _bad_parameter_name(name)))
        return out


class OperationsConfig(_Model):
    """operations.yaml: DIRAC's Operations section (JobDescription, Shares)."""

    JobDescription: JobDescriptionSection = Field(default_factory=JobDescriptionSection)
    Shares: dict[Name, NonNegativeInt] = Field(default_factory=dict)

    def problems(self) -> list[Problem]:
        return self.JobDescription.problems(("JobDescription",))


# -- cluster.yaml -------------------------------------------------------------------
class ComplexDefinition(_Model):
    """One complex(5) line. Only presence and basic types are checked here;
    the complex(5) rules are enforced by the complexes module."""

    name: Name
    shortcut: Name
    type: Name
    relop: Name
    requestable: Flag
    consumable: Flag
    default: Scalar
    urgency: Number


ComplexValues = dict[Name, Scalar]


class ComplexValuesHolder(_Model):
    complex_values: ComplexValues = Field(default_factory=dict)


class ParallelEnvironment(_Model):
    slots: NonNegativeInt


class UserEntry(_Model):
    group: Name
    vo: Name


def _hostgroup_name(value: Any) -> Any:
    _plain_name(value)
    if not value.startswith("@") or len(value) < 2:
        raise ValueError(f"a host group name starts with '@', got {value!r}")
    return value


HostgroupName = Annotated[str, BeforeValidator(_hostgroup_name)]


class ClusterConfig(_Model):
    """cluster.yaml: the Grid Engine objects and the users."""

    complexes: list[ComplexDefinition] = Field(default_factory=list)
    global_: ComplexValuesHolder = Field(default_factory=ComplexValuesHolder, alias="global")
    hosts: dict[Name, ComplexValuesHolder] = Field(default_factory=dict)
    hostgroups: dict[HostgroupName, list[Name]] = Field(default_factory=dict)
    usersets: dict[Name, list[Name]] = Field(default_factory=dict)
    projects: Annotated[list[Name], AfterValidator(_unique)] = Field(default_factory=list)
    pes: dict[Name, ParallelEnvironment] = Field(default_factory=dict)
    users: dict[Name, UserEntry] = Field(default_factory=dict)

    def problems(self) -> list[Problem]:
        out: list[Problem] = []
        names: dict[str, int] = {}
        for index, cx in enumerate(self.complexes):
            for key in (cx.name, cx.shortcut):
                if key in names and names[key] != index:
                    out.append(((("complexes", index, "name")),
                                f"name or shortcut {key!r} already used by complexes[{names[key]}]"))
            names.setdefault(cx.name, index)
            names.setdefault(cx.shortcut, index)
        for group, members in self.hostgroups.items():
            for position, member in enumerate(members):
                if member.startswith("@") and member not in self.hostgroups:
                    out.append((("hostgroups", group, position), f"unknown host group {member!r}"))
        cycle = _hostgroup_cycle(self.hostgroups)
        if cycle:
            out.append((("hostgroups", cycle[0]), "host groups contain each other: " + " -> ".join(cycle)))
        return out


def _hostgroup_cycle(groups: Mapping[str, list[str]]) -> list[str] | None:
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> list[str] | None:
        if state.get(name) == 1:
            return trail[trail.index(name):] + [name]
        if state.get(name) == 2 or name not in groups:
            return None
        state[name] = 1
        for member in groups[name]:
            if member.startswith("@"):
                found = visit(member, trail + [name])
                if found:
                    return found
        state[name] = 2
        return None

    for group in groups:
        found = visit(group, [])
        if found:
            return found
    return None


# -- resources.yaml --------------------------------------------------------------
class ResourcesFile(_Model):
    """resources.yaml: the top level; the tree under Sites is checked by
    :func:`check_sites`."""

    Sites: dict[Any, Any] = Field(default_factory=dict)


# Parameters whose type is known without operations.yaml; operations.yaml
# JobDescription.Parameters may add to or override this table.
BUILTIN_PARAMETER_TYPES: dict[str, str] = {
    "CPUTime": NUMBER,
    "MaxCPUTime": NUMBER,
    "MaxRAM": NUMBER,
    "NumberOfProcessors": NUMBER,
    "MaxWaitingPilots": NUMBER,
    "MaxTotalPilots": NUMBER,
    "Platform": STRING,
    "Backend": STRING,
    "Partition": STRING,
    "SlurmOptions": STRING,
    "SlurmConf": STRING,
    "SSHHost": STRING,
    "SSHUser": STRING,
    "SSHPort": NUMBER,
    "SSHKey": STRING,
    "SSHKnownHosts": STRING,
    "SSHDirectory": STRING,
    "ARCEndpoint": STRING,
    "ARCCertificate": STRING,
    "ARCKey": STRING,
    "ARCProxy": STRING,
    "ARCCAFile": STRING,
    "ARCCADirectory": STRING,
    "ARCTokenFile": STRING,
    "ARCQueue": STRING,
    "ARCRSL": STRING,
    "Tags": LIST,
    "RequiredTag": LIST,
}


def merged_parameter_types(declared: Mapping[str, str]) -> dict[str, str]:
    """The built-in table overridden, name by name without regard to case,
    by operations.yaml JobDescription.Parameters."""
    folded = {name.casefold() for name in declared}
    types = {n: k for n, k in BUILTIN_PARAMETER_TYPES.items() if n.casefold() not in folded}
    types.update(declared)
    return types


# Of those, the ones that count things and must be whole and >= 0.
_COUNT_PARAMETERS = frozenset({"numberofprocessors", "maxwaitingpilots", "maxtotalpilots"})
# Grid Engine queue_conf(5) attributes with their own shape.
_COMPLEX_VALUES = "complex_values"
_USER_LISTS = frozenset({"user_lists", "xuser_lists"})
# Given automatically to every node; may not be configured.
_RESERVED = frozenset({"site", "ce", "queue"})
_STRUCTURE = {"vo": VO_KEY, "ces": CES_KEY, "queues": QUEUES_KEY}

_PARAMETER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _bad_parameter_name(name: Any) -> str:
    return (
        f"a parameter name is a ClassAd attribute name (letters, digits, '_', "
        f"not starting with a digit), got {name!r}"
    )


# Site and queue names are part of a database key (pool_queues): MariaDB's
# key limit allows 128 characters each.
MAX_NODE_NAME = 128


def _node_name_problem(name: Any) -> str | None:
    if not isinstance(name, str):
        return f"a name must be a string, got {name!r} (quote it)"
    if not name.strip() or name != name.strip():
        return f"a name must be non-empty, without surrounding blanks, got {name!r}"
    if "/" in name:
        return f"a name must not contain '/' (queues are named Site/CE/Queue), got {name!r}"
    if len(name) > MAX_NODE_NAME:
        return f"a name may have at most {MAX_NODE_NAME} characters (database key limit), got {len(name)}"
    return None


class _SitesChecker:
    def __init__(self, types: Mapping[str, str], usersets: Mapping[str, Any] | None) -> None:
        self.types = {name.casefold(): kind for name, kind in types.items()}
        self.usersets = usersets
        self.problems: list[Problem] = []

    def add(self, path: KeyPath, message: str) -> None:
        self.problems.append((path, message))

    def sites(self, tree: Any, path: KeyPath) -> dict[str, Any]:
        if not isinstance(tree, dict):
            self.add(path, f"expected a mapping of site names, got {tree!r}")
            return {}
        out: dict[str, Any] = {}
        for name, node in tree.items():
            child = self.node(name, node, path + (name,), "site")
            if child is not None:
                out[name] = child
        return out

    def node(self, name: Any, node: Any, path: KeyPath, level: str) -> dict[str, Any] | None:
        problem = _node_name_problem(name)
        if problem:
            self.add(path, problem)
            return None
        if node is None:
            node = {}
        if not isinstance(node, dict):
            self.add(path, f"expected the {level}'s parameters as a mapping, got {node!r}")
            return None
        allowed_child = {"site": CES_KEY, "CE": QUEUES_KEY, "queue": None}[level]
        out: dict[str, Any] = {}
        seen: dict[str, str] = {}
        for key, value in node.items():
            key_path = path + (key,)
            if key == VO_KEY:
                out[VO_KEY] = self.vo_blocks(value, key_path)
            elif key in (CES_KEY, QUEUES_KEY):
                if key != allowed_child:
                    where = {"site": "a site holds CEs", "CE": "a CE holds Queues",
                             "queue": "a queue holds no further level"}[level]
                    self.add(key_path, f"{key!r} is not allowed here: {where}")
                    continue
                child_level = "CE" if key == CES_KEY else "queue"
                if value is None:
                    value = {}
                if not isinstance(value, dict):
                    self.add(key_path, f"expected a mapping of {child_level} names, got {value!r}")
                    continue
                children: dict[str, Any] = {}
                for child_name, child in value.items():
                    built = self.node(child_name, child, key_path + (child_name,), child_level)
                    if built is not None:
                        children[child_name] = built
                out[key] = children
            else:
                checked = self.parameter(key, value, key_path, seen, level)
                if checked is not _INVALID:
                    out[key] = checked
        return out

    def vo_blocks(self, value: Any, path: KeyPath) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.add(path, f"expected a mapping of VO name to parameters, got {value!r}")
            return {}
        out: dict[str, Any] = {}
        for vo, block in value.items():
            vo_path = path + (vo,)
            problem = _node_name_problem(vo)
            if problem:
                self.add(vo_path, problem)
                continue
            if block is None:
                block = {}
            if not isinstance(block, dict):
                self.add(vo_path, f"expected the VO's parameters as a mapping, got {block!r}")
                continue
            params: dict[str, Any] = {}
            seen: dict[str, str] = {}
            for key, item in block.items():
                if key in (VO_KEY, CES_KEY, QUEUES_KEY):
                    self.add(vo_path + (key,), f"{key!r} is not allowed inside a VO block (parameters only)")
                    continue
                checked = self.parameter(key, item, vo_path + (key,), seen, "VO block")
                if checked is not _INVALID:
                    params[key] = checked
            out[vo] = params
        return out

    def parameter(
        self, key: Any, value: Any, path: KeyPath, seen: dict[str, str], level: str
    ) -> Any:
        if not isinstance(key, str) or not _PARAMETER_NAME.match(key):
            self.add(path, _bad_parameter_name(key))
            return _INVALID
        folded = key.casefold()
        if folded in _STRUCTURE:
            self.add(path, f"unknown key {key!r}: did you mean {_STRUCTURE[folded]!r}?")
            return _INVALID
        if folded in _RESERVED:
            self.add(path, f"{key!r} is reserved: every node's name is given as Site, CE and Queue")
            return _INVALID
        if folded in seen:
            self.add(path, f"given twice (as {seen[folded]!r} and {key!r}); parameter names ignore case")
            return _INVALID
        seen[folded] = key
        if folded == _COMPLEX_VALUES:
            return self.complex_values(value, path)
        if folded in _USER_LISTS:
            return self.user_lists(value, path)
        try:
            checked = normalise_resource_value(value, self.types.get(folded))
        except ValueError as exc:
            self.add(path, str(exc))
            return _INVALID
        if folded in _COUNT_PARAMETERS and (not isinstance(checked, int) or checked < 0):
            self.add(path, f"expected a whole number >= 0, got {value!r}")
            return _INVALID
        problem = backend_parameter_problem(folded, checked)
        if problem:
            self.add(path, problem)
            return _INVALID
        return checked

    def complex_values(self, value: Any, path: KeyPath) -> Any:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.add(path, f"expected a mapping of complex name to value, got {value!r}")
            return _INVALID
        for name, item in value.items():
            if not isinstance(name, str) or not name.strip():
                self.add(path + (name,), f"expected a complex name, got {name!r}")
                return _INVALID
            if item is None or not isinstance(item, (str, int, float, bool)):
                self.add(path + (name,), f"expected a plain value, got {item!r}")
                return _INVALID
        return dict(value)

    def user_lists(self, value: Any, path: KeyPath) -> Any:
        items = value if isinstance(value, list) else [value]
        for position, item in enumerate(items):
            item_path = path + (position,) if isinstance(value, list) else path
            if not isinstance(item, str) or not item.strip():
                self.add(item_path, f"expected a user set name, got {item!r}")
                return _INVALID
            if (
                self.usersets is not None
                and item.upper() != "NONE"
                and item not in self.usersets
            ):
                self.add(item_path, f"unknown user set {item!r} (define it in cluster.yaml usersets)")
                return _INVALID
        return list(items) if isinstance(value, list) else value


_INVALID = object()


def check_sites(
    tree: Any,
    types: Mapping[str, str],
    usersets: Mapping[str, Any] | None = None,
    path: KeyPath = ("Sites",),
) -> tuple[dict[str, Any], list[Problem]]:
    """Check the Sites tree of resources.yaml (SPEC 002 "Resources
    description"; INTERFACE.md shape) and return it normalised as plain
    dicts with the problems found, each as (key path, message).

    Checks: site, CE, queue and VO names are strings without '/'; ``VO``,
    ``CEs`` and ``Queues`` appear only where they belong; parameter names
    are ClassAd attribute names, unique without regard to case; values are
    plain values or non-empty lists of them, and fit their type (``types``,
    case-insensitive: number, string or list); ``complex_values`` is a
    mapping; ``user_lists``/``xuser_lists`` name user sets of cluster.yaml.
    """
    checker = _SitesChecker(types, usersets)
    sites = checker.sites(tree, path)
    return sites, checker.problems
