"""Every list of the API pages as GET /jobs does (docs/api.md, "Pages"): the
pools, the task queues, the pilots, the reservations (qrstat) and both
accounting lists answer at most a page, lead on with X-Next-Cursor and Link,
keep to what the caller may see on every page, and refuse a cursor that is
forged or belongs to another list with a 400 that says so. On SQLite,
PostgreSQL and MariaDB."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient

from tests.helpers import ADMIN, ANDRE, ROLAND, default_config
from wms.api.app import create_app
from wms.config.models import PagingSettings
from wms.core.identity import Identity
from wms.core.paging import encode_cursor
from wms.db import pilots as pilots_db
from wms.services.runtime import Runtime
from wms.services.tokens import create_token

pytestmark = pytest.mark.databases

API = "/api/v1"


class Lists:
    """An API whose pages hold 3 rows by default and 5 at most, a token per user, and helpers
    to make the objects the lists show."""

    def __init__(self, engine, **visibility: str) -> None:
        config = default_config()
        update: dict[str, object] = {"paging": PagingSettings(page_size=3, max_page_size=5)}
        if visibility:
            update["visibility"] = config.settings.visibility.model_copy(update=visibility)
        settings = config.settings.model_copy(update=update)
        self.runtime = Runtime.create(dataclasses.replace(config, settings=settings), engine)
        self.client = TestClient(create_app(self.runtime))
        self.now = datetime.now(timezone.utc)
        self.tokens = {who.user: create_token(engine, who, self.now) for who in (ROLAND, ANDRE, ADMIN)}

    def headers(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[user]}"}

    def get(self, user: str, path: str, **params):
        return self.client.get(API + path, params=params, headers=self.headers(user))

    def post(self, user: str, path: str, body: dict, status: int = 201) -> dict:
        response = self.client.post(API + path, json=body, headers=self.headers(user))
        assert response.status_code == status, response.text
        return response.json()

    def submit(self, user: str, memory: int, count: int = 1) -> list[int]:
        """``count`` jobs whose Requirements ask for ``memory``: one pool and one task queue per value."""
        text = (f'[ Executable = "/bin/true"; JobName = "page"; Parameters = {count}; '
                f'Requirements = [ Memory = {memory}; ]; ]')
        return self.post(user, "/jobs", {"jdls": [{"source": "page.jdl", "text": text}]})["job_ids"]

    def every_page(self, user: str, path: str, key: str, **params) -> list[list]:
        """The keys of each page, following X-Next-Cursor to the end, as the CLI does."""
        pages = []
        while True:
            response = self.get(user, path, **params)
            assert response.status_code == 200, response.text
            pages.append([row[key] for row in response.json()])
            cursor = response.headers.get("X-Next-Cursor")
            if cursor is None:
                assert "Link" not in response.headers
                return pages
            assert response.headers["Link"].startswith(f"<{API}{path}?")
            params = {**params, "cursor": cursor}


@pytest.fixture
def lists(engine) -> Lists:
    return Lists(engine)


def test_pools_come_a_page_at_a_time_by_id_each_with_its_own_job_counts(lists):
    for memory in range(1, 8):
        lists.submit("roland", memory, count=2)
    lists.submit("andre", 1)                                          # another VO's pool
    pages = lists.every_page("roland", "/pools", "SubmitPool")
    assert [len(page) for page in pages] == [3, 3, 1]
    pools = sum(pages, [])
    assert pools == sorted(pools)
    most = lists.get("admin", "/pools", limit=1000)                  # paging.max_page_size: 5
    assert len(most.json()) == 5 and most.headers["X-Next-Cursor"]
    assert len(sum(lists.every_page("admin", "/pools", "SubmitPool"), [])) == 8
    for row in lists.get("roland", "/pools", limit=5).json():
        assert sum(row["Jobs"].values()) == 2 and row["VO"] == "lhcb"


def test_task_queues_come_a_page_at_a_time_and_keep_to_the_callers_vo(lists):
    for memory in range(1, 8):
        lists.submit("roland", memory)
    lists.submit("andre", 1)
    pages = lists.every_page("roland", "/task-queues", "TaskQueue")
    assert [len(page) for page in pages] == [3, 3, 1]
    assert sum(pages, []) == sorted(sum(pages, []))
    assert [row["WaitingJobs"] for row in lists.get("roland", "/task-queues", limit=5).json()] == [1] * 5
    assert len(sum(lists.every_page("andre", "/task-queues", "TaskQueue"), [])) == 1
    assert len(sum(lists.every_page("admin", "/task-queues", "TaskQueue"), [])) == 8


def test_pilots_come_a_page_at_a_time_the_site_directors_then_those_started_by_hand(lists, engine):
    rows = [{"pilot_id": f"sd-{n}", "site": "DIRAC.Local.ch", "ce": "localhost", "queue": "default",
             "backend": "local", "state": "Submitted", "submitted": lists.now - timedelta(minutes=n)}
            for n in range(5)]
    with engine.begin() as conn:
        pilots_db.add_pilots(conn, rows)
    hand = Identity(user="pilot", group="lhcb_pilot", vo="lhcb", role="pilot", pilot_id="hand-1")
    token = create_token(engine, hand, lists.now)
    renewed = lists.client.post(API + "/pilots/token/renew", json={"slots": 2},
                                headers={"Authorization": f"Bearer {token}"})
    assert renewed.status_code == 200, renewed.text
    pages = lists.every_page("admin", "/pilots", "PilotID")
    assert pages == [["sd-0", "sd-1", "sd-2"], ["sd-3", "sd-4", "hand-1"]]
    # A page that ends with the last SiteDirector pilot leads on to those started by hand.
    assert lists.every_page("admin", "/pilots", "PilotID", limit=5) == [[f"sd-{n}" for n in range(5)], ["hand-1"]]


def test_finished_jobs_of_the_accounting_come_newest_first_a_page_at_a_time(lists):
    ids = lists.submit("roland", 1, count=7)
    lists.submit("andre", 1)
    lists.post("roland", "/jobs/kill", {"job_ids": ids}, status=200)
    pages = lists.every_page("roland", "/accounting/jobs", "JobID")
    assert pages == [ids[:3:-1], ids[3:0:-1], ids[:1]]


def reserve(lists: Lists, count: int, users_of: dict[int, list[str]] | None = None) -> list[int]:
    """``count`` reservations of admin's, a day apart; ``users_of``: the access list of some."""
    start = (lists.now + timedelta(days=1)).replace(microsecond=0)
    ids = []
    for n in range(count):
        body = {"start": (start + timedelta(days=n)).isoformat(), "duration": "1:00:00", "name": f"page{n}",
                "users": (users_of or {}).get(n, [])}
        ids.append(lists.post("admin", "/reservations", body)["ar_id"])
    return ids


def test_reservations_and_their_accounting_come_a_page_at_a_time_by_id(lists):
    ids = reserve(lists, 7)
    assert lists.every_page("roland", "/reservations", "ar_id") == [ids[:3], ids[3:6], ids[6:]]
    assert lists.every_page("roland", "/accounting/reservations", "ar_id") == [ids[:3], ids[3:6], ids[6:]]
    named = lists.get("roland", "/reservations", ar=[str(ids[0]), str(ids[6])])     # qrstat -ar: every one named
    assert [row["ar_id"] for row in named.json()] == [ids[0], ids[6]] and "X-Next-Cursor" not in named.headers


def test_a_page_may_hold_fewer_reservations_than_asked_where_the_caller_sees_fewer(engine):
    lists = Lists(engine, reservations="owner")
    ids = reserve(lists, 7, users_of={1: ["roland"], 5: ["roland"]})
    # Three reservations read a page; roland sees those whose access list names him.
    assert lists.every_page("roland", "/reservations", "ar_id") == [[ids[1]], [ids[5]], []]
    assert lists.every_page("admin", "/reservations", "ar_id") == [ids[:3], ids[3:6], ids[6:]]


def test_a_pilots_cursor_of_no_part_of_the_list_is_refused(lists):
    response = lists.get("admin", "/pilots", cursor=encode_cursor("pilots", {}, "x:sd-1"))
    assert response.status_code == 400
    assert response.json()["detail"].startswith("cursor: not a cursor this server gave out")


LISTS = ["/pools", "/task-queues", "/pilots", "/reservations", "/accounting/jobs", "/accounting/reservations"]


@pytest.mark.parametrize("path", LISTS)
def test_a_forged_cursor_is_refused_on_every_list(lists, path):
    response = lists.get("admin", path, cursor="not-a-cursor")
    assert response.status_code == 400
    assert response.json()["detail"].startswith("cursor: not a cursor this server gave out")


@pytest.mark.parametrize("path", LISTS)
def test_a_cursor_of_another_list_is_refused_on_every_list(lists, path):
    lists.submit("admin", 1, count=4)
    jobs_cursor = lists.get("admin", "/jobs").headers["X-Next-Cursor"]
    response = lists.get("admin", path, cursor=jobs_cursor)
    assert response.status_code == 400
    assert response.json()["detail"].startswith("cursor: a cursor of the 'jobs' list, not of ")
