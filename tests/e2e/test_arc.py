"""ARC pilots end to end: one `wms up` process (API, Matcher, agents; the
SiteDirector with the arc backend) on SQLite, and the session's own A-REX
on loopback (tests/arc.py) as the site's ARC CE.

The SiteDirector submits pilots to the CE through its REST interface; the
CE runs them (fork LRMS) as the account it maps the SiteDirector's
certificate to, and they reach the server and run the jobs, which see
that account. Every job ends Done and gives back its slot, the pilots end
Done as the CE reports them, and `wms pilots` shows them with their
output fetched from the CE.
"""

from __future__ import annotations

import pwd
import time

from tests.e2e.backend_queues import (
    ARC_QUEUE,
    ARC_SITE,
    check_consumables_returned,
    logs_on_failure,
    pilots_ended,
    resources,
    site_jobs,
)
from tests.e2e.processes import EmbeddedHandle
from tests.e2e.scenario import MANAGER, USER, environment, wait_until, write_config
from tests.servers import free_port
from wms.backends.arc_jobs import ArcRef

JOBS = 6
DEADLINE = 240


def test_arc_pilots_run_the_jobs_of_their_queue(arc_ce, tmp_path):
    started = time.monotonic()
    url = f"http://127.0.0.1:{free_port()}"
    database_url = f"sqlite:///{tmp_path / 'wms.db'}"
    config = write_config(tmp_path, database_url=database_url, bind=url.removeprefix("http://"))
    (config / "resources.yaml").write_text(resources(arc_ce=arc_ce))
    server = EmbeddedHandle(tmp_path, config, url, environment(tmp_path, config, url))
    logs = [server.log, arc_ce.dir / "log" / "arex.log", tmp_path / "var" / "pilots"]
    try:
        with logs_on_failure(logs):
            server.start()
            tokens = server.tokens({"user": USER, "manager": MANAGER})
            user, manager = tokens["user"], tokens["manager"]
            get = server.getter(user)
            (tmp_path / "arc.jdl").write_text(site_jobs(ARC_SITE, "arc", JOBS, "echo arc job as uid $(id -u)"))
            ids = [int(i) for i in server.json("submit", str(tmp_path / "arc.jdl"), token=user)["job_ids"]]

            def all_done():
                rows = {r["JobID"]: r for r in get("/jobs")}
                bad = {i: (r["Status"], r["MinorStatus"]) for i, r in rows.items() if r["Status"] in ("Failed", "Killed")}
                assert not bad, f"jobs ended badly: {bad}"
                return rows if all(r["Status"] == "Done" for r in rows.values()) else None

            rows = wait_until(f"all {JOBS} jobs Done", all_done, DEADLINE, logs)
            assert sorted(rows) == ids and {r["Queue"] for r in rows.values()} == {ARC_QUEUE}
            nobody = pwd.getpwnam("nobody").pw_uid
            for job_id in ids[:2]:
                printed = server.json("output", str(job_id), token=user)["stdout"]
                assert printed == f"arc job as uid {nobody}\n", printed
            check_consumables_returned(database_url)

            # -- the pilots' ends as the CE saw them, and their output back from it
            shown = wait_until("every pilot ended", pilots_ended(lambda: get("/pilots", manager)), DEADLINE, logs)
            assert {(p["Queue"], p["Backend"], p["State"]) for p in shown} == {(ARC_QUEUE, "arc", "Done")}, shown
            assert sum(p["JobsRun"] for p in shown) == JOBS, shown
            for pilot in shown:
                ref = ArcRef.parse(pilot["BackendRef"])
                assert ref is not None and ref.endpoint == arc_ce.endpoint and ref.pilot_id == pilot["PilotID"]
                output = server.ok("pilots", "--output", pilot["PilotID"], token=manager)
                assert f"pilot {pilot['PilotID']} starting against {url}" in output, output
            table = server.ok("pilots", token=manager)
            assert all(p["PilotID"] in table for p in shown) and "arc" in table and "Done" in table, table
            print(f"arc under wms up: {time.monotonic() - started:.0f} s, {len(shown)} pilots")
    finally:
        server.stop()
