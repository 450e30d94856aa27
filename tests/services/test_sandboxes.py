"""Input and output sandboxes through the services, on SQLite, PostgreSQL
and MariaDB, with the directory store and the database store."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from tests.helpers import ADMIN, ALICE, ANDRE, ROLAND, as_pilot, run_concurrently
from tests.sandboxes_config import FILE_BYTES, JOB_BYTES, received, sandbox_runtime
from wms.core.errors import Conflict, Forbidden, InvalidInput, NotFound, TooLarge
from wms.core.match.context import PilotRequest
from wms.db.engine import reading
from wms.db.schema import jobs, sandbox_chunks, sandbox_files, sandbox_uploads
from wms.services import matcher
from wms.services import leases
from wms.services import sandboxes
from wms.services.submission import SubmitOptions, submit_jobs

pytestmark = pytest.mark.databases

JDL = '[ Executable = "/bin/sh"; Arguments = "run.sh"; CPUTime = 300; InputSandbox = {"run.sh", "data/big.dat"};' \
      ' OutputSandbox = {"result.txt", "*.log"}; ]'
SCRIPT = b"#!/bin/sh\necho hello > result.txt\n"
BIG = bytes(range(256)) * 2000          # 512,000 bytes: two pieces in the database store


@pytest.fixture(params=["directory", "database"])
def runtime(request, engine, tmp_path):
    return sandbox_runtime(engine, request.param, tmp_path / "sandboxes")


def rows(runtime, table) -> int:
    with reading(runtime.engine) as conn:
        return conn.execute(select(func.count()).select_from(table)).scalar_one()


def upload(runtime, who, data, now):
    digest, body = received(data)
    sandboxes.upload(runtime, who, digest, body, now)
    return digest


def submit(runtime, now, mapping, text=JDL, who=ROLAND):
    return submit_jobs(runtime, who, [("job.jdl", text)], SubmitOptions(), now, input_sandboxes=[mapping])


def take(runtime, now, job_id, pilot="p1"):
    """The job matched to ``pilot`` and Running; its attempt."""
    request = PilotRequest(site="DIRAC.Local.ch", ce="localhost", queue="default", host="wn1", pilot_id=pilot,
                           platform="x86_64-el9", cpu_time_left=100000)
    job = matcher.request_job(runtime, request, now).job
    assert job["JobID"] == job_id
    leases.pilot_status(runtime, as_pilot(pilot), job_id, pilot, "Running", "", None, now)
    return job["Attempt"]


def content(pieces) -> bytes:
    return b"".join(pieces)


def test_input_files_travel_with_the_job_to_its_pilot(runtime, now):
    script, big = upload(runtime, ROLAND, SCRIPT, now), upload(runtime, ROLAND, BIG, now)
    [job_id] = submit(runtime, now, {"run.sh": script, "data/big.dat": big})
    view = sandboxes.manifest(runtime, ROLAND, job_id)
    assert view["InputSandbox"] == [{"name": "big.dat", "size": len(BIG), "sha256": big},
                                    {"name": "run.sh", "size": len(SCRIPT), "sha256": script}]
    assert view["OutputSandbox"] == ["result.txt", "*.log"]
    attempt = take(runtime, now, job_id)
    info, pieces = sandboxes.open_file(runtime, as_pilot("p1"), job_id, "input", "big.dat", "p1", attempt)
    assert (info.size, info.sha256, content(pieces)) == (len(BIG), big, BIG)
    if runtime.config.settings.sandboxes.store == "database":
        assert rows(runtime, sandbox_chunks) == 2 + 1      # BIG in two pieces, the script in one


def test_a_parametric_job_stores_a_shared_file_once(runtime, now):
    script = upload(runtime, ROLAND, SCRIPT, now)
    text = '[ Executable = "/bin/sh"; CPUTime = 300; InputSandbox = {"run.sh"}; Parameters = 3; ]'
    ids = submit(runtime, now, {"run.sh": script}, text)
    assert len(ids) == 3 and rows(runtime, sandbox_files) == 3
    for job_id in ids:
        assert [f["sha256"] for f in sandboxes.manifest(runtime, ROLAND, job_id)["InputSandbox"]] == [script]


def test_a_file_that_was_not_uploaded_refuses_the_whole_submission(runtime, now):
    script = upload(runtime, ROLAND, SCRIPT, now)
    good = ("good.jdl", '[ Executable = "/bin/true"; CPUTime = 300; InputSandbox = {"run.sh"}; ]')
    bad = ("bad.jdl", '[ Executable = "/bin/true"; CPUTime = 300; InputSandbox = {"run.sh", "missing.txt"}; ]')
    with pytest.raises(InvalidInput) as caught:
        submit_jobs(runtime, ROLAND, [good, bad], SubmitOptions(), now,
                    input_sandboxes=[{"run.sh": script}, {"run.sh": script}])
    assert str(caught.value) == ("bad.jdl: InputSandbox file 'missing.txt' was not sent with the job "
                                 "(`wms submit` uploads the local files a JDL lists)")
    assert (rows(runtime, jobs), rows(runtime, sandbox_files)) == (0, 0)


def test_another_users_upload_cannot_be_named(runtime, now):
    theirs = upload(runtime, ANDRE, SCRIPT, now)
    with pytest.raises(InvalidInput, match=f"job.jdl: InputSandbox file 'run.sh': no upload of yours has SHA-256 "
                                           f"{theirs}"):
        submit(runtime, now, {"run.sh": theirs, "data/big.dat": theirs})
    assert (rows(runtime, jobs), rows(runtime, sandbox_files)) == (0, 0)


def test_a_sandbox_over_the_job_limit_is_refused_whole(runtime, now):
    one, two = b"a" * FILE_BYTES, b"b" * FILE_BYTES
    mapping = {"run.sh": upload(runtime, ROLAND, one, now), "data/big.dat": upload(runtime, ROLAND, two, now)}
    with pytest.raises(TooLarge) as caught:
        submit(runtime, now, mapping)
    assert str(caught.value) == (f"job.jdl: sandbox of {2 * FILE_BYTES} bytes, more than {JOB_BYTES} per job "
                                 "(sandboxes.job_bytes)")
    assert (rows(runtime, jobs), rows(runtime, sandbox_files)) == (0, 0)


@pytest.mark.parametrize("entries, message", [
    ('{"../run.sh/"}', "is a directory; list its files"),
    ('{"LFN:/lhcb/data/file.dst"}', "catalogue files (LFN:, SB:) are not supported"),
    ('{"a/run.sh", "b/run.sh"}', "both arrive as 'run.sh' in the job's directory"),
])
def test_input_entries_that_cannot_become_files_of_the_job_are_refused(runtime, now, entries, message):
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(").replace(")", r"\)")):
        submit(runtime, now, {}, f'[ Executable = "/bin/true"; CPUTime = 300; InputSandbox = {entries}; ]')
    assert rows(runtime, jobs) == 0


def test_output_entries_with_a_directory_are_refused(runtime, now):
    with pytest.raises(InvalidInput, match=r"OutputSandbox entry: '../../etc/passwd' is not a plain file name"):
        submit(runtime, now, {}, '[ Executable = "/bin/true"; CPUTime = 300; OutputSandbox = {"../../etc/passwd"}; ]')


def test_an_upload_over_the_file_limit_or_with_a_wrong_digest_is_refused(runtime, now):
    digest, body = received(b"x" * (FILE_BYTES + 1))
    with pytest.raises(TooLarge, match=f"more than {FILE_BYTES} \\(sandboxes.file_bytes\\)"):
        sandboxes.upload(runtime, ROLAND, digest, body, now)
    other, body = received(b"what was sent")
    with pytest.raises(InvalidInput, match="not .* as announced"):
        sandboxes.upload(runtime, ROLAND, "0" * 64, body, now)
    assert rows(runtime, sandbox_uploads) == 0 and other


def test_the_pilot_that_holds_the_job_sends_its_output_and_only_the_owner_reads_it(runtime, now):
    [job_id] = submit(runtime, now, {}, '[ Executable = "/bin/true"; CPUTime = 300; OutputSandbox = {"r.txt"}; ]')
    attempt = take(runtime, now, job_id, "p1")
    digest, body = received(b"the result\n")
    sandboxes.store_output_file(runtime, as_pilot("p1"), job_id, "p1", attempt, "r.txt", digest, body, now)
    # Another pilot, speaking for itself or pretending to be p1.
    _, body = received(b"forged")
    with pytest.raises(NotFound, match=f"^no such job: {job_id}$"):      # as if there were no such job
        sandboxes.store_output_file(runtime, as_pilot("p2"), job_id, "p2", attempt, "r.txt", digest, body, now)
    with pytest.raises(Forbidden, match="cannot speak for pilot 'p1'"):
        sandboxes.store_output_file(runtime, as_pilot("p2"), job_id, "p1", attempt, "r.txt", digest, body, now)
    with pytest.raises(Conflict, match="handed out again"):
        sandboxes.check_output_upload(runtime, as_pilot("p1"), job_id, "p1", attempt + 1, "r.txt")
    # The owner and a manager read it; another user and pilots do not.
    for reader in (ROLAND, ADMIN):
        info, pieces = sandboxes.open_file(runtime, reader, job_id, "output", "r.txt")
        assert (info.name, content(pieces)) == ("r.txt", b"the result\n")
    with pytest.raises(NotFound, match=f"^no such job: {job_id}$"):      # andre does not see roland's jobs
        sandboxes.open_file(runtime, ANDRE, job_id, "output", "r.txt")
    # alice sees the jobs of her VO (visibility: jobs: vo) but not their sandboxes.
    visible = runtime.config.settings.visibility.model_copy(update={"jobs": "vo"})
    seeing = dataclasses.replace(runtime, config=dataclasses.replace(
        runtime.config, settings=runtime.config.settings.model_copy(update={"visibility": visible})))
    with pytest.raises(Forbidden, match="belongs to another user: its sandboxes are its owner's"):
        sandboxes.open_file(seeing, ALICE, job_id, "output", "r.txt")
    with pytest.raises(Forbidden, match="pilots upload output sandboxes; they do not read them"):
        sandboxes.open_file(runtime, as_pilot("p1"), job_id, "output", "r.txt", "p1")
    with pytest.raises(NotFound, match="has no output sandbox file 'other.txt'"):
        sandboxes.open_file(runtime, ROLAND, job_id, "output", "other.txt")
    assert sandboxes.manifest(runtime, ROLAND, job_id)["OutputFiles"] == [
        {"name": "r.txt", "size": 11, "sha256": digest}]


def test_a_pilot_reads_only_the_input_of_the_job_it_holds(runtime, now):
    script = upload(runtime, ROLAND, SCRIPT, now)
    text = '[ Executable = "/bin/true"; CPUTime = 300; InputSandbox = {"run.sh"}; ]'
    [job_id] = submit(runtime, now, {"run.sh": script}, text)
    with pytest.raises(NotFound, match=f"^no such job: {job_id}$"):
        sandboxes.open_file(runtime, as_pilot("p1"), job_id, "input", "run.sh", "p1")   # not matched yet
    attempt = take(runtime, now, job_id, "p1")
    with pytest.raises(NotFound, match=f"^no such job: {job_id}$"):
        sandboxes.manifest(runtime, as_pilot("p2"), job_id, "p2", attempt)
    assert sandboxes.manifest(runtime, as_pilot("p1"), job_id, "p1", attempt)["InputSandbox"][0]["name"] == "run.sh"


def test_the_output_of_a_job_stays_within_the_job_limit(runtime, now):
    [job_id] = submit(runtime, now, {}, '[ Executable = "/bin/true"; CPUTime = 300; OutputSandbox = {"*"}; ]')
    attempt = take(runtime, now, job_id)
    for name in ("a", "b"):
        digest, body = received(name.encode() * FILE_BYTES)
        if name == "b":
            with pytest.raises(TooLarge, match="per job"):
                sandboxes.store_output_file(runtime, as_pilot("p1"), job_id, "p1", attempt, name, digest, body, now)
        else:
            sandboxes.store_output_file(runtime, as_pilot("p1"), job_id, "p1", attempt, name, digest, body, now)
    assert [f["name"] for f in sandboxes.manifest(runtime, ROLAND, job_id)["OutputFiles"]] == ["a"]


def test_sandboxes_of_finished_jobs_expire_and_shared_content_stays_while_needed(runtime, now):
    settings = runtime.config.settings.sandboxes
    script = upload(runtime, ROLAND, SCRIPT, now)
    text = '[ Executable = "/bin/true"; CPUTime = 300; InputSandbox = {"run.sh"}; ]'
    [done] = submit(runtime, now, {"run.sh": script}, text)
    take(runtime, now, done)
    leases.pilot_status(runtime, as_pilot("p1"), done, "p1", "Done", "", 0, now)
    [waiting] = submit(runtime, now, {"run.sh": script}, text)
    lone = upload(runtime, ROLAND, b"uploaded, never submitted", now)
    store = sandboxes.store_of(runtime)

    report = sandboxes.clean(runtime, now + timedelta(seconds=settings.orphan_grace - 1))
    assert report == {"files_removed": 0, "uploads_forgotten": 0, "contents_removed": 0}
    report = sandboxes.clean(runtime, now + timedelta(seconds=settings.max_age + 1))
    # The finished job's file goes; the upload records go; the content the
    # waiting job names stays, the lone upload's goes.
    assert report == {"files_removed": 1, "uploads_forgotten": 2, "contents_removed": 1}
    assert store.exists(script) and not store.exists(lone)
    assert sandboxes.manifest(runtime, ROLAND, waiting)["InputSandbox"][0]["sha256"] == script
    assert sandboxes.manifest(runtime, ROLAND, done)["InputSandbox"] == []
    # Once no job names it, the content goes too.
    with reading(runtime.engine) as conn, conn.begin():
        conn.execute(sandbox_files.delete())
    assert sandboxes.clean(runtime, now + timedelta(seconds=settings.max_age + 2))["contents_removed"] == 1
    assert not store.exists(script)


def test_only_the_latest_attempt_sends_the_jobs_output(runtime, now):
    [job_id] = submit(runtime, now, {}, '[ Executable = "/bin/true"; CPUTime = 300; OutputSandbox = {"*"}; ]')
    request = PilotRequest(site="DIRAC.Local.ch", ce="localhost", queue="default", host="wn1", pilot_id="p1",
                           platform="x86_64-el9", cpu_time_left=100000)
    first = matcher.request_job(runtime, request, now).job["Attempt"]
    digest, body = received(b"from the first attempt")
    sandboxes.store_output_file(runtime, as_pilot("p1"), job_id, "p1", first, "old.txt", digest, body, now)
    # p1 never confirms: the lease runs out, the job goes to p2.
    later = now + timedelta(seconds=runtime.config.settings.match_lease + 1)
    assert leases.expire_leases(runtime, later) == 1
    second = take(runtime, later, job_id, "p2")
    assert second == first + 1
    assert sandboxes.manifest(runtime, ROLAND, job_id)["OutputFiles"] == []
    with pytest.raises(NotFound):
        sandboxes.open_file(runtime, ROLAND, job_id, "output", "old.txt")
    digest, body = received(b"from the second")
    sandboxes.store_output_file(runtime, as_pilot("p2"), job_id, "p2", second, "new.txt", digest, body, later)
    assert [f["name"] for f in sandboxes.manifest(runtime, ROLAND, job_id)["OutputFiles"]] == ["new.txt"]
    assert rows(runtime, sandbox_files) == 1              # the first attempt's file is gone


def test_the_same_file_uploaded_at_once_by_many_is_stored_once(runtime, now):
    data = BIG
    digest, _ = received(data)
    _, errors = run_concurrently(lambda i: sandboxes.upload(runtime, ROLAND if i % 2 else ADMIN, digest,
                                                            received(data)[1], now), 4)
    assert errors == []
    assert rows(runtime, sandbox_uploads) == 2
    assert content(sandboxes.store_of(runtime).read(digest)) == data
    if runtime.config.settings.sandboxes.store == "database":
        assert rows(runtime, sandbox_chunks) == 2
