"""The optimizer chain on the default configuration, without a database.

RFC #7 (specs/002) is the acceptance: requirements hashed into a pool,
eligible queues and sites, the job's SubmitPool; JobSanity, JobScheduling
and TaskQueue as docs/architecture.md describes them.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from tests.helpers import ANDRE, ROLAND, default_config
from wms.core.errors import ConfigError, JDLError
from wms.core.jdl import parse_jdl
from wms.core.optimizers import Job, build_chain
from wms.services.runtime import Runtime

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)


def runtime() -> Runtime:
    config = default_config()
    return Runtime(config=config, engine=None, chain=build_chain(list(config.settings.optimizers)))


def test_grid_engine_requests_are_accepted_by_name_or_shortcut():
    job = run('[ Executable = "x"; ResourceRequests = [ h_rt = "1:00:00"; mf = "2G"; cl = 1; arch = "lx*-amd64|sol*" ]; ]')
    assert job.task_queue.hard_requests == {
        "arch": "lx*-amd64|sol*", "compiler_lic": 1, "h_rt": 3600, "mem_free": 2 * 1024**3}
    same = run('[ Executable = "y"; ResourceRequests = [ mem_free = "2048M"; h_rt = 3600; compiler_lic = 1; '
               'a = "lx*-amd64|sol*" ]; ]')
    assert same.task_queue.key == job.task_queue.key


def run(text: str, identity=ROLAND, env=None) -> Job:
    rt = runtime()
    env = env or rt.chain_env(NOW)
    [description] = parse_jdl(text, "test.jdl")
    job = Job(description=description, source="test.jdl", identity=identity)
    for executor in rt.chain:
        executor.process(job, env)
    return job


def queue_names(job: Job) -> list[str]:
    return [q.name for q in job.queues]


# ---------------------------------------------------------------- JobRequirements
def test_rfc7_example_requirements_give_a_pool_and_its_queues():
    job = run('[ Executable = "my_executable"; Requirements = [ SoftwareTag = { "AppVersion1","AppVersion2" }; '
              'CPUModel = "Intel Xeon"; Memory = 4000; ]; ]')
    assert job.pool is not None
    assert job.updates["SubmitPool"] == job.pool.pool_id
    # CPUModel and Memory are not described for CERN/ce01/long (examples.md J2):
    assert "LCG.CERN.ch/ce01.cern.ch/long" not in [q.name for q in job.pool.queues]
    assert "DIRAC.Local.ch/localhost/default" in queue_names(job)
    # The eligible sites are written into the job's Site.
    assert job.updates["Site"] == sorted({q.site for q in job.queues})


def test_same_requirements_in_any_order_spacing_or_key_case_share_a_pool():
    a = run('[ Executable = "x"; Requirements = [ SoftwareTag = {"AppVersion1","AppVersion2"}; Memory = 4000; ]; ]')
    b = run('[Executable="x";Requirements=[memory=4000.0;softwaretag={ "AppVersion2" , "AppVersion1" };];]')
    assert a.pool.pool_id == b.pool.pool_id


def test_a_changed_value_gives_another_pool():
    a = run('[ Executable = "x"; Requirements = [ Memory = 4000; ]; ]')
    b = run('[ Executable = "x"; Requirements = [ Memory = 4001; ]; ]')
    assert a.pool.pool_id != b.pool.pool_id


def test_the_vo_is_part_of_the_pool():
    text = '[ Executable = "x"; Requirements = [ SoftwareTag = "AppVersion1"; ]; ]'
    assert run(text, ROLAND).pool.pool_id != run(text, ANDRE).pool.pool_id


def test_one_eligibility_computation_per_pool_in_a_batch():
    rt = runtime()
    env = rt.chain_env(NOW)
    first = run('[ Executable = "x"; Requirements = [ Memory = 4000; ]; ]', env=env)
    second = run('[ Executable = "y"; Requirements = [ Memory = 4000; ]; ]', env=env)
    assert first.pool is second.pool
    assert list(env.pools) == [first.pool.pool_id]


def test_a_job_without_requirements_has_no_pool_and_every_queue():
    job = run('[ Executable = "x"; CPUTime = 300; ]')
    assert job.pool is None
    assert "SubmitPool" not in job.updates
    assert len(job.queues) == len(default_config().make_resources("lhcb").queues())


def test_a_classad_expression_gets_a_pool_of_the_queues_it_does_not_exclude():
    job = run('[ Executable = "x"; Requirements = other.CPUTime >= 100000 && other.Memory >= 8000; ]')
    assert job.pool is not None
    names = [q.name for q in job.pool.queues]
    assert "LCG.IN2P3.fr/cccondorce01.in2p3.fr/mc" in names       # 172800 s, 16000 MB
    assert "LCG.CERN.ch/ce01.cern.ch/short" not in names           # 3600 s


def test_an_expression_reads_the_jobs_own_attributes():
    """Spec 004 matchmaking: the job's ad is MY, the queue's TARGET; an unscoped name is the job's first."""
    for requirements in ("other.Memory >= MinMem && other.Memory < 3000", "other.Memory >= my.MinMem && Memory < 3000"):
        job = run(f'[ Executable = "x"; CPUTime = 3000; MinMem = 2000; Requirements = {requirements}; ]')
        # CERN's long queue describes no Memory: Undefined there, decided by its pilots.
        assert queue_names(job) == ["LCG.CERN.ch/ce01.cern.ch/long", "LCG.CERN.ch/ce01.cern.ch/short",
                                    "LCG.IN2P3.fr/cccondorce01.in2p3.fr/short"], requirements


def test_the_jobs_attributes_an_expression_reads_are_part_of_its_pool_and_task_queue():
    expression = "other.Memory >= MinMem"
    small = run(f'[ Executable = "x"; MinMem = 2000; Requirements = {expression}; ]')
    big = run(f'[ Executable = "x"; MinMem = 9000; Requirements = {expression}; ]')
    assert small.pool.pool_id != big.pool.pool_id
    assert small.task_queue.key != big.task_queue.key
    assert big.task_queue.requirements_ad == "[ MinMem = 9000 ]"
    # What the expression does not read does not split the pool.
    other = run(f'[ Executable = "y"; Arguments = "-v"; MinMem = 2000; Requirements = {expression}; ]')
    assert (other.pool.pool_id, other.task_queue.key) == (small.pool.pool_id, small.task_queue.key)
    # An expression that reads nothing of the job keeps the pool it always had.
    plain = run('[ Executable = "x"; Requirements = other.Memory >= 2000; ]')
    assert "my" not in plain.pool.requirements and "requirements_ad" not in plain.task_queue.document()


def test_bad_requirement_value_is_refused_with_the_parameter():
    with pytest.raises(JDLError, match=r"test.jdl: .*Requirements.Memory.*number"):
        run('[ Executable = "x"; Requirements = [ Memory = "lots"; ]; ]')


# ---------------------------------------------------------------- JobSanity
def test_owner_and_group_come_from_the_token():
    job = run('[ Executable = "x"; Owner = "somebody_else"; ]')
    assert (job.owner, job.owner_group, job.vo) == ("roland", "lhcb_user", "lhcb")
    assert job.updates["Owner"] == "roland"


@pytest.mark.parametrize(
    "jdl, message",
    [
        ('[ Executable = "x"; OwnerGroup = "lhcb_prod"; ]', "OwnerGroup: 'lhcb_prod' is not your group"),
        ('[ Executable = "x"; CPUTime = 50; ]', "CPUTime: 50 is outside the allowed range 100..500000"),
        ('[ Executable = "x"; CPUTime = 600000; ]', "CPUTime: 600000 is outside"),
        ('[ Executable = "x"; Site = "LCG.Nowhere.xx"; ]', "Site: unknown site 'LCG.Nowhere.xx'"),
        ('[ Executable = "x"; BannedSite = "LCG.Nowhere.xx"; ]', "BannedSite: unknown site"),
        ('[ Executable = "x"; Site = {"LCG.RAL.uk"}; BannedSite = {"LCG.RAL.uk"}; ]',
         "Site and BannedSite exclude each other"),
        ('[ Executable = "x"; ParallelEnvironment = "openmp"; ]', "unknown parallel environment 'openmp'"),
        ('[ Executable = "x"; Project = "p9"; ]', "Project: unknown project 'p9'"),
        ('[ Executable = "x"; ResourceRequests = [ flux = 1; ]; ]', "ResourceRequests.flux: unknown resource 'flux'"),
        ('[ Executable = "x"; ResourceRequests = [ h_vmem = "lots"; ]; ]', 'attribute "h_vmem" is not a memory value'),
        ('[ Executable = "x"; ResourceRequests = [ load_avg = 1; ]; ]', "ResourceRequests.load_avg"),
        ('[ Executable = "x"; SoftResourceRequests = [ arch = "lx|"; ]; ]', "SoftResourceRequests.arch"),
    ],
)
def test_job_sanity_refusals(jdl, message):
    with pytest.raises(JDLError) as err:
        run(jdl)
    assert message in str(err.value)
    assert str(err.value).startswith("test.jdl: ")


def test_default_cpu_time_is_applied():
    assert run('[ Executable = "x"; ]').cpu_time == 86400


def test_banned_sites_are_removed_from_the_requested_ones():
    job = run('[ Executable = "x"; Site = {"LCG.CERN.ch", "LCG.RAL.uk"}; BannedSites = {"LCG.RAL.uk"}; ]')
    assert job.sites == ["LCG.CERN.ch"]
    assert {q.site for q in job.queues} == {"LCG.CERN.ch"}


# ---------------------------------------------------------------- JobScheduling
def test_platform_and_tags_narrow_the_queues():
    job = run('[ Executable = "x"; Platform = "aarch64-el9"; ]')
    assert queue_names(job) == ["LCG.CERN.ch/ce02.cern.ch/arm"]
    job = run('[ Executable = "x"; Tags = {"GPU"}; ]')
    assert set(queue_names(job)) == {"LCG.CERN.ch/gpu01.cern.ch/gpu", "DIRAC.Local.ch/localhost/default"}


def test_a_job_no_queue_can_run_waits_with_the_reasons():
    job = run('[ Executable = "x"; Site = "LCG.RAL.uk"; Requirements = [ SoftwareTag = "AppVersion9"; ]; ]')
    assert job.queues == []
    assert job.minor_status.startswith("No eligible queue: Requirements not met (")
    assert "Site" not in job.updates


def test_cpu_time_is_compared_by_segment():
    # 3000 s falls in the 3600 s segment: CERN's short queue (3600 s) can run it.
    assert "LCG.CERN.ch/ce01.cern.ch/short" in queue_names(run('[ Executable = "x"; CPUTime = 3000; ]'))
    assert "LCG.CERN.ch/ce01.cern.ch/short" not in queue_names(run('[ Executable = "x"; CPUTime = 4000; ]'))


# ---------------------------------------------------------------- TaskQueue
def test_identical_scheduling_content_shares_a_task_queue():
    a = run('[ Executable = "a"; JobName = "one"; CPUTime = 1000; Site = "LCG.CERN.ch"; ]')
    b = run('[ Executable = "b"; Arguments = "x"; JobName = "two"; CPUTime = 1700; Site = "LCG.CERN.ch"; ]')
    assert a.task_queue.key == b.task_queue.key
    assert a.task_queue.request.cpu_time == 1800


@pytest.mark.parametrize(
    "other",
    [
        '[ Executable = "a"; CPUTime = 2000; ]',
        '[ Executable = "a"; CPUTime = 1000; Tags = {"GPU"}; ]',
        '[ Executable = "a"; CPUTime = 1000; Platform = "x86_64-el9"; ]',
        '[ Executable = "a"; CPUTime = 1000; ResourceRequests = [ h_rt = "1:00:00"; ]; ]',
        '[ Executable = "a"; CPUTime = 1000; Requirements = [ Memory = 2000; ]; ]',
    ],
)
def test_different_scheduling_content_gets_another_task_queue(other):
    base = run('[ Executable = "a"; CPUTime = 1000; ]')
    assert run(other).task_queue.key != base.task_queue.key


def test_task_queue_priority_comes_from_the_group_share():
    assert run('[ Executable = "a"; ]').task_queue_priority == 1000 * 1000
    assert run('[ Executable = "a"; ]', ANDRE).task_queue_priority == 500 * 1000


# ---------------------------------------------------------------- the chain itself
def test_unknown_executor_is_a_configuration_error():
    with pytest.raises(ConfigError, match="unknown executor 'JobSantiy'"):
        build_chain(["JobSantiy"])


class RefuseEverything:
    name = "RefuseEverything"

    def process(self, job, env):
        raise JDLError("refused by site policy", where=job.source)


def test_a_site_executor_is_loaded_by_module_and_class():
    [executor] = build_chain(["tests.core.test_optimizers:RefuseEverything"])
    assert executor.name == "RefuseEverything"
    with pytest.raises(ConfigError, match="cannot load executor"):
        build_chain(["tests.core.test_optimizers:Missing"])
