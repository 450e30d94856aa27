"""GET /metrics scraped from a real `wms server --workers 2` while a real
pilot matches jobs (docs/metrics.md).

Two worker processes share the port, so successive scrapes land on either:
every one must give the same totals (prometheus-client's multiprocess mode
sums the workers' counts), and they must move by exactly what the pilot did.
"""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace

import httpx
import pytest

from tests.api.pilots import start_pilot
from tests.api.scraping import Scrape, scrape
from tests.helpers import patience, wait_until
from tests.pilot.conftest import LOCAL, USERS, jdl, pilot_config, submit
from tests.servers import ServerHandle, Tokens, edited_config, free_port, running_server
from wms.config.models import BackpressureSettings, DatabasePoolSettings
from wms.api.metrics import exposition
from wms.core.match.framework import LAYERS
from wms.db import pilots as pilots_db
from wms.db.engine import make_engine

REQUEST_JOB = "/api/v1/matcher/request-job"
# Each process's threads for requests other than the pilots' job requests, by default.
DEFAULT_REQUEST_THREADS = DatabasePoolSettings().size - BackpressureSettings().match_threads


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> ServerHandle:
    tmp = tmp_path_factory.mktemp("metrics-server")
    with running_server(tmp, pilot_config(tmp), tokens=USERS, server_args=("--workers", "2")) as handle:
        # Ready when one worker answers; wait for the second (each counts
        # itself in when built, and its request threads when it serves).
        wait_until(lambda: (scrape(handle.url).value("wms_server_processes"),
                            scrape(handle.url).value("wms_request_threads"))
                   == (2, 2 * DEFAULT_REQUEST_THREADS), timeout=60, what="both workers serving")
        yield handle


@pytest.fixture(scope="module")
def server_tokens(server) -> Tokens:
    return Tokens(server)


def scrapes(url: str, count: int = 6) -> list[Scrape]:
    """Several scrapes, each on a new connection: the kernel spreads them over the workers."""
    return [scrape(url) for _ in range(count)]


def same_everywhere(found: list[Scrape], name: str, **labels: str) -> float:
    """The value of a series, which every scrape must agree on (whichever worker answered)."""
    values = {s.value(name, **labels) for s in found}
    assert len(values) == 1, f"{name}{labels}: the workers disagree: {sorted(values)}"
    return values.pop()


def test_each_process_runs_as_many_requests_at_once_as_configured(tmp_path):
    config = edited_config(tmp_path / "edited", {"  # request_threads: 8 ": "  request_threads: 3 ",
                                                 "  match_threads: 2 ": "  match_threads: 1 "})
    with running_server(tmp_path, config, server_args=("--workers", "2")) as handle:
        # Ready when one worker answers; each sets its count when it starts serving.
        wait_until(lambda: scrape(handle.url).value("wms_request_threads") == 2 * 3, timeout=60,
                   what="both workers serving")
        found = scrapes(handle.url)
        assert same_everywhere(found, "wms_request_threads") == 2 * 3
        assert same_everywhere(found, "wms_match_threads") == 2 * 1


def test_the_numbers_move_as_a_pilot_matches_jobs(server, server_tokens, tmp_path):
    tokens = server_tokens
    before = scrapes(server.url)
    matched_before = same_everywhere(before, "wms_match_requests_total", outcome="matched")
    no_match_before = same_everywhere(before, "wms_match_requests_total", outcome="no_match")
    assert same_everywhere(before, "wms_metrics_database_up") == 1
    assert same_everywhere(before, "wms_server_processes") == 2
    assert same_everywhere(before, "wms_db_pool_connections_limit") > 0
    # Each process runs as many requests at once as its pool keeps connections.
    assert same_everywhere(before, "wms_request_threads") == 2 * DEFAULT_REQUEST_THREADS
    assert same_everywhere(before, "wms_match_threads") == 2 * BackpressureSettings().match_threads

    # Three jobs the local queue runs, one it never can (more licences than it has).
    runnable = submit(server, tokens, tmp_path, *[jdl("true")] * 3)
    [unrunnable] = submit(server, tokens, tmp_path, jdl("true", "ResourceRequests = [ compiler_lic = 5; ];"))
    waiting = scrapes(server.url)
    assert same_everywhere(waiting, "wms_waiting_jobs", vo="lhcb") == 4

    # A pilot the SiteDirector would have recorded, as it records one.
    with make_engine(server.env["WMS_DATABASE_URL"]).begin() as conn:
        pilots_db.add_pilots(conn, [{"pilot_id": "director-1", "site": LOCAL[0], "ce": LOCAL[1], "queue": LOCAL[2],
                                     "backend": "local", "state": pilots_db.RUNNING,
                                     "submitted": datetime.now(timezone.utc), "vo": "lhcb"}])

    pilot, log = start_pilot(server, tokens["metrics-1"], tmp_path, "metrics-1", max_empty=1)
    assert pilot.wait(timeout=patience(120)) == 0, log.read_text()[-3000:]
    with server.api(tokens["roland"]) as api:
        states = {j: api.get(f"/jobs/{j}").raise_for_status().json()["Status"] for j in [*runnable, unrunnable]}
    assert states == {**dict.fromkeys(runnable, "Done"), unrunnable: "Waiting"}

    after = scrapes(server.url)
    assert same_everywhere(after, "wms_match_requests_total", outcome="matched") == matched_before + 3
    # The pilot's last request found nothing it may run: a no-match, with the
    # layer that decided it (the unrunnable job is kept away by a layer).
    assert same_everywhere(after, "wms_match_requests_total", outcome="no_match") >= no_match_before + 1
    layers = after[0].labels("wms_match_requests_total", "layer", outcome="no_match")
    assert layers and layers <= {layer.name for layer in LAYERS} | {"no_waiting_job", "taken"}, layers
    assert same_everywhere(after, "wms_waiting_jobs", vo="lhcb") == 1
    assert same_everywhere(after, "wms_pilots", state="Running") == 1
    assert same_everywhere(after, "wms_pilots", state="Done") == 0

    # Requests by route template (never the raw path), their latency counted alike.
    asked = same_everywhere(after, "wms_http_requests_total", route=REQUEST_JOB, status="200")
    assert asked - same_everywhere(before, "wms_http_requests_total", route=REQUEST_JOB, status="200") >= 4
    assert same_everywhere(after, "wms_http_request_duration_seconds_count", route=REQUEST_JOB) == \
        same_everywhere(after, "wms_http_requests_total", route=REQUEST_JOB)
    # The reports of the three jobs (Running, Done), several in a call when the slots report at once.
    reports = "/api/v1/jobs/pilot-status"
    assert same_everywhere(after, "wms_http_requests_total", route=reports, status="200") >= 2
    routes = after[0].labels("wms_http_requests_total", "route")
    assert not any(part.isdigit() for route in routes for part in route.split("/")), routes


def test_a_path_no_route_knows_is_counted_as_unmatched(server):
    for n in range(3):
        assert httpx.get(f"{server.url}/nowhere/{n}", timeout=30).status_code == 404
    found = scrapes(server.url, 1)[0]
    assert found.value("wms_http_requests_total", route="unmatched", status="404") >= 3
    assert not any(r.startswith("/nowhere") for r in found.labels("wms_http_requests_total", "route"))


def test_metrics_need_no_token_and_are_prometheus_text(server):
    found = scrape(server.url)
    for name in ("wms_http_requests_total", "wms_http_request_duration_seconds_bucket",
                 "wms_db_pool_connections_in_use", "wms_pilots", "wms_metrics_database_up"):
        assert name in found.names(), name


def test_a_database_that_does_not_answer_leaves_the_rest_of_the_scrape():
    nobody = make_engine(f"postgresql://wms@127.0.0.1:{free_port()}/none")     # a port nobody listens on
    try:
        found = Scrape(exposition(SimpleNamespace(engine=nobody)).decode())    # what the collector reads
    finally:
        nobody.dispose()
    assert found.value("wms_metrics_database_up") == 0
    assert "wms_waiting_jobs" not in found.names() and "wms_pilots" not in found.names()
    assert {"wms_server_processes", "wms_db_pool_connections_in_use"} <= found.names()   # the process's own


def test_one_process_serves_its_own_registry(client, as_user):
    """Without workers (`wms server`, `wms up`): the process's registry, with the
    process collector beside ours, and the requests it just answered counted."""
    assert as_user("roland").get("/jobs").status_code == 200
    answer = client.get("/metrics")
    assert answer.status_code == 200
    found = Scrape(answer.text)
    assert found.value("wms_http_requests_total", route="/api/v1/jobs", status="200") >= 1
    assert found.value("wms_metrics_database_up") == 1
    assert "process_cpu_seconds_total" in found.names()
