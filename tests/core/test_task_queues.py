"""The task queue definition (core/task_queues.py): the key every stored
task queue is found by, the stored document and reading it back.

The keys below were computed before the definition was typed, from the
definitions then built as dicts: a changed key would file new jobs into
new task queues beside the stored ones of the same content.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from tests.helpers import ANDRE, REPO, ROLAND, default_config
from wms.core.complexes import ComplexTable
from wms.core.errors import InvalidInput
from wms.core.jdl import parse_jdl
from wms.core.match import levels
from wms.core.match.context import MatchContext, PilotRequest
from wms.core.match.verdict import Code
from wms.core.offers import GLOBAL, HOST, QUEUE, LevelValues, charged
from wms.core.optimizers import Job, build_chain
from wms.core.scheduling import SchedulingRequest
from wms.core.task_queues import TaskQueueDefinition
from wms.services.runtime import Runtime

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)

EXAMPLE_KEYS = {
    "arm.jdl": "19b5473cf35c0c6ed65e0959bd4ffe17",
    "classad-expression.jdl": "57ddb4cefd78e39dfdd2fbbb4bb39243",
    "cpu-model.jdl": "eb425aa3990c2d207593cfcdc433c5a7",
    "gpu.jdl": "c4dedcd8c58c355e55a135aeb65baf10",
    "grid-engine.jdl": "d9a199c5a4757dcac3032e94a8e4670f",
    "hello.jdl": "0baf97f08693f553e291b9ece83591f0",
    "parametric.jdl": "7a7ddde6abac139511ac4a6f121acef6",
    "sandbox.jdl": "0baf97f08693f553e291b9ece83591f0",
    "software.jdl": "f2e5256ccade6d6bb7b3dca153f88db4",
    "unrunnable.jdl": "a630c79ae81a9aab63cf50114b6cc779",
}

# Every part of a definition, as andre (dteam) submits it.
OTHER_KEYS = [
    ('[ Executable = "x"; ResourceRequests = [ h_rt = "0:30:00"; mf = "2G"; ]; SoftResourceRequests = '
     '[ arch = "lx-amd64"; ]; ParallelEnvironment = "mpi"; NumberOfProcessors = 4; Project = "p1"; ]',
     "fbdda0755e325a31b614ae3fab81e0f0"),
    ('[ Executable = "x"; Reservation = 7; ResourceRequests = [ h_rt = 600; ]; ]',
     "263082a10fbeee17bd7a9f922dfdddb4"),
    ('[ Executable = "x"; MinMem = 9000; Requirements = other.Memory >= MY.MinMem; ]',
     "3ad6cd9be7fe7b0a18845a8c4e1eb412"),
    ('[ Executable = "x"; Site = {"LCG.CERN.ch", "LCG.IN2P3.fr"}; BannedSite = "LCG.RAL.uk"; Tags = {"GPU"}; '
     'CPUTime = 5000; ]', "d93ce25fb1adf9726bd5cfcdb4b01de8"),
]

# What was stored for the last of those (JSON text of the definition column).
STORED_SITES_TAGS = (
    '{"banned_sites": ["LCG.RAL.uk"], "cpu_time": 21600, "number_of_processors": 1, "owner": "andre", '
    '"owner_group": "dteam_user", "parallel_environment": null, "platforms": [], "project": null, '
    '"requirements_expr": null, "reservation": null, "resource_requests": {}, "sites": ["LCG.CERN.ch", '
    '"LCG.IN2P3.fr"], "soft_resource_requests": {}, "submit_pool": null, "tags": ["GPU"], "vo": "dteam"}')


def filed(text: str, source: str, identity) -> list[TaskQueueDefinition]:
    config = default_config()
    runtime = Runtime(config=config, engine=None, chain=build_chain(list(config.settings.optimizers)))
    out = []
    for description in parse_jdl(text, source):
        job = Job(description=description, source=source, identity=identity)
        env = runtime.chain_env(NOW)
        for executor in runtime.chain:
            executor.process(job, env)
        assert job.task_queue is not None
        out.append(job.task_queue)
    return out


@pytest.mark.parametrize("name, key", sorted(EXAMPLE_KEYS.items()))
def test_the_examples_keep_their_task_queue_keys(name, key):
    definitions = filed((REPO / "examples" / name).read_text(), name, ROLAND)
    assert {d.key for d in definitions} == {key}


@pytest.mark.parametrize("text, key", OTHER_KEYS)
def test_every_part_of_a_definition_keeps_its_key(text, key):
    [definition] = filed(text, "test.jdl", ANDRE)
    assert definition.key == key


def test_the_stored_document_is_read_back_as_the_same_definition():
    for text, key in OTHER_KEYS:
        [definition] = filed(text, "test.jdl", ANDRE)
        again = TaskQueueDefinition.from_stored(definition.stored())
        assert again == definition and again.key == key and again.stored() == definition.stored()
    [sites] = filed(OTHER_KEYS[-1][0], "test.jdl", ANDRE)
    assert sites.stored() == STORED_SITES_TAGS


def test_a_document_written_before_a_key_existed_reads_as_its_empty_value():
    definition = TaskQueueDefinition.from_stored('{"owner": "roland", "vo": "lhcb", "cpu_time": 3600}')
    assert definition.request == SchedulingRequest(cpu_time=3600)
    assert (definition.reservation, definition.requirements_ad, dict(definition.hard_requests)) == (None, None, {})


@pytest.mark.parametrize("stored, message", [
    ('{"owner": "roland", "Sites": ["A"]}', "task queue definition: unknown key 'Sites'"),
    ('{"sites": "LCG.CERN.ch"}', "task queue definition: sites must be a list of strings, got 'LCG.CERN.ch'"),
    ('{"cpu_time": "3600"}', "task queue definition: cpu_time must be an integer, got '3600'"),
    ('{"reservation": true}', "task queue definition: reservation must be an integer, got True"),
    ('{"resource_requests": ["h_rt"]}',
     "task queue definition: resource_requests must be an object of resource requests, got ['h_rt']"),
    ('[1, 2]', "task queue definition: not a JSON object"),
    ('{"owner": ', "task queue definition: not JSON: "),
])
def test_a_document_not_written_here_is_refused_naming_the_key(stored, message):
    with pytest.raises(InvalidInput) as caught:
        TaskQueueDefinition.from_stored(stored)
    assert caught.value.message.startswith(message)


def test_a_definition_is_a_value():
    definition = TaskQueueDefinition("roland", "lhcb_user", "lhcb", None, SchedulingRequest(),
                                     hard_requests={"h_rt": 60.0})
    with pytest.raises(TypeError):
        definition.hard_requests["h_rt"] = 1.0      # type: ignore[index]
    with pytest.raises(AttributeError):
        definition.owner = "andre"                  # type: ignore[misc]


ROW = {"tq_id": 4, "priority": 7, "owner": "roland", "owner_group": "lhcb_user", "vo": "lhcb",
       "submit_pool": None, "cpu_time": 3600}


@pytest.mark.parametrize("stored, why", [
    (json.dumps({"owner": "roland", "vo": "lhcb", "resource_requests": {"no_such_complex": 1}}), "unknown resource 'no_such_complex'"),
    ('{"Sites": ["A"]}', "task queue definition: unknown key 'Sites'"),
])
def test_a_task_queue_that_cannot_be_matched_is_never_matched_and_says_why(stored, why):
    table = ComplexTable.builtin()
    view = levels.stored_task_queue_view({**ROW, "definition": stored}, table)
    assert (view.tq_id, view.priority, view.owner, view.vo) == (4, 7, "roland", "lhcb")
    assert view.invalid is not None and why in view.invalid
    assert view.charged == charged(table, {})       # its running jobs still hold a slot each
    context = MatchContext(request=PilotRequest("S", "c", "q", "", "p"), levels=(
        LevelValues(GLOBAL, {}), LevelValues(HOST, {}), LevelValues(QUEUE, {})),
        usage={}, complexes=table, pilot_ad={}, resources_for=lambda vo: None)
    verdict = levels.check_level(context, view, GLOBAL)
    assert verdict.code is Code.NEVER and verdict.why is levels.REASON_INVALID_DEFINITION
    assert verdict.reason == f"the task queue's definition is invalid: {view.invalid}"
