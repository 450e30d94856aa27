"""What the API answers: a model for each route's success and the one error shape.

These models describe the JSON the services build; they document it in
/openapi.json and do not filter it (routes return their dicts as before), so
the answers stay byte for byte what clients already read. The schema-driven
tests (tests/api/test_openapi_*.py) check the two against each other on a
real server. Every model accepts keys it does not list: the API may add a
field, never rename or drop one (INTERFACE.md).

Field names are those of the answers: DIRAC's CamelCase for jobs, pools and
pilots, Grid Engine's lower case for reservations and quotas. Times are ISO
8601 strings with their zone.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

TIME = "ISO 8601 with its zone"


class Answer(BaseModel):
    """Base of the response models: open to fields added later."""

    model_config = ConfigDict(extra="allow")


# ---------------------------------------------------------------- errors
class ValidationIssue(Answer):
    type: str | None = Field(None, description="pydantic's error type (missing, int_parsing, ...)")
    loc: list[str] = Field(description="where: body, query or path, then the field names")
    msg: str


class ErrorResponse(Answer):
    """Every error of the API: ``detail`` is one line a person can act on (what, where, why)."""

    detail: str = Field(description="one line: what is wrong, where, and why")
    errors: list[ValidationIssue] | None = Field(
        None, description="422 only: every field the request got wrong, the first of which is in detail")
    request_id: str | None = Field(
        None, description="the id of the request, in the server's log lines for it and its X-Request-ID header")


# ---------------------------------------------------------------- jobs
class Health(Answer):
    status: str = Field(description='"ok", or "not ok" with 503')
    version: str
    database: str = Field(description='"ok", or "not answering" with 503 (the server log says why)')


class SubmittedJobs(Answer):
    job_ids: list[int] = Field(description="one id per job created, in order")
    warnings: list[str] = Field(description="a line per JDL whose jobs no configured queue could ever run "
                                            "(stored all the same unless strict)")


# ---------------------------------------------------------------- sandboxes
class SandboxLimits(Answer):
    file_bytes: int = Field(description="the largest sandbox file (sandboxes.file_bytes)")
    job_bytes: int = Field(description="the most one job's sandbox may hold (sandboxes.job_bytes)")
    store: str = Field(description="directory or database")
    user_bytes: int = Field(description="the most one user's sandboxes may hold (sandboxes.user_bytes; 0: no quota)")
    total_bytes: int = Field(description="the most all sandboxes together may hold (sandboxes.total_bytes; 0: no quota)")
    user_held: int = Field(description="what the caller's sandboxes hold now, each content once, leaving out the "
                                       "contents named by sha256 (0 when there is no user quota)")
    total_held: int = Field(description="what all sandboxes hold now, as user_held (0 when there is no total quota)")


class UploadedFile(Answer):
    sha256: str
    size: int


class SandboxFile(Answer):
    name: str
    size: int
    sha256: str


class SandboxManifest(Answer):
    JobID: int
    InputSandbox: list[SandboxFile]
    OutputSandbox: list[str] = Field(description="the JDL's OutputSandbox entries (names or patterns)")
    OutputFiles: list[SandboxFile] = Field(description="the output files stored (none for a pilot)")
    StdOutput: str = Field("std.out", description="the file the job's stdout went to (JDL StdOutput): "
                                                 "`wms output --dir` writes the stored stdout under this name")
    StdError: str = Field("std.err", description="the file the job's stderr went to (JDL StdError)")


class StoredOutputFile(Answer):
    JobID: int
    name: str
    size: int
    sha256: str


# ---------------------------------------------------------------- the web console
class SignInIssuer(Answer):
    Issuer: str = Field(description="the identity provider's issuer URL (OpenID Connect discovery starts there)")
    VO: str
    ClientID: str | None = Field(description="the public client `wms login` signs in as (null: not offered)")
    ConsoleClientID: str | None = Field(description="the public client the web console signs in as, with the "
                                                    "authorization code flow and PKCE (null: not offered)")
    Scope: str = Field(description="the scopes to ask for, space-separated")
    DeviceEndpoint: str | None = Field(description="the device authorization endpoint when the provider's "
                                                   "discovery document does not name it")


class SignIn(Answer):
    Issuers: list[SignInIssuer] = Field(description="the identity providers whose users may sign in (wms.yaml identity_providers)")


class WhoAmI(Answer):
    User: str
    Group: str
    VO: str
    Role: str
    Allowed: dict[str, bool] = Field(description="each console action (METHOD /path) and whether the caller may")


class FullQueue(Answer):
    Kind: str
    Name: str
    Full: list[str] = Field(description="the consumables (slots among them) with nothing left")


class Overview(Answer):
    Jobs: dict[str, int] = Field(description="jobs the caller may see, by status")
    Pilots: dict[str, int] | None = Field(description="pilots by state (operators and managers), else null")
    RecentMatches: int
    RecentMinutes: int
    FullQueues: list[FullQueue]
    Time: str = Field(description=TIME)


class JobSummary(Answer):
    """A job as `wms status --json` and `wms jobs --json` print it."""

    JobID: int
    JobName: str
    Status: str
    MinorStatus: str
    Owner: str
    OwnerGroup: str
    VO: str
    Site: str = Field(description="the site it runs at, or Multiple / ANY while it waits")
    Queue: str = Field(description="Site/CE/Queue once matched, else empty")
    SubmitPool: str = Field(description="empty when the job has no Requirements section")
    TaskQueue: int | None
    AR: int | None = Field(description="the advance reservation it asked for (qsub -ar)")
    Priority: int
    CPUTime: int
    SubmissionTime: str = Field(description=TIME)
    LastUpdateTime: str = Field(description=TIME)


class HistoryEntry(Answer):
    Status: str
    MinorStatus: str
    Source: str
    Time: str = Field(description=TIME)


class JobJDL(Answer):
    JobID: int
    OriginalJDL: str = Field(description="as submitted")
    JDL: str = Field(description="as the optimizers completed it")


class KillReport(Answer):
    killed: list[int]
    not_killed: dict[str, str] = Field(description="job id -> why not (already Done, finished meanwhile)")
    stopping: list[int] = Field([], description="of the killed, those that were on a node: their payload stops "
                                                "when the pilot next hears from the server (its next heartbeat)")


class HoldReport(Answer):
    held: list[int]
    not_held: dict[str, str] = Field(description="job id -> why not (its state, or already held so)")
    next_after: int | None = Field(description="a filter's next batch starts after this id; null: no more")


class ReleaseReport(Answer):
    released: list[int] = Field(description="the jobs that wait again")
    still_held: dict[str, str] = Field(description="job id -> the holds left on it")
    not_released: dict[str, str] = Field(description="job id -> why not (not Held, no such hold, not yours)")
    next_after: int | None = Field(description="a filter's next batch starts after this id; null: no more")


class RescheduleReport(Answer):
    rescheduled: list[int] = Field(description="the jobs that wait again, as a new attempt")
    not_rescheduled: dict[str, str] = Field(description="job id -> why not (its state, max_reschedule, the "
                                                        "optimizers' refusal)")
    next_after: int | None = Field(description="a filter's next batch starts after this id; null: no more")


class DeleteReport(Answer):
    deleted: list[int]
    not_deleted: dict[str, str] = Field(description="job id -> why not (deleted already)")
    next_after: int | None = Field(description="a filter's next batch starts after this id; null: no more")


class AlterReport(Answer):
    altered: list[int] = Field(description="the jobs changed and filed again")
    not_altered: dict[str, str] = Field(description="job id -> why not (its state, the optimizers' refusal)")
    next_after: int | None = Field(description="a filter's next batch starts after this id; null: no more")


class QueueMatch(Answer):
    """`wms match-queues`: the queues that could run a job."""

    eligible: list[str] = Field(description="Site/CE/Queue names")
    rejected: dict[str, str] = Field(description="Site/CE/Queue -> the first reason it cannot run the job")


class StoredOutput(Answer):
    """What a job printed, as its pilot uploaded it."""

    JobID: int
    stdout: str
    stderr: str
    truncated: bool


class QueueVerdict(Answer):
    Queue: str = Field(description="Site/CE/Queue")
    Layer: str = Field(description="the layer that decided (empty when eligible)")
    Code: str = Field(description="OK, NOT_NOW, NEVER or ERROR")
    Reason: str
    ReasonCode: str = Field(description="the deciding reason's stable code (consumable-full, not-in-submit-pool, "
                                        "...; empty when eligible)")


class JobHold(Answer):
    Type: str = Field(description="u (user), o (operator) or s (system), as qhold -h")
    Holder: str = Field(description="who set it: a user name, or system")
    Reason: str
    Time: str = Field(description=TIME)


class WhyReport(Answer):
    """`wms why`: every queue of the job's VO and the first layer that keeps the job from it;
    for a Held job, its holds instead."""

    JobID: int
    Status: str
    MinorStatus: str
    Queues: list[QueueVerdict]
    Holds: list[JobHold] | None = Field(None, description="a Held job's holds (absent otherwise)")
    Summary: str


# ---------------------------------------------------------------- matcher and pilots
class JobLimits(Answer):
    h_rt: float | None = Field(description="wall-clock hard limit, seconds")
    s_rt: float | None = Field(description="wall-clock soft limit, seconds")
    cpu_time: float | None = Field(description="the job's CPUTime, seconds")


class MatchedJob(Answer):
    """What a pilot needs to run the job it was handed."""

    JobID: int
    Attempt: int = Field(description="this hand-out of the job; reports quote it")
    JDL: str
    Executable: str
    Arguments: str
    Slots: int
    Lease: int = Field(description="seconds the pilot has to report Running, then to send its first heartbeat "
                                   "(match_lease); the pilot stops the job when half of it passes without an "
                                   "answer")
    RunLease: int | None = Field(None, description="seconds a running job may go without a heartbeat before it is "
                                                   "handed out again (heartbeat_timeout); the pilot stops its copy "
                                                   "when half of it passes without an answered heartbeat")
    Limits: JobLimits
    Environment: dict[str, str]
    JobToken: str = Field(description="the job token of this attempt (wmsj_...): the pilot gives it to the "
                                      "payload as WMS_JOB_TOKEN, never to anyone else; it reads this job's "
                                      "status and JDL and sets its application status while the attempt lasts")
    StdOutput: str = Field("std.out", description="the file of the job's directory its stdout goes to (JDL "
                                                 "StdOutput, DIRAC's convention)")
    StdError: str = Field("std.err", description="the file of the job's directory its stderr goes to (JDL StdError)")


class MatchResult(Answer):
    """requestJob: ``match`` true with the ``job``, or false with the ``reason``."""

    match: bool
    job: MatchedJob | None = None
    reason: str | None = None


class BatchMatchResult(Answer):
    """request-jobs: the jobs handed out (each as request-job's ``job``), and why not more."""

    jobs: list[MatchedJob]
    reason: str | None = Field(None, description="the no-match that ended the batch; null when `count` jobs "
                                                 "came or the free slots ran out")


class JobState(Answer):
    JobID: int
    Status: str


class ReportRefusal(Answer):
    Status: int = Field(description="the HTTP status the report alone would have been answered with "
                                    "(404, 409, 400, 403; 503: not taken, send it again)")
    Detail: str


class PilotStatusAnswer(Answer):
    """One report's answer: its job's new status, or why it was refused."""

    JobID: int
    Status: str | None = Field(None, description="the job's status now, when the report was taken")
    Error: ReportRefusal | None = Field(None, description="why the report was refused; nothing of it was recorded")


class PilotStatusAnswers(Answer):
    """POST /jobs/pilot-status: one answer per report, in the reports' order."""

    results: list[PilotStatusAnswer]


class ApplicationStatusAnswer(Answer):
    """setApplicationStatus: the job's minor status now."""

    JobID: int
    Status: str
    MinorStatus: str = Field(description="'Application: <the line sent>'")
    Recorded: bool = Field(description="whether the status history got an entry for it (not when the line is "
                                       "the current one, nor past the entries kept per attempt)")


class HeartbeatAnswer(Answer):
    JobID: int
    Status: str
    Kill: bool = Field(description="true: the job was killed meanwhile; the pilot stops it")


class SlotCounts(Answer):
    reserved: int
    used: int
    total: int


class QueueLoad(Answer):
    """One line of `wms queues` (qstat -f): numbers for programs, the cells of qstat -f for people."""

    Kind: str = Field(description="global, queue or host")
    Name: str
    Slots: SlotCounts | None = Field(description="null where no slots are configured")
    Usage: dict[str, dict[str, Any]] = Field(
        description="each other consumable: used and total, or for an exclusive one: exclusive, jobs, offered")
    resv_used_tot: str = Field(alias="resv/used/tot", description="reserved/used/total slots")
    Consumables: dict[str, str]
    Parameters: dict[str, Any] | None = Field(None, description="queue lines only: the queue's parameters")


class Text(Answer):
    text: str


class Messages(Answer):
    messages: list[str] = Field(description="one line per change, as qconf prints them")


class PilotView(Answer):
    PilotID: str
    Queue: str = Field(description="Site/CE/Queue; empty for a pilot started by hand")
    VO: str
    Backend: str = Field(description="the SiteDirector's backend, or `by hand`")
    BackendRef: str
    State: str
    JobsRun: int
    Submitted: str = Field(description=TIME)
    LastUpdate: str = Field(description=TIME)
    Isolation: str = Field(description="bubblewrap, apptainer, none (payloads run without isolation), "
                                       "or empty: the pilot has not said")
    IsolationNote: str = Field(description="why, as the pilot said (one line)")
    Warning: str = Field(description="for an active pilot without isolation: `runs payloads without isolation` "
                                     "and the note; else empty")


class PilotLog(Answer):
    PilotID: str
    Output: str


class RenewedToken(Answer):
    TokenID: str
    PilotID: str | None
    Expires: str | None = Field(description=TIME + "; null: no end")
    ExpiresIn: int | None = Field(description="seconds; null: no end")
    Lifetime: str
    Slots: int | None = Field(description="the most slots the token holds at once; null: no declaration")
    Isolation: str | None = Field(description="bubblewrap, apptainer or none, as last declared; null: not said")


# ---------------------------------------------------------------- pools and task queues
class SubmitPool(Answer):
    SubmitPool: str = Field(description="the hash of the canonical Requirements")
    VO: str
    Requirements: Any = Field(description="the canonical Requirements section, or the expression")
    Created: str = Field(description=TIME)
    LastUpdate: str = Field(description=TIME)
    Queues: list[str] | None = Field(None, description="one pool: its eligible queues (Site/CE/Queue)")
    QueueCount: int | None = Field(None, description="the list: how many eligible queues")
    Jobs: dict[str, int] | None = Field(None, description="the list: its jobs by status")


class TaskQueue(Answer):
    TaskQueue: int
    Owner: str
    OwnerGroup: str
    VO: str
    SubmitPool: str
    CPUTime: int
    Priority: float
    WaitingJobs: int
    Definition: dict[str, Any] = Field(description="what the task queue's jobs share")


# ---------------------------------------------------------------- quotas
class RuleSetNames(Answer):
    names: list[str]


class QuotaUsage(Answer):
    """One rule instance, as qquota shows it."""

    rule: str = Field(description="set/rule (the rule's name or its number)")
    limit: str = Field(description="resource=used/limit")
    filter: str
    resource: str
    limit_value: str
    used: str | None
    filters: dict[str, list[str]] = Field(description="qquota -xml's filter elements")


# ---------------------------------------------------------------- reservations
class Granted(Answer):
    queue: str
    host: str | None
    slots: int


class ReservationGrant(Answer):
    """qrsub: the id granted, or with ``verify`` whether one could be."""

    message: str
    granted: list[Granted]
    ar_id: int | None = None
    verified: bool | None = Field(None, description="with verify only")
    reasons: dict[str, Any] | None = Field(None, description="with verify only: why queues were not used")


class Reservation(Answer):
    """One advance reservation, as qrstat -ar shows it."""

    ar_id: int
    name: str
    owner: str
    group: str
    state: str = Field(description="Grid Engine's AR state letter (w, r, d, E, ...)")
    start: str = Field(description=TIME)
    end: str = Field(description=TIME)
    duration: str = Field(description="h:m:s")
    submission_time: str = Field(description=TIME)
    account: str
    acl: list[str]
    resources: dict[str, Any]
    queues: list[str]
    masterq: list[str]
    pe: str | None
    pe_range: list[int] | None
    ckpt: str | None
    granted: list[Granted]
    slots: str
    complex_values: str
    mail_options: str
    mail_list: str
    hard_error: bool
    message: str
    may_change: bool = Field(False, description="whether the caller may change (qralter) or delete (qrdel) it: "
                                                "its owner, operators and managers")


class ReservationChanged(Answer):
    ar_id: int
    message: str


class ReservationAccount(Answer):
    ar_id: int
    name: str
    owner: str
    account: str
    state: str
    slots: int
    reserved_slot_seconds: int
    used_slot_seconds: int
    jobs: int


class JobAccount(Answer):
    JobID: int
    Owner: str
    OwnerGroup: str
    Status: str
    Queue: str
    Host: str | None
    Slots: int | None
    Start: str | None = Field(description=TIME)
    End: str | None = Field(description=TIME)
    WallClock: int = Field(description="seconds")
    ExitCode: int | None
    AR: int | None
