"""Start-up checks that need the complex table: Grid Engine values in the
configuration must name known attributes and read in their types."""

from __future__ import annotations

import shutil

import pytest

from tests.helpers import CONFIG_DIR
from wms.config import load_config
from wms.core.errors import ConfigError
from wms.services.runtime import Runtime


def config_with(tmp_path, file_name, old, new):
    directory = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, directory)
    path = directory / file_name
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    return load_config(directory)


@pytest.mark.parametrize(
    "file_name, old, new, message",
    [
        ("cluster.yaml", "num_proc: 2", "num_proc: lots",
         'hosts.durin.complex_values.num_proc: attribute "num_proc" is not an integer value'),
        ("cluster.yaml", "virtual_free: 8G", "virtul_free: 8G",
         "hosts.durin.complex_values.virtul_free: unknown complex attribute 'virtul_free'"),
        ("cluster.yaml", "complex_values: {compiler_lic: 20}", "complex_values: {compiler_lic: -1}",
         "global.complex_values.compiler_lic"),
        ("resources.yaml", "complex_values: {slots: 100, compiler_lic: 4}", "complex_values: {slots: many}",
         "Sites.LCG.CERN.ch.CEs.ce01.cern.ch.Queues.long.complex_values.slots"),
    ],
)
def test_bad_complex_values_stop_the_start(tmp_path, file_name, old, new, message):
    config = config_with(tmp_path, file_name, old, new)
    with pytest.raises(ConfigError) as err:
        Runtime.create(config, engine=None)
    assert message in str(err.value)
    assert f"{file_name}:" in err.value.where


def test_a_bad_complex_definition_names_cluster_yaml(tmp_path):
    config = config_with(tmp_path, "cluster.yaml", 'shortcut: vf, type: MEMORY, relop: "<="',
                         'shortcut: vf, type: MEMORY, relop: ">="')
    with pytest.raises(ConfigError, match="Consumable \"virtual_free\" can have only <="):
        Runtime.create(config, engine=None)
