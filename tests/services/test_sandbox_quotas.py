"""Sandbox quotas (wms.yaml ``sandboxes.user_bytes``, ``sandboxes.total_bytes``)
and orphan uploads cleaned within hours, on SQLite, PostgreSQL and MariaDB:
an upload that reaches a quota exactly is stored, one byte more is refused
with 413 and the figures, the same content sent again adds nothing, and the
files of a user's jobs count until they expire."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from tests.helpers import ALICE, ANDRE, ROLAND
from tests.sandboxes_config import received, sandbox_runtime
from wms.api.app import create_app
from wms.config.models import SandboxSettings
from wms.core.errors import TooLarge
from wms.services import sandboxes
from wms.services.submission import SubmitOptions, submit_jobs
from wms.services.tokens import create_token

pytestmark = pytest.mark.databases


@pytest.fixture(params=["directory", "database"])
def quota_runtime(request, engine, tmp_path):
    def make(**quotas):
        return sandbox_runtime(engine, request.param, tmp_path / "sandboxes", **quotas)
    return make


def upload(runtime, who, data, now):
    digest, body = received(data)
    sandboxes.upload(runtime, who, digest, body, now)
    return digest


def test_an_upload_reaching_the_users_quota_exactly_is_stored_and_one_byte_more_is_refused(quota_runtime, now):
    runtime = quota_runtime(user_bytes=1000, total_bytes=0)
    upload(runtime, ROLAND, b"a" * 600, now)
    upload(runtime, ROLAND, b"b" * 400, now)                       # 1,000 of 1,000
    with pytest.raises(TooLarge) as refused:
        upload(runtime, ROLAND, b"c", now)
    assert str(refused.value) == ("user roland's sandboxes hold 1,000 bytes; the quota is 1,000 "
                                  "(sandboxes.user_bytes); this file adds 1")
    assert refused.value.status == 413
    upload(runtime, ROLAND, b"a" * 600, now)                       # the same content again adds nothing
    upload(runtime, ANDRE, b"c" * 1000, now)                       # another user's quota


def test_the_total_quota_counts_every_users_sandboxes_each_content_once(quota_runtime, now):
    runtime = quota_runtime(user_bytes=0, total_bytes=1500)
    shared = b"s" * 1000
    upload(runtime, ROLAND, shared, now)
    upload(runtime, ALICE, shared, now)                            # stored once: 1,000 held
    with pytest.raises(TooLarge) as refused:
        upload(runtime, ANDRE, b"x" * 501, now)
    assert str(refused.value) == ("all sandboxes together hold 1,000 bytes; the quota is 1,500 "
                                  "(sandboxes.total_bytes); this file adds 501")
    upload(runtime, ANDRE, b"x" * 500, now)


def test_the_files_a_users_jobs_name_count_until_they_expire(quota_runtime, now):
    runtime = quota_runtime(user_bytes=1000, total_bytes=0)
    script = upload(runtime, ROLAND, b"#" * 800, now)
    submit_jobs(runtime, ROLAND, [("job.jdl", '[ Executable = "/bin/sh"; InputSandbox = {"run.sh"}; ]')],
                SubmitOptions(), now, input_sandboxes=[{"run.sh": script}])
    later = now + timedelta(seconds=runtime.config.settings.sandboxes.orphan_grace + 1)
    assert sandboxes.clean(runtime, later)["uploads_forgotten"] == 1    # the job names it still
    with pytest.raises(TooLarge, match="hold 800 bytes"):
        upload(runtime, ROLAND, b"y" * 201, later)


def test_an_upload_no_job_names_is_gone_within_hours(quota_runtime, now):
    runtime = quota_runtime()
    assert SandboxSettings().orphan_grace + runtime.config.settings.agent_period("sandbox_cleaner") <= 3 * 3600
    lone = upload(runtime, ROLAND, b"uploaded, never submitted", now)
    grace = runtime.config.settings.sandboxes.orphan_grace
    assert sandboxes.clean(runtime, now + timedelta(seconds=grace - 1))["contents_removed"] == 0
    report = sandboxes.clean(runtime, now + timedelta(seconds=grace + 1))
    assert report == {"files_removed": 0, "uploads_forgotten": 1, "contents_removed": 1}
    assert not sandboxes.store_of(runtime).exists(lone)


def test_an_upload_over_the_quota_is_a_413_with_the_figures(quota_runtime, engine, now):
    runtime = quota_runtime(user_bytes=100, total_bytes=0)
    client = TestClient(create_app(runtime))
    headers = {"Authorization": f"Bearer {create_token(engine, ROLAND, now)}",
               "Content-Type": "application/octet-stream"}
    digest, _ = received(b"z" * 101)
    response = client.put(f"/api/v1/sandboxes/{digest}", content=b"z" * 101, headers=headers)
    assert response.status_code == 413
    assert response.json()["detail"] == ("user roland's sandboxes hold 0 bytes; the quota is 100 "
                                         "(sandboxes.user_bytes); this file adds 101")
