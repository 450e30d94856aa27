"""The ``arc`` computing-element backend: each pilot is a job of an ARC
CE, submitted through A-REX's REST interface (``<ARCEndpoint>/rest/1.0``).

Queue parameters (checked at configuration load, wms.core.pilot_backends):
``ARCEndpoint`` (required), the SiteDirector's credential
(``ARCCertificate`` with ``ARCKey``, or ``ARCProxy``; and/or
``ARCTokenFile``, sent as a bearer token where the CE takes tokens), the
CE's certificate authorities (``ARCCAFile`` or ``ARCCADirectory``, else
the system's), ``ARCQueue`` and ``ARCRSL``.

Submission, per pilot: ``POST /jobs?action=new`` with the xRSL
(wms/backends/arc_jobs.py), then the pilot's script (its options in
it), zipapp and token uploaded into the job's session directory (``PUT /jobs/ID/session/FILE``);
A-REX starts the job once all three are there. Should any step fail, the
jobs this submission created are killed and cleaned, and the error
propagates (the SiteDirector marks the pilots Aborted).

Status, once per cycle and CE: one ``POST /jobs?action=status`` for all
the pilots there. For each pilot that ended, its ``pilot.log`` is fetched
into ``log_dir`` (for `wms pilots --output`), its end recorded beside it
(``<pilot id>.arc``) and the job cleaned off the CE; a pilot whose log
the CE would not give is reported at a later cycle, with its log. A job
A-REX no longer knows is judged by that record, Aborted without one. A CE that does not
answer, or answers with an error, says nothing: its pilots keep their
states until the next cycle.

Kill: ``POST /jobs?action=kill``; a job A-REX does not know needs none.

Output: the log fetched when the pilot ended; none while it runs (the CE
is asked once a cycle, not once per reader).

The credential's files are read at every call, never kept: a proxy or
token renewed in place is used at once. Nothing of them is logged; errors
name the CE, the HTTP status and A-REX's reason.
"""

from __future__ import annotations

import json
import logging
import ssl
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from wms.core.errors import InvalidInput
from wms.core.resources import QueueRef
from wms.http_bodies import TooLarge, read_limited
from wms.backends.arc_jobs import (
    FINAL,
    LOG,
    REST_PATH,
    SCRIPT,
    TOKEN,
    ZIPAPP,
    ArcCredentials,
    ArcRef,
    check_ref_length,
    job_description,
    jobs_body,
    parse_created,
    parse_states,
    pilot_script,
)
from wms.backends.base import ABORTED, PilotArgs, check_count, log_file, log_tail
from wms.backends.bundle import pilot_zipapp

# Seconds one request may take before the cycle gives up on it.
REQUEST_TIMEOUT = 60
# Jobs asked about in one status request.
STATUS_BATCH = 500
# Bytes of a CE's answer read at most (an answer about STATUS_BATCH jobs is far smaller).
ANSWER_LIMIT = 16 << 20
# A connection that fails before the request is sent (A-REX drops a TLS
# handshake now and then under load) is tried again this many times, after
# CONNECT_PAUSE s: nothing reached the CE, so even a submission is safe to repeat.
CONNECT_RETRIES = 2
CONNECT_PAUSE = 0.5
# Bytes of a pilot's log kept at most: its end (`wms pilots --output` shows the last MiB).
LOG_LIMIT = 16 << 20

log = logging.getLogger(__name__)


class ArcError(RuntimeError):
    pass


def _keep_tail(answer: httpx.Response, path: Path) -> None:
    """Write the last LOG_LIMIT bytes of a streamed answer to ``path``, saying so when there were more."""
    tail: deque[bytes] = deque()
    kept = total = 0
    for chunk in answer.iter_bytes():
        tail.append(chunk)
        kept += len(chunk)
        total += len(chunk)
        while kept - len(tail[0]) >= LOG_LIMIT:     # whole chunks no longer needed
            kept -= len(tail.popleft())
    data = b"".join(tail)[-LOG_LIMIT:]
    with open(path, "wb") as file:
        if total > len(data):
            file.write(f"(the pilot's log at the CE was {total} bytes: its last {len(data)})\n".encode())
        file.write(data)


def _where(client: httpx.Client) -> str:
    return str(client.base_url).rstrip("/")


def endpoint_of(options: Mapping[str, Any]) -> str:
    endpoint = options.get("ARCEndpoint")
    if not endpoint:
        raise InvalidInput("Backend arc needs the queue parameter ARCEndpoint")
    return str(endpoint).rstrip("/")


def ssl_context(credentials: ArcCredentials) -> ssl.SSLContext:
    """TLS that checks the CE against the named CAs (else the system's) and shows the certificate or proxy."""
    try:
        if credentials.ca_file or credentials.ca_dir:
            context = ssl.create_default_context(cafile=credentials.ca_file or None,
                                                 capath=credentials.ca_dir or None)
        else:
            context = ssl.create_default_context()
        if credentials.proxy:
            context.load_cert_chain(credentials.proxy)
        elif credentials.certificate:
            context.load_cert_chain(credentials.certificate, credentials.key)
    except (OSError, ssl.SSLError) as exc:
        # The paths are configuration, not secrets; the files' contents are never shown.
        raise ArcError(f"cannot load the ARC credential or CAs ({credentials.certificate or credentials.proxy or '-'}, "
                       f"{credentials.ca_file or credentials.ca_dir or 'system CAs'}): {exc}") from exc
    return context


def bearer_token(credentials: ArcCredentials) -> str | None:
    if not credentials.token_file:
        return None
    try:
        token = Path(credentials.token_file).read_text().strip()
    except OSError as exc:
        raise ArcError(f"cannot read the ARC token file {credentials.token_file}: {exc.strerror}") from exc
    if not token:
        raise ArcError(f"the ARC token file {credentials.token_file} is empty")
    return token


class ArcBackend:
    name = "arc"
    emulates_queues = False
    parameters = ("ARCEndpoint", "ARCCertificate", "ARCKey", "ARCProxy", "ARCCAFile", "ARCCADirectory",
                  "ARCTokenFile", "ARCQueue", "ARCRSL")

    def __init__(self, log_dir: Path | str = "var/pilots",
                 configured: Callable[[], Iterable[Mapping[str, Any]]] | None = None) -> None:
        """``configured``: the arc parameters of every configured queue (each
        VO's view), where a reference's credential is looked up by its digest."""
        self.log_dir = Path(log_dir)
        self.configured = configured
        # Digest -> credential: those this backend submitted with, then the configuration's.
        self._known: dict[str, tuple[str, ArcCredentials]] = {}

    def _remember(self, endpoint: str, credentials: ArcCredentials) -> None:
        self._known[credentials.digest] = (endpoint, credentials)

    def _learn_configured(self) -> None:
        """Remember every credential the configuration names now."""
        for options in self.configured() if self.configured is not None else ():
            try:
                self._remember(endpoint_of(options), ArcCredentials.of(options))
            except InvalidInput:
                continue            # a queue without a whole credential: its submissions say so

    def _credentials(self, parsed: ArcRef) -> ArcCredentials | None:
        """The credential a pilot was submitted with; else the one configured
        now for its CE (its files renamed since); None when there is none."""
        known = self._known.get(parsed.credentials)
        if known is not None:
            return known[1]
        return next((credentials for endpoint, credentials in self._known.values()
                     if endpoint == parsed.endpoint), None)

    @contextmanager
    def _client(self, endpoint: str, credentials: ArcCredentials) -> Iterator[httpx.Client]:
        """A client of one CE with the credential as its files hold it now."""
        headers = {"Accept": "application/json"}
        token = bearer_token(credentials)
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        with httpx.Client(base_url=f"{endpoint}{REST_PATH}", verify=ssl_context(credentials), headers=headers,
                          timeout=REQUEST_TIMEOUT) as client:
            yield client

    @staticmethod
    def _request(client: httpx.Client, method: str, path: str, what: str, **kwargs: Any) -> tuple[int, bytes]:
        """The status and body of a request; ArcError for no answer, an error
        status, or a body over ANSWER_LIMIT (a CE's answers are small)."""
        for attempt in range(CONNECT_RETRIES + 1):
            try:
                with client.stream(method, path, **kwargs) as answer:
                    body = read_limited(answer, ANSWER_LIMIT)
                break
            except TooLarge as exc:
                raise ArcError(f"{what} at {_where(client)}: {exc}") from None
            except httpx.ConnectError as exc:
                if attempt == CONNECT_RETRIES:
                    raise ArcError(f"{what} at {_where(client)}: {type(exc).__name__}: {exc}") from exc
                time.sleep(CONNECT_PAUSE)
            except httpx.HTTPError as exc:
                raise ArcError(f"{what} at {_where(client)}: {type(exc).__name__}: {exc}") from exc
        if answer.status_code >= 400:
            text = body.decode(errors="replace").strip()[:200]
            raise ArcError(f"{what} at {_where(client)}: HTTP {answer.status_code} {text}")
        return answer.status_code, body

    def _action(self, client: httpx.Client, action: str, job_ids: Sequence[str]) -> Any:
        _, body = self._request(client, "POST", "/jobs", f"{action} of {len(job_ids)} job(s)",
                                params={"action": action}, json=jobs_body(job_ids))
        try:
            return json.loads(body)
        except ValueError as exc:
            raise ArcError(f"{action} at {_where(client)}: not JSON: {body[:200]!r}") from exc

    # -- submission ----------------------------------------------------------
    def submit_pilots(self, queue_ref: QueueRef, count: int, pilot_args: PilotArgs) -> list[str]:
        check_count(count, pilot_args)
        options = pilot_args.options
        endpoint, credentials = endpoint_of(options), ArcCredentials.of(options)
        for pilot_id in pilot_args.pilot_ids:
            check_ref_length(endpoint, pilot_id)
        self._remember(endpoint, credentials)
        zipapp = pilot_zipapp()
        created: list[str] = []
        with self._client(endpoint, credentials) as client:
            try:
                for pilot_id in pilot_args.pilot_ids:
                    argv = ["--url", pilot_args.url, "--pilot-id", pilot_id, *pilot_args.argv]
                    description = job_description(pilot_id, str(options.get("ARCQueue") or ""),
                                                  str(options.get("ARCRSL") or ""))
                    _, body = self._request(client, "POST", "/jobs", "submission", params={"action": "new"},
                                            content=description.encode(),
                                            headers={"Content-Type": "application/rsl"})
                    try:
                        job_id = parse_created(json.loads(body))
                    except ValueError as exc:
                        raise ArcError(f"submission at {endpoint}: {exc}") from exc
                    created.append(job_id)
                    files = {SCRIPT: pilot_script(argv).encode(), ZIPAPP: zipapp,
                             TOKEN: pilot_args.token_for(pilot_id).encode()}
                    for name, content in files.items():
                        self._request(client, "PUT", f"/jobs/{job_id}/session/{name}", f"upload of {name}",
                                      content=content)
            except ArcError:
                self._forget(client, created)
                raise
        return [str(ArcRef(endpoint, job_id, pilot_id, credentials.digest))
                for job_id, pilot_id in zip(created, pilot_args.pilot_ids)]

    def _forget(self, client: httpx.Client, job_ids: list[str]) -> None:
        """Kill and clean the jobs of a submission that failed half-way (as far as the CE lets us)."""
        if not job_ids:
            return
        for action in ("kill", "clean"):
            try:
                self._action(client, action, job_ids)
            except ArcError as exc:
                log.warning("arc: could not %s the jobs of a failed submission: %s", action, exc)

    # -- status ----------------------------------------------------------------
    def status(self, backend_refs: Sequence[str]) -> dict[str, str]:
        parsed_refs = [(ref, parsed) for ref in backend_refs if (parsed := ArcRef.parse(ref)) is not None]
        if any(parsed.credentials not in self._known for _, parsed in parsed_refs):
            self._learn_configured()        # once a cycle, for pilots of an earlier process
        groups: dict[tuple[str, ArcCredentials], list[tuple[str, ArcRef]]] = {}
        for ref, parsed in parsed_refs:
            credentials = self._credentials(parsed)
            if credentials is None:
                log.warning("arc: no configured credential for %s: pilot %s left unjudged",
                            parsed.endpoint, parsed.pilot_id)
                continue
            groups.setdefault((parsed.endpoint, credentials), []).append((ref, parsed))
        states: dict[str, str] = {}
        for (endpoint, credentials), pilots in groups.items():
            try:
                states.update(self._status_at(endpoint, credentials, pilots))
            except ArcError as exc:
                # The CE is down or refuses us: say nothing, ask again next cycle.
                log.warning("arc: no pilot states from %s this cycle: %s", endpoint, exc)
        return states

    def _status_at(self, endpoint: str, credentials: ArcCredentials,
                   pilots: list[tuple[str, ArcRef]]) -> dict[str, str]:
        states: dict[str, str] = {}
        with self._client(endpoint, credentials) as client:
            for start in range(0, len(pilots), STATUS_BATCH):
                batch = pilots[start:start + STATUS_BATCH]
                try:
                    found, unknown = parse_states(self._action(client, "status", [p.job_id for _, p in batch]))
                except ValueError as exc:
                    raise ArcError(f"status at {endpoint}: {exc}") from exc
                ended: list[str] = []
                for ref, parsed in batch:
                    state = found.get(parsed.job_id)
                    if state is None and parsed.job_id in unknown:
                        state = self._recorded_end(parsed.pilot_id)
                    elif state in FINAL:
                        if not self._keep_output(client, parsed, state):
                            continue        # its end is told with its log, at a later cycle
                        ended.append(parsed.job_id)
                    if state is not None:
                        states[ref] = state
                if ended:
                    try:
                        self._action(client, "clean", ended)
                    except ArcError as exc:
                        log.warning("arc: could not clean %d ended pilot job(s) at %s: %s", len(ended), endpoint, exc)
        return states

    def _keep_output(self, client: httpx.Client, parsed: ArcRef, state: str) -> bool:
        """Fetch an ended pilot's log into log_dir and record its end beside it;
        False if the CE would not give the log now (asked again next cycle)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        target = log_file(self.log_dir, parsed.pilot_id)
        partial = target.with_name(f"{target.name}.part")
        try:
            # Streamed to its file: a pilot that lived for days may have written a lot.
            with client.stream("GET", f"/jobs/{parsed.job_id}/session/{LOG}") as answer:
                if answer.status_code == 404:
                    partial.write_text(f"(pilot {parsed.pilot_id}: the CE kept no {LOG}; the job ended {state})\n")
                elif answer.status_code >= 400:
                    log.warning("arc: could not fetch the log of pilot %s: HTTP %s", parsed.pilot_id,
                                answer.status_code)
                    return False
                else:
                    _keep_tail(answer, partial)
        except (httpx.HTTPError, OSError) as exc:
            log.warning("arc: could not fetch the log of pilot %s: %s", parsed.pilot_id, exc)
            partial.unlink(missing_ok=True)
            return False
        partial.replace(target)
        (self.log_dir / f"{parsed.pilot_id}.arc").write_text(state + "\n")
        return True

    def _recorded_end(self, pilot_id: str) -> str:
        try:
            recorded = (self.log_dir / f"{pilot_id}.arc").read_text().strip()
        except OSError:
            return ABORTED          # gone from the CE without a trace here: purged, or never started
        return recorded if recorded in FINAL else ABORTED

    # -- kill ------------------------------------------------------------------
    def kill(self, ref: str) -> None:
        parsed = ArcRef.parse(ref)
        if parsed is None:
            raise InvalidInput(f"not an ARC pilot reference: {ref!r}")
        if parsed.credentials not in self._known:
            self._learn_configured()
        credentials = self._credentials(parsed)
        if credentials is None:
            raise ArcError(f"no configured credential for {parsed.endpoint} to stop pilot {parsed.pilot_id} with")
        with self._client(parsed.endpoint, credentials) as client:
            answer = self._action(client, "kill", [parsed.job_id])
        try:
            [job] = answer["job"] if isinstance(answer["job"], list) else [answer["job"]]
            code = str(job.get("status-code"))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ArcError(f"kill at {parsed.endpoint}: not an A-REX answer: {str(answer)[:200]!r}") from exc
        # 202: queued for killing; 404: A-REX no longer has the job, nothing to stop.
        if code not in ("200", "201", "202", "404"):
            raise ArcError(f"kill of pilot {parsed.pilot_id} at {parsed.endpoint}: {code} {job.get('reason', '')}")

    # -- output ----------------------------------------------------------------
    def output(self, ref: str, limit: int) -> str | None:
        """The end of the log fetched from the CE when the pilot ended; None before."""
        parsed = ArcRef.parse(ref)
        if parsed is None:
            raise InvalidInput(f"not an ARC pilot reference: {ref!r}")
        return log_tail(log_file(self.log_dir, parsed.pilot_id), limit)
