"""The SiteDirector: pilots only where waiting jobs can run, within the
queue's limits, with the queue's pools; two directors at once do not
double-submit (three databases, a recording backend); and the whole loop
with real local pilot processes against a real `wms server`."""

from __future__ import annotations

import shutil
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from billiard.exceptions import SoftTimeLimitExceeded

from agents.site_director import site_director
from tests.helpers import ADMIN, ANDRE, CONFIG_DIR, ROLAND, default_config, log_tails, wait_until
from tests.pilot_backends import wait_jobs_done
from tests.servers import running_server
from wms.config import load_config
from wms.db import pilots as pilots_db
from wms.db.engine import make_engine
from wms.services import jobs as jobs_service
from wms.core.match.context import PilotRequest
from wms.services import matcher, telemetry
from wms.services import pilots as pilots_service
from wms.backends.base import PilotArgs, PilotLauncher
from wms.backends.local import LocalBackend
from wms.services.runtime import Runtime
from wms.services.submission import SubmitOptions, submit_jobs
from wms.services.tokens import Declaration, authenticate, renew_pilot_token
from wms.core.errors import Forbidden, Unauthorized

LOCAL = "DIRAC.Local.ch/localhost/default"
AT_LOCAL = '[ Executable = "/bin/echo"; Arguments = "hi"; CPUTime = 300; Site = "DIRAC.Local.ch"; ]'


class RecordingBackend:
    """Starts nothing; remembers each submission and answers status from ``states``."""

    name = "local"
    emulates_queues = True

    def __init__(self) -> None:
        self.submissions: list[tuple[str, int, PilotArgs]] = []
        self.states: dict[str, str] = {}
        self.killed: list[str] = []
        self.lock = threading.Lock()

    def submit_pilots(self, queue_ref, count, pilot_args):
        with self.lock:
            self.submissions.append((queue_ref.name, count, pilot_args))
        return [f"fake:{pid}" for pid in pilot_args.pilot_ids]

    def status(self, refs):
        return {ref: self.states[ref] for ref in refs if ref in self.states}

    def kill(self, ref):
        self.killed.append(ref)

    def per_queue(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, count, _ in self.submissions:
            out[name] = out.get(name, 0) + count
        return out


@pytest.fixture
def backend() -> RecordingBackend:
    return RecordingBackend()


@pytest.fixture
def launcher(backend) -> PilotLauncher:
    return PilotLauncher(url="http://127.0.0.1:9", backends={"local": backend})


def submit(runtime, now, *texts):
    return submit_jobs(runtime, ROLAND, [(f"j{i}.jdl", t) for i, t in enumerate(texts)], SubmitOptions(), now)


def option(argv, name):
    return argv[list(argv).index(name) + 1]


def recorded(runtime):
    with runtime.engine.connect() as conn:
        return pilots_db.list_pilots(conn)


@pytest.mark.databases
def test_no_waiting_job_no_pilot(runtime, now, launcher, backend):
    report = site_director(runtime, now, launcher=launcher)
    assert report["submitted"] == {} and backend.submissions == [] and recorded(runtime) == []


@pytest.mark.databases
def test_pilots_only_where_jobs_can_run_within_the_queue_limits(runtime, now, launcher, backend):
    submit(runtime, now, *[AT_LOCAL] * 6)          # local queue: MaxWaitingPilots 2, MaxTotalPilots 4, slots 4
    report = site_director(runtime, now, launcher=launcher)
    assert report["submitted"] == {LOCAL: 2} and backend.per_queue() == {LOCAL: 2}
    [(name, count, args)] = backend.submissions
    assert option(args.argv, "--site") == "DIRAC.Local.ch" and option(args.argv, "--queue") == "default"
    assert option(args.argv, "--pools") == ""                   # no Requirements: no pool
    assert option(args.argv, "--platform") == "x86_64-el9"      # the local backend emulates the queue
    assert "--token" not in args.argv and args.token == ""
    # Each pilot its own token, of the jobs' VO, bound to it, short-lived.
    assert set(args.tokens) == set(args.pilot_ids) and len(set(args.tokens.values())) == 2
    for pid, token in args.tokens.items():
        identity = authenticate(runtime.engine, token, now)
        assert (identity.role, identity.vo, identity.pilot_id) == ("pilot", "lhcb", pid)
        with pytest.raises(Unauthorized, match="expired"):
            authenticate(runtime.engine, token, now + timedelta(seconds=runtime.config.settings.pilot_token_lifetime))
    pilots = recorded(runtime)
    assert [(p["state"], p["backend"], p["backend_ref"]) for p in pilots] == [
        ("Submitted", "local", f"fake:{p['pilot_id']}") for p in pilots]
    assert set(args.pilot_ids) == {p["pilot_id"] for p in pilots}

    # Both still waiting: MaxWaitingPilots reached, nothing more.
    assert site_director(runtime, now, launcher=launcher)["submitted"] == {}
    # They start: two more may wait, up to MaxTotalPilots 4.
    backend.states = {p["backend_ref"]: "Running" for p in pilots}
    later = now + timedelta(seconds=60)
    report = site_director(runtime, later, launcher=launcher)
    assert report["pilots_changed"] == {"Running": 2} and report["submitted"] == {LOCAL: 2}
    backend.states.update({f"fake:{pid}": "Running" for pid in backend.submissions[-1][2].pilot_ids})
    assert site_director(runtime, later, launcher=launcher)["submitted"] == {}
    assert len(recorded(runtime)) == 4
    # Two run a job each and end: room for two again, as long as jobs wait.
    for ref in list(backend.states)[:2]:
        assert run_one(runtime, ref.removeprefix("fake:"), later) is not None
        backend.states[ref] = "Done"
    report = site_director(runtime, later, launcher=launcher)
    assert report["pilots_changed"] == {"Done": 2} and report["submitted"] == {LOCAL: 2}


def run_one(runtime, pilot_id, now):
    """The pilot ``pilot_id`` of the local queue takes a job; its id, or None."""
    site, ce, queue = LOCAL.split("/")
    result = matcher.request_job(runtime, PilotRequest(site=site, ce=ce, queue=queue, host="wn1", pilot_id=pilot_id,
                                                       platform="x86_64-el9"), now)
    return None if result.job is None else result.job["JobID"]


@pytest.mark.databases
def test_pilots_that_run_nothing_make_the_director_wait_longer_each_round_until_one_runs_a_job(
        runtime, now, launcher, backend):
    """Jobs the queue's pilots do not take: one round of pilots that ended empty is churn, each further one
    pauses the queue, 1 min, then 2 min, ...; a pilot there that runs a job ends the pauses;
    wms_pilots_ran_nothing counts them."""
    submit(runtime, now, AT_LOCAL)
    base = timedelta(seconds=runtime.config.settings.empty_pilot_backoff)

    def director(at):
        return site_director(runtime, at, launcher=launcher)

    def end_all(state="Done"):
        backend.states.update({f"fake:{p['pilot_id']}": state for p in recorded(runtime)})

    assert director(now)["submitted"] == {LOCAL: 1}
    end_all()                                       # round 1 ends empty: no pause yet
    t1 = now + timedelta(seconds=30)
    assert director(t1)["submitted"] == {LOCAL: 1}
    end_all("Failed")                               # round 2 ends empty: a pause
    t2 = t1 + timedelta(seconds=30)
    report = director(t2)
    assert report["submitted"] == {}
    assert report["queues"][LOCAL]["vo"]["lhcb"]["paused_until"] == (t2 + base).isoformat()
    assert director(t2 + base - timedelta(seconds=1))["submitted"] == {}
    t3 = t2 + base
    assert director(t3)["submitted"] == {LOCAL: 1}  # round 3
    end_all()
    t4 = t3 + timedelta(seconds=10)
    assert director(t4)["queues"][LOCAL]["vo"]["lhcb"]["paused_until"] == (t4 + 2 * base).isoformat()
    assert telemetry.database_counts(runtime.engine).ran_nothing == 3
    # A pilot there runs a job: the pauses end.
    t5 = t4 + 2 * base
    assert director(t5)["submitted"] == {LOCAL: 1}
    [pilot_id] = backend.submissions[-1][2].pilot_ids
    submit(runtime, t5, AT_LOCAL)
    assert run_one(runtime, pilot_id, t5) is not None
    end_all()
    t6 = t5 + timedelta(seconds=5)
    report = director(t6)
    assert report["pilots_changed"] == {"Done": 1} and report["submitted"] == {LOCAL: 1}
    assert telemetry.database_counts(runtime.engine).ran_nothing == 3


@pytest.mark.databases
def test_the_queue_pools_go_to_the_pilots_and_other_queues_get_none(runtime, now, launcher, backend):
    wants_v2 = ('[ Executable = "/bin/true"; CPUTime = 300; Site = {"DIRAC.Local.ch", "LCG.RAL.uk"};'
                ' Requirements = [ SoftwareTag = {"AppVersion2"}; ]; ]')
    [job_id] = submit(runtime, now, wants_v2)
    submit(runtime, now, '[ Executable = "/bin/true"; Site = "LCG.RAL.uk"; Tags = {"GPU"}; ]')   # no queue at all
    report = site_director(runtime, now, launcher=launcher)
    assert backend.per_queue() == {LOCAL: 1}, report                 # RAL has no AppVersion2
    [(_, _, args)] = backend.submissions
    pool = jobs_service.job_status(runtime, ADMIN, [job_id])[0]["SubmitPool"]
    assert pool and option(args.argv, "--pools") == pool


@pytest.mark.databases
def test_two_directors_at_once_do_not_double_submit(runtime, now, launcher, backend):
    submit(runtime, now, *[AT_LOCAL] * 10)
    start = threading.Barrier(4)
    reports, errors = [], []

    def director():
        try:
            mine = Runtime.create(default_config(), runtime.engine)      # as a second process would
            start.wait()
            reports.append(site_director(mine, now, launcher=launcher))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=director) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert sum(r["submitted"].get(LOCAL, 0) for r in reports) == 2     # MaxWaitingPilots, not 4 x 2
    assert backend.per_queue() == {LOCAL: 2} and len(recorded(runtime)) == 2


def capped_config(tmp_path: Path):
    """The default configuration with the local queue's dteam pilots capped at one."""
    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config)
    path = config / "resources.yaml"
    data = yaml.safe_load(path.read_text())
    data["Sites"]["DIRAC.Local.ch"]["CEs"]["localhost"]["Queues"]["default"]["VO"] = {"dteam": {"MaxTotalPilots": 1}}
    path.write_text(yaml.safe_dump(data))
    return load_config(config)


@pytest.mark.databases
def test_pilots_go_per_vo_with_a_token_of_their_vo_and_a_vo_cap_holds(engine, now, launcher, backend, tmp_path):
    runtime = Runtime.create(capped_config(tmp_path), engine)
    submit(runtime, now, *[AT_LOCAL] * 6)
    submit_jobs(runtime, ANDRE, [(f"d{i}.jdl", AT_LOCAL) for i in range(6)], SubmitOptions(), now)
    report = site_director(runtime, now, launcher=launcher)
    # MaxWaitingPilots 2 for the queue: one dteam pilot (its cap is 1), one lhcb.
    assert report["submitted"] == {LOCAL: 2}, report
    assert {vo: seen["new"] for vo, seen in report["queues"][LOCAL]["vo"].items()} == {"dteam": 1, "lhcb": 1}
    by_pilot = {p["pilot_id"]: p["vo"] for p in recorded(runtime)}
    tokens = {pid: token for _, _, args in backend.submissions for pid, token in args.tokens.items()}
    assert set(tokens) == set(by_pilot) and len(set(tokens.values())) == 2
    for pid, token in tokens.items():
        identity = authenticate(runtime.engine, token, now)
        assert (identity.vo, identity.pilot_id, identity.group) == (by_pilot[pid], pid, f"{by_pilot[pid]}_pilot")
        # It holds the queue's slots per pilot (1 here), and cannot declare more.
        assert identity.slots == 1
        with pytest.raises(Forbidden, match=f"pilot {pid} declared 1 slots; it cannot take 2 now"):
            renew_pilot_token(runtime.engine, identity, now, timedelta(hours=1), Declaration(slots=2))

    # They run: room for two more in the queue, none for dteam.
    backend.states = {f"fake:{pid}": "Running" for pid in by_pilot}
    later = now + timedelta(minutes=1)
    report = site_director(runtime, later, launcher=launcher)
    assert report["submitted"] == {LOCAL: 2} and report["queues"][LOCAL]["vo"]["dteam"]["new"] == 0, report
    with runtime.engine.connect() as conn:
        assert pilots_db.count_by_state(conn, "DIRAC.Local.ch", "localhost", "default", vo="dteam") == {
            "Submitted": 0, "Running": 1}

    # The dteam pilot ends: its token is revoked; a waiting pilot's token is kept alive by the director.
    [dteam] = [pid for pid, vo in by_pilot.items() if vo == "dteam"]
    backend.states[f"fake:{dteam}"] = "Done"
    much_later = later + timedelta(seconds=runtime.config.settings.pilot_token_lifetime - 30)
    site_director(runtime, much_later, launcher=launcher)
    with pytest.raises(Unauthorized, match="revoked"):
        authenticate(runtime.engine, tokens[dteam], much_later)
    waiting = [p["pilot_id"] for p in recorded(runtime) if p["state"] == "Submitted"]
    assert waiting
    tokens = {pid: token for _, _, args in backend.submissions for pid, token in args.tokens.items()}
    past_first_end = much_later + timedelta(seconds=60)
    for pid in waiting:
        assert authenticate(runtime.engine, tokens[pid], past_first_end).pilot_id == pid


def test_vo_pilots_fit_both_the_vo_and_the_queue_limits():
    queue = pilots_service.QueueLimits(max_waiting=2, max_total=4, slots=None, slots_per_pilot=1)
    capped = pilots_service.QueueLimits(max_waiting=2, max_total=1, slots=None, slots_per_pilot=1)
    none = {"Submitted": 0, "Running": 0}
    assert pilots_service.pilots_for_vo(queue, capped, 10, none, none) == 1
    assert pilots_service.pilots_for_vo(queue, capped, 10, {"Submitted": 0, "Running": 1},
                                        {"Submitted": 0, "Running": 1}) == 0
    assert pilots_service.pilots_for_vo(queue, queue, 10, {"Submitted": 1, "Running": 3}, none) == 0
    assert pilots_service.pilots_for_vo(queue, queue, 10, {"Submitted": 1, "Running": 0}, none) == 1


def test_queue_limits_follow_dirac_rules():
    limits = pilots_service.QueueLimits(max_waiting=2, max_total=4, slots=4, slots_per_pilot=1)
    assert limits.pilots_to_submit(10, 0, 0) == 2
    assert limits.pilots_to_submit(1, 0, 0) == 1
    assert limits.pilots_to_submit(10, 1, 2) == 1
    assert limits.pilots_to_submit(10, 0, 4) == 0
    wide = pilots_service.QueueLimits(max_waiting=10, max_total=10, slots=6, slots_per_pilot=2)
    assert wide.pilots_to_submit(10, 0, 0) == 3          # 6 slots / 2 per pilot
    assert wide.pilots_to_submit(3, 0, 0) == 2           # ceil(3 / 2)


# ---------------------------------------------------------------- real processes
def test_local_backend_runs_pilots_as_processes_with_the_token_in_the_environment(tmp_path):
    backend = LocalBackend(log_dir=tmp_path / "pilots")
    ref_q = default_config().make_resources(None).queues()[0]
    common = ("--site", "S", "--ce", "C", "--queue", "Q", "--pools", "", "--max-empty", "1", "--poll", "0.1",
              "--retries", "0", "--http-timeout", "1")
    [bad] = backend.submit_pilots(ref_q, 1, PilotArgs(url="http://127.0.0.1:9", token="", pilot_ids=("nok",),
                                                      argv=common))
    [good] = backend.submit_pilots(ref_q, 1, PilotArgs(url="http://127.0.0.1:9", token="wms_secret",
                                                       pilot_ids=("ok",), argv=common))
    pid = int(good.split(":")[1])
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        assert b"wms_secret" not in cmdline
    except FileNotFoundError:
        pass
    wait_until(lambda: "Running" not in backend.status([bad, good]).values(), timeout=60,
               what="both pilots ended", details=lambda: log_tails((tmp_path / "pilots").glob("*.log")))
    assert backend.status([bad, good]) == {bad: "Failed", good: "Done"}
    # Another process on this host (no Popen handle) reads the exit status file.
    LocalBackend._children.clear()
    assert LocalBackend(log_dir=tmp_path / "pilots").status([bad, good]) == {bad: "Failed", good: "Done"}
    assert "no token" in (tmp_path / "pilots" / "nok.log").read_text()
    assert backend.status(["elsewhere:1:x"]) == {}


def test_end_to_end_local_pilots_run_the_jobs(tmp_path):
    with running_server(tmp_path) as server:
        roland = server.token("roland", "lhcb_user", "lhcb", "user")
        admin = server.token("admin", "lhcb_prod", "lhcb", "manager")
        jdl = tmp_path / "local.jdl"
        jdl.write_text('[ Executable = "/bin/sh"; Arguments = "-c \'echo ran on $HOSTNAME\'"; CPUTime = 300;'
                       ' Site = "DIRAC.Local.ch"; Parameters = 3; JobName = "e2e_%n"; ]')
        ids = [int(i) for i in server.json("submit", str(jdl), token=roland)["job_ids"]]
        assert len(ids) == 3

        runtime = Runtime.create(load_config(server.config), make_engine(server.env["WMS_DATABASE_URL"]))
        from datetime import datetime, timezone
        now = datetime.now(timezone.utc)
        launcher = pilots_service.make_launcher(
            runtime, url=server.url, log_dir=tmp_path / "pilots",
            pilot_options=("--max-empty", "2", "--poll", "0.3", "--heartbeat", "1"))
        report = site_director(runtime, now, launcher=launcher)
        assert report["submitted"] == {LOCAL: 2}, report                # MaxWaitingPilots of the local queue
        assert report["errors"] == {}

        rows = wait_jobs_done(server, ids, roland)
        assert [r["Status"] for r in rows] == ["Done"] * 3, rows
        assert {r["Queue"] for r in rows} == {LOCAL}

        # The pilots run out of work and end; the next cycle records it.
        def ended() -> bool:
            site_director(runtime, datetime.now(timezone.utc), launcher=launcher)
            return all(p["State"] in ("Done", "Failed") for p in pilots_service.list_pilots(runtime))

        wait_until(ended, timeout=120, what="the pilots ended", every=0.3,
                   details=lambda: log_tails((tmp_path / "pilots").glob("*.log")))
        with server.api(admin) as api:
            shown = api.get("/pilots").json()
        with server.api(roland) as api:
            assert api.get("/pilots").status_code == 403
        assert [p["State"] for p in shown] == ["Done", "Done"], shown
        assert sum(p["JobsRun"] for p in shown) == 3
        assert {p["Queue"] for p in shown} == {LOCAL} and {p["Backend"] for p in shown} == {"local"}
        assert set(shown[0]) >= {"PilotID", "Queue", "Backend", "State", "JobsRun", "Submitted", "LastUpdate"}
        for p in shown:
            assert (tmp_path / "pilots" / f"{p['PilotID']}.log").exists()
        runtime.engine.dispose()


@pytest.mark.databases
def test_the_registry_form_takes_runtime_and_now(runtime, now, launcher, backend):
    from agents.site_director import agent
    submit(runtime, now, AT_LOCAL)
    assert agent(launcher)(runtime, now)["submitted"] == {LOCAL: 1}


class OutOfTimeBackend(RecordingBackend):
    """Celery's soft time limit strikes during the first submission."""

    def submit_pilots(self, queue_ref, count, pilot_args):
        super().submit_pilots(queue_ref, count, pilot_args)
        raise SoftTimeLimitExceeded()


@pytest.mark.databases
def test_a_soft_time_limit_ends_the_run_instead_of_going_on_to_the_next_queue(runtime, now):
    """Under Celery the run's time is up: going on to the next queues would
    be killed by the hard limit midway, leaving pilots recorded without a
    backend reference (counted for ten minutes) that may run all the same."""
    backend = OutOfTimeBackend()
    launcher = PilotLauncher(url="http://127.0.0.1:9", backends={"local": backend})
    submit(runtime, now, *['[ Executable = "/bin/true"; CPUTime = 300; ]'] * 4)     # eligible on several queues
    assert len(pilots_service.waiting_jobs_per_queue(runtime)) > 1
    with pytest.raises(SoftTimeLimitExceeded):
        site_director(runtime, now, launcher=launcher)
    [(queue, count, _)] = backend.submissions
    pilots = recorded(runtime)
    assert [p["state"] for p in pilots] == ["Aborted"] * count, pilots
    assert {f"{p['site']}/{p['ce']}/{p['queue']}" for p in pilots} == {queue}


@pytest.mark.databases
def test_no_pilot_for_a_request_no_level_could_ever_offer(runtime, now, launcher, backend):
    # 50 compiler licences where the whole cluster has 20: the static phase says never.
    submit_jobs(runtime, ROLAND, [("lic.jdl", AT_LOCAL)], SubmitOptions(resource_requests={"compiler_lic": "50"}), now)
    assert pilots_service.waiting_jobs_per_queue(runtime, now=now)[LOCAL]["waiting"] == 0
    assert site_director(runtime, now, launcher=launcher)["submitted"] == {} and backend.submissions == []


@pytest.mark.databases
def test_no_pilot_for_a_reservation_before_it_starts_nor_in_queues_it_does_not_hold(engine, tmp_path, launcher,
                                                                                   backend):
    from tests.reservations_config import OTHERQ, USER1, reservation_config
    from wms.services import reservations as ar

    runtime = Runtime.create(reservation_config(tmp_path / "config"), engine)
    t0, hour = datetime(2030, 12, 14, 10, 0, tzinfo=timezone.utc), timedelta(hours=1)
    ar_id = ar.submit(runtime, USER1, ar.ReservationSpec(start=t0 + hour, duration="1:0:0", queues=["other.q"],
                                                         users=["user1"]), t0)["ar_id"]
    limited = '[ Executable = "/bin/true"; CPUTime = 300; ResourceRequests = [ h_rt = "0:30:0" ]; ]'
    submit_jobs(runtime, USER1, [("ar.jdl", limited)], SubmitOptions(reservation=ar_id), t0)
    # Before the start: the job waits for its reservation, no pilot would get it.
    assert site_director(runtime, t0, launcher=launcher)["submitted"] == {} and backend.submissions == []
    assert ar.manage(runtime, t0 + hour)["started"] == [ar_id]
    # Running: pilots go to the one queue it holds, and to no other.
    assert site_director(runtime, t0 + hour, launcher=launcher)["submitted"] == {OTHERQ: 1}


@pytest.mark.databases
def test_wms_pilots_shows_a_started_pilot_and_its_jobs_before_the_next_director_run(runtime, now, launcher,
                                                                                   backend):
    from wms.core.match.context import PilotRequest
    from wms.services import matcher
    from wms.services.tokens import renew_pilot_token

    [job_id] = submit(runtime, now, AT_LOCAL)
    site_director(runtime, now, launcher=launcher)
    [(_, _, args)] = backend.submissions
    [pilot_id] = args.pilot_ids
    assert [(p["PilotID"], p["State"], p["JobsRun"]) for p in pilots_service.list_pilots(runtime)] == [
        (pilot_id, "Submitted", 0)]
    # The pilot starts (its first call renews its token) and takes the job; no director run in between.
    identity = authenticate(runtime.engine, args.tokens[pilot_id], now)
    renew_pilot_token(runtime.engine, identity, now, timedelta(hours=1))
    request = PilotRequest(site="DIRAC.Local.ch", ce="localhost", queue="default", host="wn1", pilot_id=pilot_id,
                           pools=(), platform="x86_64-el9", cpu_time_left=100000, vo="lhcb")
    assert matcher.request_job(runtime, request, now).job["JobID"] == job_id
    assert [(p["State"], p["JobsRun"]) for p in pilots_service.list_pilots(runtime)] == [("Running", 1)]
