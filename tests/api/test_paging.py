"""Lists page by default (docs/api.md, "Pages"): a page holds at most
paging.max_page_size rows, the answer's X-Next-Cursor and Link headers lead
to the next one, a cursor is keyed on the id (rows inserted meanwhile move
nothing), and a cursor that is forged, cut or given for other filters gets a
400 that says so. On SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import base64
import dataclasses
import re
from datetime import datetime, timezone

import pytest
from fastapi.testclient import TestClient

from tests.helpers import ADMIN, ANDRE, ROLAND, default_config
from wms.api.app import create_app
from wms.config.models import PagingSettings
from wms.services.runtime import Runtime
from wms.services.tokens import create_token

pytestmark = pytest.mark.databases

HELLO = '[ Executable = "/bin/true"; JobName = "page"; ]'


@pytest.fixture
def paged(engine):
    """An API whose pages hold 3 rows by default and 5 at most, and a caller per user."""
    config = default_config()
    settings = config.settings.model_copy(update={"paging": PagingSettings(page_size=3, max_page_size=5)})
    runtime = Runtime.create(dataclasses.replace(config, settings=settings), engine)
    client = TestClient(create_app(runtime))
    now = datetime.now(timezone.utc)
    tokens = {who.user: create_token(engine, who, now) for who in (ROLAND, ANDRE, ADMIN)}

    def call(user: str, path: str, **params):
        return client.get("/api/v1" + path, params=params, headers={"Authorization": f"Bearer {tokens[user]}"})

    def submit(user: str, count: int) -> list[int]:
        body = {"jdls": [{"source": "page.jdl", "text": HELLO.replace("]", f"Parameters = {count}; ]")}]}
        response = client.post("/api/v1/jobs", json=body, headers={"Authorization": f"Bearer {tokens[user]}"})
        assert response.status_code == 201, response.text
        return response.json()["job_ids"]

    return call, submit


def every_page(call, user, path, **params):
    """The pages of a list as the CLI reads them: following X-Next-Cursor to the end."""
    pages = []
    while True:
        response = call(user, path, **params)
        assert response.status_code == 200, response.text
        pages.append([row["JobID"] for row in response.json()])
        cursor = response.headers.get("X-Next-Cursor")
        if cursor is None:
            assert "Link" not in response.headers
            return pages
        params = {**params, "cursor": cursor}


def test_jobs_come_a_page_at_a_time_with_the_next_page_in_the_headers(paged):
    call, submit = paged
    ids = submit("roland", 7)
    first = call("roland", "/jobs")
    assert [row["JobID"] for row in first.json()] == ids[:3]           # paging.page_size
    cursor = first.headers["X-Next-Cursor"]
    assert first.headers["Link"] == f'</api/v1/jobs?cursor={cursor}>; rel="next"'
    assert every_page(call, "roland", "/jobs") == [ids[:3], ids[3:6], ids[6:]]


def test_a_page_holds_at_most_max_page_size_rows_whatever_limit_asks(paged):
    call, submit = paged
    ids = submit("roland", 7)
    assert every_page(call, "roland", "/jobs", limit=1000) == [ids[:5], ids[5:]]
    assert every_page(call, "roland", "/jobs", limit=2) == [ids[:2], ids[2:4], ids[4:6], ids[6:]]


def test_the_link_header_keeps_the_filters_of_the_request(paged):
    call, submit = paged
    submit("roland", 4)
    response = call("roland", "/jobs", status="Waiting", limit=2)
    cursor = response.headers["X-Next-Cursor"]
    assert response.headers["Link"] == f'</api/v1/jobs?status=Waiting&limit=2&cursor={cursor}>; rel="next"'


def test_newest_first_pages_down_from_the_newest_job(paged):
    call, submit = paged
    ids = submit("roland", 7)
    assert every_page(call, "roland", "/jobs", order="desc") == [ids[:3:-1], ids[3:0:-1], ids[:1]]


def test_jobs_submitted_between_two_pages_shift_nothing(paged):
    call, submit = paged
    first_ids = submit("roland", 4)
    first = call("roland", "/jobs")
    later_ids = submit("roland", 2)                                     # inserted while the reader reads
    rest = every_page(call, "roland", "/jobs", cursor=first.headers["X-Next-Cursor"])
    assert [row["JobID"] for row in first.json()] + sum(rest, []) == first_ids + later_ids


def test_every_page_keeps_to_what_the_caller_may_see(paged):
    call, submit = paged
    mine = submit("roland", 4)
    submit("andre", 4)
    assert sum(every_page(call, "roland", "/jobs"), []) == mine
    assert len(sum(every_page(call, "admin", "/jobs"), [])) == 8


def test_the_last_page_full_to_the_brim_has_no_next(paged):
    call, submit = paged
    submit("roland", 3)
    response = call("roland", "/jobs")
    assert len(response.json()) == 3 and "X-Next-Cursor" not in response.headers


@pytest.mark.parametrize(("cursor", "reason"), [
    ("not-a-cursor", "not a cursor this server gave out"),
    ("", "String should have at least 1 character"),
    ("x" * 3000, "String should have at most 2048 characters"),
])
def test_a_cursor_not_given_out_by_the_server_is_refused(paged, cursor, reason):
    call, _ = paged
    response = call("roland", "/jobs", cursor=cursor)
    assert response.status_code in (400, 422)
    assert reason in response.json()["detail"]


def test_a_cursor_changed_by_hand_is_refused(paged):
    call, submit = paged
    submit("roland", 4)
    cursor = call("roland", "/jobs").headers["X-Next-Cursor"]
    text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    forged_text = re.sub(r",\d+\]\|", ",0]|", text)                    # the last key, set back to 0
    assert forged_text != text
    forged = base64.urlsafe_b64encode(forged_text.encode()).decode().rstrip("=")
    response = call("roland", "/jobs", cursor=forged)
    assert response.status_code == 400
    assert response.json()["detail"].startswith("cursor: not a cursor this server gave out")


def test_a_cursor_given_for_other_filters_is_refused(paged):
    call, submit = paged
    submit("roland", 4)
    cursor = call("roland", "/jobs", status="Waiting").headers["X-Next-Cursor"]
    response = call("roland", "/jobs", status="Done", cursor=cursor)
    assert response.status_code == 400
    assert response.json()["detail"] == ("cursor: given for other filters than this request's; keep the filters "
                                         "of the first page, or start again without a cursor")
