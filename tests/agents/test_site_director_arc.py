"""The SiteDirector with the arc backend when the CE does not take its
pilots: a CE that does not answer, and one that refuses the SiteDirector's
certificate (the session's own A-REX). Each failed submission is in the
cycle's report; its pilots are recorded Aborted, shown so in `wms pilots`
and counted by the metrics; after the second such round the director
backs off that queue and VO (wms.core.pilot_backoff), as for every backend."""

from __future__ import annotations

import shutil
from datetime import timedelta

from agents.site_director import site_director
from tests.e2e.backend_queues import ARC_QUEUE, ARC_SITE, resources
from tests.helpers import CONFIG_DIR, ROLAND
from tests.servers import free_port
from wms.config import load_config
from wms.services import pilots as pilots_service
from wms.services import telemetry
from wms.services.runtime import Runtime
from wms.services.submission import SubmitOptions, submit_jobs

AT_ARC = f'[ Executable = "/bin/echo"; Arguments = "hi"; CPUTime = 300; Site = "{ARC_SITE}"; ]'


class SiteCE:
    """What resources.yaml needs of a CE (tests/arc.py's attributes), with another endpoint or certificate."""

    def __init__(self, ce, endpoint=None, cert=None, key=None):
        self.endpoint = endpoint or ce.endpoint
        self.user_cert, self.user_key = cert or ce.user_cert, key or ce.user_key
        self.ca_file = ce.ca_file


def arc_runtime(engine, tmp_path, ce) -> Runtime:
    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config)
    (config / "resources.yaml").write_text(resources(arc_ce=ce))
    return Runtime.create(load_config(config), engine)


def backs_off(runtime, tmp_path, now, refusal: str) -> None:
    submit_jobs(runtime, ROLAND, [("arc.jdl", AT_ARC)], SubmitOptions(), now)
    launcher = pilots_service.make_launcher(runtime, url="http://127.0.0.1:9", log_dir=tmp_path / "pilots")
    for round_ in range(2):
        report = site_director(runtime, now + timedelta(seconds=30 * round_), launcher=launcher)
        assert report["submitted"] == {} and refusal in report["errors"][ARC_QUEUE], report
    shown = pilots_service.list_pilots(runtime)
    assert [(p["Queue"], p["Backend"], p["State"], p["BackendRef"]) for p in shown] == [
        (ARC_QUEUE, "arc", "Aborted", "")] * 2, shown
    counts = telemetry.database_counts(runtime.engine)
    assert counts.pilots["Aborted"] == 2 and counts.ran_nothing == 2
    # Two rounds of pilots that never ran: the queue waits before the next.
    later = now + timedelta(seconds=60)
    report = site_director(runtime, later, launcher=launcher)
    base = timedelta(seconds=runtime.config.settings.empty_pilot_backoff)
    assert report["errors"] == {} and report["queues"][ARC_QUEUE]["vo"]["lhcb"]["paused_until"] == (
        now + timedelta(seconds=30) + base).isoformat(), report
    assert len(pilots_service.list_pilots(runtime)) == 2


def test_a_ce_that_does_not_answer_is_backed_off(arc_ce, engine, tmp_path, now):
    down = SiteCE(arc_ce, endpoint=f"https://localhost:{free_port()}/arex")
    backs_off(arc_runtime(engine, tmp_path, down), tmp_path, now, "ConnectError")


def test_a_ce_that_refuses_the_director_is_backed_off(arc_ce, engine, tmp_path, now):
    arc_ce.user_certificate("WMS Unmapped", tmp_path)
    refused = SiteCE(arc_ce, cert=tmp_path / "client-WMS-Unmapped-cert.pem",
                     key=tmp_path / "client-WMS-Unmapped-key.pem")
    backs_off(arc_runtime(engine, tmp_path, refused), tmp_path, now, "HTTP 40")


def test_a_queue_without_a_credential_is_reported_and_started_nowhere(arc_ce, engine, tmp_path, now):
    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config)
    text = "\n".join(line for line in resources(arc_ce=arc_ce).splitlines()
                     if not line.strip().startswith(("ARCCertificate:", "ARCKey:"))) + "\n"
    (config / "resources.yaml").write_text(text)
    runtime = Runtime.create(load_config(config), engine)
    submit_jobs(runtime, ROLAND, [("arc.jdl", AT_ARC)], SubmitOptions(), now)
    launcher = pilots_service.make_launcher(runtime, url="http://127.0.0.1:9", log_dir=tmp_path / "pilots")
    report = site_director(runtime, now, launcher=launcher)
    assert "Backend arc needs a credential" in report["errors"][ARC_QUEUE], report
    assert [p["State"] for p in pilots_service.list_pilots(runtime)] == ["Aborted"]


def test_the_director_finds_every_vo_s_credential_in_the_configuration(arc_ce, engine, tmp_path):
    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config)
    text = resources(arc_ce=arc_ce).replace(
        "        Queues:\n", "        VO: {lhcb: {ARCCertificate: /etc/wms/lhcb-cert.pem, ARCKey: /etc/wms/lhcb-key.pem}}\n"
        "        Queues:\n", 1)
    (config / "resources.yaml").write_text(text)
    runtime = Runtime.create(load_config(config), engine)
    found = pilots_service.configured_options(runtime, "arc")
    assert {(o["ARCCertificate"], o["ARCKey"]) for o in found} == {
        (str(arc_ce.user_cert), str(arc_ce.user_key)), ("/etc/wms/lhcb-cert.pem", "/etc/wms/lhcb-key.pem")}, found
    assert {o["ARCEndpoint"] for o in found} == {arc_ce.endpoint}
