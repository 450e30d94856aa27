"""Pure parts of the ``arc`` backend: the credential a queue names, a
pilot's backend reference, the xRSL job description and the script that
starts the pilot, ARC's job states read as pilot states, and the REST
interface's answers. No request is made here (wms/backends/arc.py
does that).

A pilot is an ARC job whose session directory receives three files from
the SiteDirector (uploaded after the job is created, before A-REX lets it
start): ``pilot.sh``, which starts the pilot with its options; ``pilot.pyz``, the pilot as a
zipapp (the worker node needs python3, not this package); and
``pilot.token``, the pilot's own token. The token is in no job description
(which the CE keeps and shows its administrators), no environment and no
command line: ``pilot.sh`` opens the file on a descriptor, removes it and
starts the pilot with ``--token-file -`` reading that descriptor. The
pilot's output goes to ``pilot.log``, the one file A-REX keeps when the
job ends, which the backend fetches for `wms pilots --output`.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from wms.core import xrsl
from wms.core.errors import InvalidInput
from wms.backends.base import ABORTED, DONE, FAILED, RUNNING, SUBMITTED
from wms.backends.slurm_jobs import PILOT_OPTIONS

SCRIPT, ZIPAPP, TOKEN, LOG = "pilot.sh", "pilot.pyz", "pilot.token", "pilot.log"
# The files uploaded into each pilot's session directory, in this order
# (the token last: a job whose upload failed half-way holds no secret).
UPLOADS = (SCRIPT, ZIPAPP, TOKEN)
# The REST interface's path under an A-REX endpoint.
REST_PATH = "/rest/1.0"
# A reference is stored in a column of this many characters.
MAX_REF_LENGTH = 255
# The longest job id assumed when checking a reference's length before submission.
JOB_ID_ALLOWANCE = 64
_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")

# ARC's REST job states as pilot states. A job is Submitted until the
# batch system starts it, Running until A-REX has finished with it
# (EXECUTED, FINISHING: the payload has ended, its output is being kept);
# FINISHED is a zero exit, FAILED anything else (or a failure of A-REX's);
# KILLING still runs, KILLED was cancelled; WIPED: A-REX has removed it.
# OTHER (and any state this table does not know) is left unjudged.
ARC_STATES = {
    **dict.fromkeys(("ACCEPTING", "ACCEPTED", "PREPARING", "PREPARED", "SUBMITTING", "QUEUING", "HELD"), SUBMITTED),
    **dict.fromkeys(("RUNNING", "EXITINGLRMS", "EXECUTED", "FINISHING", "KILLING"), RUNNING),
    "FINISHED": DONE,
    "FAILED": FAILED,
    **dict.fromkeys(("KILLED", "WIPED"), ABORTED),
}
FINAL = frozenset({DONE, FAILED, ABORTED})



def pilot_script(pilot_argv: Sequence[str]) -> str:
    """``pilot.sh``: the pilot's options are in it, not in the description,
    whose ``arguments`` A-REX's job wrapper would expand (``$HOME`` there
    is the session directory)."""
    return (
        "#!/bin/sh\n"
        "# A wms pilot, started by an ARC CE in the job's session directory, which\n"
        f"# holds the pilot ({ZIPAPP}) and its token ({TOKEN}). The token goes from\n"
        "# its file to a descriptor and the file away before the pilot starts: the\n"
        "# pilot's jobs find it in no file of theirs.\n"
        f"if [ -f {TOKEN} ]; then exec 3< {TOKEN}; rm -f {TOKEN}; else exec 3< /dev/null; fi\n"
        f"exec python3 {ZIPAPP} {shlex.join([*pilot_argv, *PILOT_OPTIONS])}"
        ' --workdir "$PWD/jobs" --token-file - <&3 3<&-\n'
    )


@dataclass(frozen=True)
class ArcCredentials:
    """How the SiteDirector shows itself to an A-REX and checks the A-REX:
    paths on its host, read at every call (a renewed proxy or token is
    used as soon as its file is replaced). ``proxy`` holds a certificate
    and its key in one file; ``token_file`` a bearer token."""

    certificate: str = ""
    key: str = ""
    proxy: str = ""
    ca_file: str = ""
    ca_dir: str = ""
    token_file: str = ""

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> "ArcCredentials":
        """The credential a queue's parameters name; refused when it names none, or half of one."""
        credentials = cls(**{f.name: str(options.get(param) or "") for f, param in zip(fields(cls), _PARAMETERS)})
        if bool(credentials.certificate) != bool(credentials.key):
            raise InvalidInput("Backend arc needs ARCCertificate and ARCKey together (or ARCProxy)")
        if credentials.proxy and credentials.certificate:
            raise InvalidInput("Backend arc takes ARCProxy or ARCCertificate and ARCKey, not both")
        if not (credentials.certificate or credentials.proxy or credentials.token_file):
            raise InvalidInput("Backend arc needs a credential: ARCCertificate and ARCKey, ARCProxy or ARCTokenFile")
        return credentials

    @property
    def digest(self) -> str:
        """A short name of these paths (not of the files' contents), for references."""
        text = json.dumps([getattr(self, f.name) for f in fields(self)])
        return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_LENGTH]


# The queue parameters, in the fields' order.
_PARAMETERS = ("ARCCertificate", "ARCKey", "ARCProxy", "ARCCAFile", "ARCCADirectory", "ARCTokenFile")
DIGEST_LENGTH = 12


@dataclass(frozen=True)
class ArcRef:
    """A pilot's backend reference: the A-REX endpoint, the job's id there,
    the pilot id and the digest of the credential it was submitted with
    (:attr:`ArcCredentials.digest`; the backend finds the credential's
    paths by it in the configuration):
    ``https://ce:443/arex/jobs/<job id>?pilot=<pilot id>&cred=<digest>``."""

    endpoint: str
    job_id: str
    pilot_id: str
    credentials: str

    def __str__(self) -> str:
        query = urlencode({"pilot": self.pilot_id, "cred": self.credentials})
        return f"{self.endpoint}/jobs/{quote(self.job_id, safe='')}?{query}"

    @classmethod
    def parse(cls, ref: str) -> "ArcRef | None":
        try:
            parts = urlsplit(ref)
        except ValueError:
            return None
        base, marker, job_id = parts.path.rpartition("/jobs/")
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        pilot_id = query.get("pilot", "")
        if (parts.scheme != "https" or not parts.netloc or not marker or not is_job_id(unquote(job_id))
                or not query.get("cred")
                or not pilot_id or "/" in pilot_id or pilot_id.startswith(".")):
            return None             # (the pilot id names files in the log directory)
        return cls(f"https://{parts.netloc}{base}", unquote(job_id), pilot_id, query["cred"])


def check_ref_length(endpoint: str, pilot_id: str) -> None:
    """Refuse, before anything is submitted, a CE whose references would not fit their column."""
    longest = len(str(ArcRef(endpoint, "x" * JOB_ID_ALLOWANCE, pilot_id, "x" * DIGEST_LENGTH)))
    if longest > MAX_REF_LENGTH:
        raise InvalidInput(f"Backend arc: the pilots' references to {endpoint} would be {longest} characters "
                           f"(at most {MAX_REF_LENGTH}): the endpoint's URL is too long")


def job_description(pilot_id: str, queue: str = "", extra: str = "") -> str:
    """The pilot's xRSL: ``pilot.sh`` (:func:`pilot_script`), the three
    uploaded files, its output in ``pilot.log`` (kept when the job ends),
    then the queue's ARCQueue and ARCRSL."""
    relations = [
        f"(executable={xrsl.quote(SCRIPT)})",
        "(inputfiles=" + "".join(f"({xrsl.quote(name)} \"\")" for name in UPLOADS) + ")",
        # Both streams named: A-REX leaves join="yes" to clients, and would drop stderr.
        f"(stdout={xrsl.quote(LOG)})(stderr={xrsl.quote(LOG)})",
        f"(outputfiles=({xrsl.quote(LOG)} \"\"))",
        f"(jobname={xrsl.quote(f'wms-{pilot_id}')})",
    ]
    if queue:
        relations.append(f"(queue={xrsl.quote(queue)})")
    if extra:
        relations.append(extra.strip())
    return "&" + "\n ".join(relations) + "\n"


def _jobs(answer: Any) -> list[dict[str, Any]]:
    """The ``job`` entries of a REST answer: one object for one job, a list for several."""
    jobs = answer.get("job") if isinstance(answer, dict) else None
    if isinstance(jobs, dict):
        jobs = [jobs]
    if not isinstance(jobs, list) or not all(isinstance(job, dict) for job in jobs):
        raise ValueError(f"not an A-REX answer about jobs: {str(answer)[:200]!r}")
    return jobs


def parse_created(answer: Any) -> str:
    """The new job's id from the answer to ``POST /jobs?action=new``; ValueError with A-REX's reason."""
    [job] = _jobs(answer)[:1] or [{}]
    if str(job.get("status-code")) != "201" or not job.get("id"):
        raise ValueError(f"A-REX refused the job: {job.get('status-code')} {job.get('reason', '')}".strip())
    job_id = str(job["id"])
    if not is_job_id(job_id):
        raise ValueError(f"A-REX answered {job_id[:100]!r}, not a job id")
    return job_id


def is_job_id(text: str) -> bool:
    """An id A-REX gives (letters and digits): it goes into the paths of later requests."""
    return bool(_JOB_ID.fullmatch(text))


def parse_states(answer: Any) -> tuple[dict[str, str], set[str]]:
    """The answer to ``POST /jobs?action=status``: job id -> pilot state
    (the states :data:`ARC_STATES` knows), and the ids A-REX does not know (404)."""
    states: dict[str, str] = {}
    unknown: set[str] = set()
    for job in _jobs(answer):
        job_id, code = str(job.get("id", "")), str(job.get("status-code", ""))
        if code == "404":
            unknown.add(job_id)
        elif code == "200" and str(job.get("state")) in ARC_STATES:
            states[job_id] = ARC_STATES[str(job["state"])]
    return states, unknown


def jobs_body(job_ids: Sequence[str]) -> dict[str, Any]:
    """The body of a REST action on several jobs."""
    return {"job": [{"id": job_id} for job_id in job_ids]}
