"""`wms submit` names what a Requirements expression reads from the resource
that no resource describes (services/feasibility.py, core/vocabulary.py):
the names come from resources.yaml, operations.yaml, the complexes and what
pilots describe; a VO declares the names its own pilots publish."""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.helpers import ANDRE, CONFIG_DIR, ROLAND
from wms.config import load_config
from wms.core.errors import ConfigError
from wms.core.jdl import parse_jdl
from wms.core.optimizers import Job, build_chain
from wms.services.feasibility import flag_unknown_names
from wms.services.runtime import Runtime

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
DECLARED = "  PilotAttributes:\n    lhcb: [GPUModel, CVMFSRepositories]\n"


def runtime_with(tmp_path: Path, operations_tail: str = "") -> Runtime:
    directory = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, directory)
    operations = directory / "operations.yaml"
    operations.write_text(operations.read_text().replace("JobDescription:\n", "JobDescription:\n" + operations_tail))
    config = load_config(directory)
    return Runtime(config=config, engine=None, chain=build_chain(list(config.settings.optimizers)))


def warnings_for(runtime: Runtime, text: str, identity=ROLAND) -> list[str]:
    env = runtime.chain_env(NOW)
    [description] = parse_jdl(text, "job.jdl")
    job = Job(description=description, source="job.jdl", identity=identity)
    for executor in runtime.chain:
        executor.process(job, env)
    return flag_unknown_names(runtime, [job])


@pytest.mark.parametrize(("requirements", "warned"), [
    ("other.Memory >= 1000", []),                                  # resources.yaml
    ("other.CPUModel == \"Intel Xeon\"", []),
    ("other.Country == \"ch\"", []),                               # a site's parameter, inherited
    ("other.mem_free > 1000 && other.compiler_lic > 0", []),       # complexes a pilot may report
    ("other.CPUTimeLeft > 3600 && other.PilotTags =!= undefined", []),   # what every pilot describes
    ("other.Memroy >= 1000", ["job.jdl: Requirements: other.Memroy: no resource describes Memroy; "
                              "did you mean Memory?"]),
    ("Memroy >= 1000", ["job.jdl: Requirements: Memroy: neither the job nor any resource describes Memroy; "
                        "did you mean Memory?"]),
])
def test_names_no_resource_describes_are_warned_about(tmp_path, requirements, warned):
    runtime = runtime_with(tmp_path)
    assert warnings_for(runtime, f'[ Executable = "x"; Requirements = {requirements}; ]') == warned


def test_a_vo_declares_the_names_its_pilots_publish(tmp_path):
    text = '[ Executable = "x"; Requirements = other.GPUModel == "A100"; ]'
    assert len(warnings_for(runtime_with(tmp_path / "a"), text)) == 1
    declared = runtime_with(tmp_path / "b", DECLARED)
    assert warnings_for(declared, text) == []
    # Declared for lhcb only: another VO's job is still warned.
    assert len(warnings_for(declared, text, identity=ANDRE)) == 1


def test_a_declared_name_that_is_no_attribute_name_is_a_configuration_error(tmp_path):
    with pytest.raises(ConfigError, match=r"operations.yaml.*PilotAttributes.*'GPU Model'"):
        runtime_with(tmp_path, "  PilotAttributes:\n    lhcb: [GPU Model]\n")
