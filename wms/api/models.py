"""Request bodies of the API (responses are plain JSON documents)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from wms.core.holds import REASON_MAX
from wms.core.limits import (APPLICATION_STATUS_MAX, APPLICATION_STATUS_PATTERN, CONTROL_JOBS_MAX, INT32_MAX,
                              INT64_MAX, MATCH_BATCH_MAX, PILOT_REPORTS_MAX)
from wms.core.pilot_backends import ISOLATION_MODES

# One line of text: no control character nor line separator.
ONE_LINE_TEXT = r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029]*$"

# Numbers are stored as 64-bit (job ids) or 32-bit integers (the rest): a
# larger number in a path, a query or a body is refused (422) before it
# reaches the database.
Int64 = Annotated[int, Field(ge=-(2**63), le=INT64_MAX)]
Int32 = Annotated[int, Field(ge=-(2**31), le=INT32_MAX)]
IdPath = Annotated[int, Path(ge=-(2**63), le=INT64_MAX)]

# A body's numbers and booleans are JSON's own: pydantic's lax mode would read
# true as 1, "5" as 5 and "yes" as true, values the documented schema refuses.
# (Paths and queries are text, read lax as above.)
BodyInt64 = Annotated[int, Strict(), Field(ge=-(2**63), le=INT64_MAX)]
BodyInt32 = Annotated[int, Strict(), Field(ge=-(2**31), le=INT32_MAX)]
BodyInt = Annotated[int, Strict()]
BodyFloat = Annotated[float, Strict()]
BodyBool = Annotated[bool, Strict()]
ArIdPath = Annotated[int, Path(ge=-(2**31), le=INT32_MAX)]


class JDLSource(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = Field("<jdl>", description="file name, used in error messages")
    text: str
    input_sandbox: dict[str, str] = Field(
        default_factory=dict, description="InputSandbox entry -> SHA-256 of the file uploaded for it")


class SubmitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    jdls: list[JDLSource] = Field(min_length=1)
    resource_requests: dict[str, Any] = Field(default_factory=dict, description="hard -l requests")
    soft_resource_requests: dict[str, Any] = Field(default_factory=dict, description="soft -l requests")
    parallel_environment: str | None = None
    slots: BodyInt | None = Field(None, ge=1, le=INT32_MAX, description="with parallel_environment: -pe PE N")
    reservation: BodyInt | None = Field(None, ge=1, le=INT32_MAX)
    project: str | None = None
    job_name: str | None = None
    strict: bool = Field(False, description="refuse every job (store none) if no configured queue could ever "
                                            "run one of them")
    held: bool = Field(False, description="store the jobs with a user hold on them (qsub -h): released by "
                                          "wms release or qrls")


class JobIds(BaseModel):
    model_config = ConfigDict(extra="forbid")

    job_ids: list[BodyInt64] = Field(min_length=1)


class JobControl(BaseModel):
    """The jobs a job control acts on: ``job_ids``, or a filter (``status``, and
    ``owner`` for operators and managers) a batch at a time from ``after``."""

    model_config = ConfigDict(extra="forbid")

    job_ids: list[BodyInt64] | None = Field(None, min_length=1, max_length=CONTROL_JOBS_MAX)
    status: str | None = Field(None, min_length=1, max_length=32)
    owner: str | None = Field(None, min_length=1, max_length=255)
    after: BodyInt64 | None = Field(None, description="the filter's next batch: next_after of the last answer")
    reason: str | None = Field(None, max_length=REASON_MAX, pattern=ONE_LINE_TEXT,
                               description="why, recorded in the job's history")


# Grid Engine's hold types (qhold -h): u user, o operator, s system.
HOLD_TYPES = r"^[uos]{1,3}$"


class HoldRequest(JobControl):
    hold_types: str = Field("u", pattern=HOLD_TYPES, description="letters of u (user), o (operator), s (system)")


class ReleaseRequest(JobControl):
    hold_types: str | None = Field(None, pattern=HOLD_TYPES,
                                   description="the holds to release (default: every kind the caller may)")


class RescheduleRequest(JobControl):
    reset: BodyBool = Field(False, description="start the reschedule count again (operators and managers)")
    running: BodyBool = Field(False, description="Matched and Running jobs too (qmod -rj): their pilots stop them "
                                                 "at their next heartbeat")


class AlterRequest(JobControl):
    """qalter's changes: each given one is made, the others stay."""

    priority: BodyInt32 | None = Field(None, description="-p: the job's Priority")
    resource_requests: dict[str, Any] | None = Field(None, description="-l: hard requests, merged with the job's")
    queues: list[Annotated[str, Field(min_length=1, max_length=767)]] | None = Field(
        None, min_length=1, description="-q: Site/CE/Queue names (wildcards allowed), as the request qname")
    job_name: str | None = Field(None, min_length=1, max_length=255, pattern=ONE_LINE_TEXT, description="-N")


class MatchQueuesRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = "<jdl>"
    text: str


class JobRequest(BaseModel):
    """A pilot's resource description (requestJob)."""

    model_config = ConfigDict(extra="forbid")

    site: str = Field(min_length=1)
    ce: str = Field(min_length=1)
    queue: str = Field(min_length=1)
    host: str = Field(min_length=1)
    pilot_id: str = Field(min_length=1, max_length=255)
    pools: list[str] | None = None
    slots: BodyInt = Field(1, ge=1, le=INT32_MAX)
    load: dict[str, Any] = Field(default_factory=dict)
    platform: str | None = None
    cpu_time_left: BodyFloat | None = Field(None, ge=0)
    tags: list[str] = Field(default_factory=list)
    owner_only: BodyBool = Field(False, description="only jobs of the token's own user: a pilot whose payloads "
                                                      "cannot be isolated on its node")


class JobsRequest(JobRequest):
    """A multi-slot pilot's resource description and how many jobs it takes at once."""

    count: BodyInt = Field(1, ge=1, le=MATCH_BATCH_MAX,
                           description="at most this many jobs, and at most `slots`: each takes its slots")

    @field_validator("count")
    @classmethod
    def _at_most_slots(cls, count: int, info: ValidationInfo) -> int:
        slots = info.data.get("slots")
        if isinstance(slots, int) and count > slots:
            raise PydanticCustomError(
                "count_over_slots", "{count} jobs asked for with {slots} free slot(s): count may not exceed slots",
                {"count": count, "slots": slots})
        return count


# One line of text: no control character (C0, DEL, C1) and no line or paragraph separator.
ONE_LINE = r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029]*$"


class TokenRenewal(BaseModel):
    """A pilot renewing its token; ``pilot_id`` binds a hand-made token not bound yet.
    The pilot also declares itself here (docs/security.md, "Pilots and tokens")."""

    model_config = ConfigDict(extra="forbid")

    pilot_id: str | None = Field(None, min_length=1, max_length=255)
    slots: BodyInt | None = Field(None, ge=1, le=INT32_MAX,
                                  description="the pilot's total slots: its token never holds more at once; "
                                              "the first declaration fixes them, a later one may only lower them")
    isolation: Literal[ISOLATION_MODES] | None = Field(  # type: ignore[valid-type]
        None, description="how the pilot runs payloads now; `none`: without isolation")
    isolation_note: str | None = Field(None, min_length=1, max_length=200, pattern=ONE_LINE,
                                       description="with isolation: why, in one line (e.g. why there is none)")


class OutputText(BaseModel):
    """A job's standard output and error as the pilot read them (their tails)."""

    model_config = ConfigDict(extra="forbid")

    stdout: str = ""
    stderr: str = ""
    truncated: BodyBool = False


class PilotStatus(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pilot_id: str = Field(min_length=1)
    status: str
    minor_status: str = ""
    exit_code: BodyInt32 | None = None
    # The job's hand-out this report is about (the job's "Attempt"): refused
    # when the job has been handed out again since. Optional for older pilots.
    attempt: BodyInt | None = Field(None, ge=1, le=INT32_MAX)
    # Done/Failed: how long ago, by the pilot's own clock, the payload ended
    # (its output was stored meanwhile): the job's end time is the payload's,
    # not the report's. A duration, not a time, so the node's clock offset
    # does not matter.
    ended_ago: BodyFloat | None = Field(None, ge=0, le=10 ** 7, allow_inf_nan=False)
    # Done/Failed: the job's output, stored in the same transaction as the
    # status (one call a job fewer than POST /jobs/{id}/output, which stays).
    output: OutputText | None = None


class JobPilotStatus(PilotStatus):
    """One job's report in a call that carries several."""

    job_id: BodyInt64


class PilotStatuses(BaseModel):
    """The reports of several jobs of a pilot's slots, taken in order, each on its own."""

    model_config = ConfigDict(extra="forbid")

    reports: list[JobPilotStatus] = Field(min_length=1, max_length=PILOT_REPORTS_MAX)


class Heartbeat(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pilot_id: str = Field(min_length=1)
    # The job's hand-out this report is about (the job's "Attempt"): refused
    # when the job has been handed out again since. Optional for older pilots.
    attempt: BodyInt | None = Field(None, ge=1, le=INT32_MAX)


class JobOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pilot_id: str = Field(min_length=1)
    stdout: str = ""
    stderr: str = ""
    truncated: BodyBool = False
    # The job's hand-out this report is about (the job's "Attempt"): refused
    # when the job has been handed out again since. Optional for older pilots.
    attempt: BodyInt | None = Field(None, ge=1, le=INT32_MAX)


class ApplicationStatus(BaseModel):
    """setApplicationStatus: the running payload's progress line."""

    model_config = ConfigDict(extra="forbid")

    application_status: str = Field(
        min_length=1, max_length=APPLICATION_STATUS_MAX, pattern=APPLICATION_STATUS_PATTERN,
        description="one line (no control character), e.g. 'Reconstructing event 500'; the job's minor "
                    "status becomes 'Application: <this>'")


class ComplexFile(BaseModel):
    """A whole complex table in `qconf -sc` format (qconf -Mc)."""

    model_config = ConfigDict(extra="forbid")

    text: str


class ReservationRequest(BaseModel):
    """qrsub's switches; times as ISO 8601 with their zone (the client reads date_time in its local zone)."""

    model_config = ConfigDict(extra="forbid")

    start: datetime | None = Field(None, description="-a")
    end: datetime | None = Field(None, description="-e")
    duration: str | None = Field(None, description="-d, TIME format")
    name: str = Field("", description="-N")
    account: str = Field("sge", description="-A")
    resources: dict[str, Any] = Field(default_factory=dict, description="-l")
    users: list[str] = Field(default_factory=list, description="-u")
    queues: list[str] = Field(default_factory=list, description="-q")
    interactive: BodyBool = Field(False, description="-now yes")
    pe: str | None = Field(None, description="-pe NAME")
    pe_slots: str | None = Field(None, description="-pe or -alloc slot range")
    allocation: str | None = Field(None, description="-alloc allocation rule")
    master_queues: list[str] = Field(default_factory=list, description="-masterq, with -pe")
    ckpt: str | None = Field(None, description="-ckpt")
    mail_options: str = Field("n", description="-m")
    mail_list: list[str] = Field(default_factory=list, description="-M")
    hard_error: BodyBool = Field(False, description="-he yes")
    verify: BodyBool = Field(False, description="-w v: check only")

    @field_validator("start", "end")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("a time must carry its zone (e.g. 2026-12-14T12:00:00+01:00)")
        return value


class ReservationDelete(BaseModel):
    model_config = ConfigDict(extra="forbid")

    selectors: list[str] = Field(default_factory=list, description="AR ids or names (wildcards), in order")
    force: BodyBool = False
    users: list[str] | None = Field(default=None, description="qrdel -u: only reservations of these users")
