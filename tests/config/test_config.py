"""Loading the configuration directory (INTERFACE.md "Configuration directory"):
the default config/ loads, every error names file and line."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import get_args

import pytest

from wms.config import (
    AGENT_PERIOD_DEFAULTS,
    Config,
    config_dir_from_env,
    load_config,
    load_yaml_with_lines,
)
from wms.config.models import OwnerOrAll, Scope
from wms.core.errors import ConfigError
from wms.core.limits import DEFAULT as DEFAULT_LIMITS
from wms.core.visibility import DEFAULT as DEFAULT_VISIBILITY, OWNER_OR_ALL, SCOPES
from wms.core.requirements import canonical_requirements, check_queue
from wms.core.resources import QueueRef

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "config"
NO_ENV: dict[str, str] = {}


def _write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def _error(directory: Path, name: str, text: str, env: dict[str, str] | None = None) -> ConfigError:
    _write(directory, name, text)
    with pytest.raises(ConfigError) as info:
        load_config(directory, environ=NO_ENV if env is None else env)
    return info.value


# -- the default configuration -----------------------------------------------------
def test_default_config_loads() -> None:
    config = load_config(DEFAULT_DIR, environ=NO_ENV)
    assert isinstance(config, Config)
    assert config.settings.bind == "127.0.0.1:8080"
    res = config.make_resources("lhcb")
    queues = res.queues()
    assert len({q.site for q in queues}) >= 3
    assert len({(q.site, q.ce) for q in queues}) >= 5
    assert len(queues) >= 8
    for ref in queues:
        params = res.queue_parameters(ref)
        assert isinstance(params["complex_values"]["slots"], int)
        assert {"MaxWaitingPilots", "MaxTotalPilots", "CPUTime", "Platform"} <= params.keys()
    platforms = {res.queue_parameters(q)["Platform"] for q in queues}
    assert {"x86_64-el9", "x86_64-el8", "aarch64-el9"} <= platforms
    assert config.cluster.users["andre"].vo == "dteam"
    assert config.cluster.complexes[0].requestable == "YES"
    assert config.cluster.global_.complex_values == {"compiler_lic": 20}
    assert config.operations.JobDescription.Parameters["Memory"] == "number"
    assert config.parameter_types["SoftwareTag"] == "list"
    assert config.operations.Shares["lhcb_prod"] == 4000


def test_default_long_queue_is_the_interface_one() -> None:
    config = load_config(DEFAULT_DIR, environ=NO_ENV)
    params = config.make_resources("lhcb").queue_parameters(
        QueueRef.parse("LCG.CERN.ch/ce01.cern.ch/long")
    )
    assert params["Country"] == "ch"
    assert params["Platform"] == "x86_64-el9"
    assert params["CPUTime"] == 172800
    assert params["SoftwareTag"] == ["AppVersion1", "AppVersion2"]
    assert params["complex_values"] == {"slots": 100, "compiler_lic": 4}
    types = config.parameter_types
    j2 = canonical_requirements(
        {"SoftwareTag": ["AppVersion1", "AppVersion2"], "CPUModel": "Intel Xeon", "Memory": 4000},
        types,
    )
    assert check_queue(j2, params, types) is not None


def test_empty_directory_gives_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path, environ=NO_ENV)
    s = config.settings
    assert s.database_url == "sqlite:///var/wms.db"
    assert s.broker_url == "redis://127.0.0.1:6379/0"
    assert (s.bind_host, s.bind_port) == ("127.0.0.1", 8080)
    assert s.agent_periods == AGENT_PERIOD_DEFAULTS
    assert (s.submit_pool_refresh, s.submit_pool_grace, s.match_lease) == (900, 3600, 300)
    assert (s.heartbeat_timeout, s.max_reschedule) == (1800, 3)
    assert (s.max_advance_reservations, s.duration_offset) == (0, 60)
    assert s.optimizers == ["JobSanity", "JobRequirements", "JobScheduling", "TaskQueue"]
    assert s.cpu_time_segments[0] == 360 and s.cpu_time_segments[-1] == 1209600
    assert s.smtp is None and s.max_jobs_per_submission == 10000
    assert config.resources == {}
    assert config.operations.JobDescription.DefaultCPUTime == 86400
    assert config.operations.JobDescription.MinCPUTime == 100
    assert config.operations.JobDescription.MaxCPUTime == 500000
    assert config.cluster.complexes == []
    with pytest.raises(Exception):
        config.settings = s  # type: ignore[misc]


def test_refresher_period_follows_submit_pool_refresh(tmp_path: Path) -> None:
    _write(tmp_path, "wms.yaml", "submit_pool_refresh: 600\nagent_periods: {site_director: 5}\n")
    s = load_config(tmp_path, environ=NO_ENV).settings
    assert s.agent_periods["submit_pool_refresher"] == 600
    assert s.agent_periods["site_director"] == 5
    assert s.agent_periods["lease_reaper"] == 30
    assert s.agent_period("site_director") == 5
    assert s.agent_period("future_agent", default=7) == 7


def test_settings_accept_custom_values(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "wms.yaml",
        """
        bind: "[::1]:9000"
        optimizers: [JobSanity, mypkg.extra:MyExecutor, TaskQueue]
        smtp: {host: smtp.example.org, sender: wms@example.org}
        """,
    )
    s = load_config(tmp_path, environ=NO_ENV).settings
    assert (s.bind_host, s.bind_port) == ("::1", 9000)
    assert s.optimizers[1] == "mypkg.extra:MyExecutor"
    assert s.smtp is not None and s.smtp.port == 25


def test_environment_overrides(tmp_path: Path) -> None:
    _write(tmp_path, "wms.yaml", "database_url: sqlite:///x.db\n")
    env = {"WMS_DATABASE_URL": "postgresql+psycopg://u@db/wms", "WMS_BROKER_URL": "redis://r:6379/1"}
    s = load_config(tmp_path, environ=env).settings
    assert s.database_url == "postgresql+psycopg://u@db/wms"
    assert s.broker_url == "redis://r:6379/1"
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, environ={"WMS_DATABASE_URL": "nonsense"})
    assert info.value.where == "WMS_DATABASE_URL"


def test_every_wms_yaml_key_is_settable_from_the_environment(tmp_path: Path) -> None:
    _write(tmp_path, "wms.yaml", "match_lease: 300\nlimits: {evaluation_ms: 5, depth: 20}\n")
    env = {"WMS_MATCH_LEASE": "12", "WMS_LIMITS__EVALUATION_MS": "9", "wms_caps__user_jobs": "50",
           "WMS_CPU_TIME_SEGMENTS": "[60, 600]", "WMS_AGENT_PERIODS": '{"lease_reaper": 5}',
           "WMS_URL": "http://client-only", "WMS_BIND": ""}
    s = load_config(tmp_path, environ=env).settings
    assert (s.match_lease, s.limits.evaluation_ms, s.caps.user_jobs) == (12, 9, 50)
    assert s.limits.depth == 20                      # the rest of a nested key stays wms.yaml's
    assert s.cpu_time_segments == [60, 600] and s.agent_periods["lease_reaper"] == 5
    assert s.bind == "127.0.0.1:8080"                # an empty variable gives nothing


@pytest.mark.parametrize(("env", "where", "says"), [
    ({"WMS_MATCH_LEASE": "soon"}, "WMS_MATCH_LEASE", "expected an integer, got 'soon'"),
    ({"WMS_LIMITS__EVALUATION_MS": "-1"}, "WMS_LIMITS__EVALUATION_MS", "must be greater than 0"),
    ({"WMS_CPU_TIME_SEGMENTS": "[60,"}, "WMS_CPU_TIME_SEGMENTS", "expected JSON for a list or mapping"),
    ({"WMS_CPU_TIME_SEGMENTS": "[60, 600]", "WMS_AGENT_PERIODS": "{lease_reaper: 5}", "WMS_MATCH_LEASE": "9"},
     "WMS_AGENT_PERIODS", "expected JSON for a list or mapping"),
    ({"WMS_LIMITS__NO_SUCH_KEY": "1"}, "WMS_LIMITS__NO_SUCH_KEY", "unknown key"),
])
def test_a_bad_environment_value_names_its_variable(tmp_path: Path, env, where, says) -> None:
    _write(tmp_path, "wms.yaml", "match_lease: 300\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, environ=env)
    assert info.value.where == where and says in str(info.value)


def test_config_dir_from_env() -> None:
    assert config_dir_from_env("/etc/wms", {"WMS_CONFIG": "/x"}) == Path("/etc/wms")
    assert config_dir_from_env(None, {"WMS_CONFIG": "/x"}) == Path("/x")
    assert config_dir_from_env(None, {}) == Path("config")
    assert config_dir_from_env("", {"WMS_CONFIG": ""}) == Path("config")


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="configuration directory not found"):
        load_config(tmp_path / "nope", environ=NO_ENV)
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="not a directory"):
        load_config(tmp_path / "file", environ=NO_ENV)


def test_where_helper(tmp_path: Path) -> None:
    _write(tmp_path, "cluster.yaml", "projects: [p1]\npes:\n  mpi: {slots: 4}\n")
    config = load_config(tmp_path, environ=NO_ENV)
    assert config.where("cluster.yaml", ("pes", "mpi", "slots")) == f"{tmp_path}/cluster.yaml:3"
    error = config.error("cluster.yaml", ("pes", "mpi"), "bad")
    assert str(error) == f"{tmp_path}/cluster.yaml:3: pes.mpi: bad"


# -- YAML reading ----------------------------------------------------------------------
def test_yaml_lines_and_scalars(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "x.yaml",
        """
        a:
          b: [1, 2]
          c:
            - {d: yes}
        flag: true
        country: no
        time: 1:30:00
        octal: 010
        day: 2024-01-01
        """,
    )
    data, lines = load_yaml_with_lines(path)
    assert data == {
        "a": {"b": [1, 2], "c": [{"d": "yes"}]},
        "flag": True,
        "country": "no",
        "time": "1:30:00",
        "octal": 10,
        "day": "2024-01-01",
    }
    assert lines[()] == 1
    assert lines[("a",)] == 1
    assert lines[("a", "b")] == 2
    assert lines[("a", "c", 0)] == 4
    assert lines[("a", "c", 0, "d")] == 4
    assert lines[("flag",)] == 5


# -- every error path names file and line ---------------------------------------------
def test_yaml_syntax_error(tmp_path: Path) -> None:
    error = _error(tmp_path, "wms.yaml", "bind: 127.0.0.1:8080\nagent_periods: {site_director: 5\n")
    assert error.where == f"{tmp_path}/wms.yaml:3"
    assert "YAML syntax error" in str(error)
    (tmp_path / "wms.yaml").unlink()
    error = _error(tmp_path, "cluster.yaml", "projects: [p1]\n  bad: indent\n")
    assert error.where == f"{tmp_path}/cluster.yaml:2"


def test_duplicate_key(tmp_path: Path) -> None:
    error = _error(
        tmp_path,
        "resources.yaml",
        """
        Sites:
          S:
            CEs:
              C:
                Queues:
                  q: {CPUTime: 1}
                  q: {CPUTime: 2}
        """,
    )
    assert error.where == f"{tmp_path}/resources.yaml:7"
    assert "duplicate key 'q' (first given at line 6)" in str(error)


@pytest.mark.parametrize(
    ("name", "text", "line", "message"),
    [
        ("wms.yaml", "bind: 127.0.0.1:8080\nmatch_leese: 30\n", 2, "match_leese: unknown key"),
        ("wms.yaml", "match_lease: 0\n", 1, "match_lease: must be greater than 0, got 0"),
        ("wms.yaml", "# leases\n\nmatch_lease: abc\n", 3, "match_lease: expected an integer, got 'abc'"),
        ("wms.yaml", "match_lease: true\n", 1, "match_lease: expected an integer, got True"),
        ("wms.yaml", "match_lease: 1.5\n", 1, "match_lease: expected an integer, got 1.5"),
        ("wms.yaml", "bind: localhost\n", 1, "bind: expected HOST:PORT"),
        ("wms.yaml", "bind: 'host:99999'\n", 1, "bind: port must be 1..65535"),
        ("wms.yaml", "bind: 'a b:80'\n", 1, "bind: expected HOST:PORT"),
        ("wms.yaml", "agent_periods:\n  site_director: 5\n  site_directr: 5\n", 3,
         "agent_periods.site_directr: expected one of"),
        ("wms.yaml", "agent_periods:\n  lease_reaper: -1\n", 2, "agent_periods.lease_reaper: must be greater than 0"),
        ("wms.yaml", "optimizers: [JobSanity, 'bad name']\n", 1, "optimizers[1]: expected an executor name"),
        ("wms.yaml", "optimizers: []\n", 1, "optimizers: must not be empty"),
        ("wms.yaml", "cpu_time_segments:\n  - 10\n  - 5\n", 1, "cpu_time_segments: segments must be strictly increasing"),
        ("wms.yaml", "database_url: 12\n", 1, "database_url: expected a URL"),
        ("wms.yaml", "smtp: {host: h}\n", 1, "smtp.sender: required key is missing"),
        ("wms.yaml", "- a\n- b\n", 1, "the file must hold a mapping"),
        ("operations.yaml", "JobDescription:\n  Parameters:\n    Memory: integer\n", 3,
         "JobDescription.Parameters.Memory: a parameter type is one of number, string, list"),
        ("operations.yaml", "JobDescription:\n  Parameters: {Memory: number, memory: list}\n", 2,
         "described twice"),
        ("operations.yaml", "JobDescription:\n  MinCPUTime: 1000\n  DefaultCPUTime: 10\n", 3,
         "expected MinCPUTime <= DefaultCPUTime <= MaxCPUTime"),
        ("operations.yaml", "Shares:\n  lhcb_user: lots\n", 2, "Shares.lhcb_user: expected an integer, got 'lots'"),
        ("operations.yaml", "JobDescriptions: {}\n", 1, "JobDescriptions: unknown key"),
        ("cluster.yaml", "complexes:\n  - {name: x, shortcut: x, type: INT, relop: '<=', requestable: YES, consumable: NO, default: 0}\n",
         2, "complexes[0].urgency: required key is missing"),
        ("cluster.yaml", "complexes:\n  - name: x\n    shortcut: x\n    type: INT\n    relop: '<='\n    requestable: YES\n"
         "    consumable: NO\n    default: 0\n    urgency: high\n", 9, "complexes[0].urgency: expected a number, got 'high'"),
        ("cluster.yaml", "hostgroups:\n  lx_hosts: [a]\n", 2, "a host group name starts with '@'"),
        ("cluster.yaml", "hostgroups:\n  '@a': [h1, '@b']\n", 2, "hostgroups.@a[1]: unknown host group '@b'"),
        ("cluster.yaml", "hostgroups:\n  '@a': ['@b']\n  '@b': ['@a']\n", 2, "host groups contain each other"),
        ("cluster.yaml", "pes:\n  mpi: {slots: -1}\n", 2, "pes.mpi.slots: must be at least 0"),
        ("cluster.yaml", "users:\n  bob: {group: g}\n", 2, "users.bob.vo: required key is missing"),
        ("cluster.yaml", "hosts:\n  h: {complex_values: {a: [1]}}\n", 2, "hosts.h.complex_values.a: expected a plain value"),
        ("cluster.yaml", "global: {complexvalues: {}}\n", 1, "global.complexvalues: unknown key"),
        ("cluster.yaml", "projects: [p1, p1]\n", 1, "projects: 'p1' is listed twice"),
    ],
)
def test_file_errors_name_file_line_and_problem(
    tmp_path: Path, name: str, text: str, line: int, message: str
) -> None:
    error = _error(tmp_path, name, text)
    assert error.where == f"{tmp_path}/{name}:{line}"
    assert message in error.message, error.message


RESOURCES_HEAD = """\
Sites:
  LCG.CERN.ch:
    CEs:
      ce01.cern.ch:
        Queues:
          long:
"""


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        ("            CPUTime: abc\n", 7,
         "Sites.LCG.CERN.ch.CEs.ce01.cern.ch.Queues.long.CPUTime: expected a number, got 'abc'"),
        ("            CPUTime: [1, 2]\n", 7, "CPUTime: expected a number, got a list"),
        ("            Memory: lots\n", 7, "Queues.long.Memory: expected a number, got 'lots'"),
        ("            CPUModel: 7763\n", 7, "CPUModel: expected a string, got 7763 (quote it)"),
        ("            MaxTotalPilots: 1.5\n", 7, "MaxTotalPilots: expected a whole number >= 0"),
        ("            SoftwareTag: []\n", 7, "SoftwareTag: an empty list offers nothing"),
        ("            SoftwareTag: [[a]]\n", 7, "SoftwareTag: a list holds plain values only"),
        ("            Foo: {a: 1}\n", 7, "Foo: expected a value or a list of values, got a mapping"),
        ("            Foo:\n", 7, "Foo: no value given"),
        ("            queues: {}\n", 7, "unknown key 'queues': did you mean 'Queues'?"),
        ("            Queues: {}\n", 7, "'Queues' is not allowed here: a queue holds no further level"),
        ("            Site: x\n", 7, "'Site' is reserved"),
        ("            CPU Time: 5\n", 7, "a parameter name is a ClassAd attribute name"),
        ("            Tags: [a]\n            tags: [b]\n", 8, "given twice (as 'Tags' and 'tags')"),
        ("            complex_values: [slots]\n", 7, "complex_values: expected a mapping"),
        ("            complex_values: {slots: [1]}\n", 7, "complex_values.slots: expected a plain value"),
        ("            user_lists: [nobody]\n", 7, "user_lists[0]: unknown user set 'nobody'"),
        ("            VO: [lhcb]\n", 7, "VO: expected a mapping of VO name to parameters"),
        ("            VO:\n              lhcb:\n                CPUTime: x\n", 9,
         "Queues.long.VO.lhcb.CPUTime: expected a number, got 'x'"),
        ("            VO:\n              lhcb:\n                CEs: {}\n", 9, "not allowed inside a VO block"),
        ("            Backend: slrum\n", 7,
         "Queues.long.Backend: unknown computing-element backend 'slrum' (known: local, slurm, ssh, arc)"),
        ("            Partition: 'a b'\n", 7, "Partition: expected a Slurm partition name (no blanks)"),
        ("            SlurmOptions: --output=/tmp/x\n", 7,
         "SlurmOptions: '--output' is set by the slurm backend itself"),
        ("            SlurmOptions: -Jname\n", 7, "SlurmOptions: '-Jname' is set by the slurm backend itself"),
        ("            SlurmOptions: --time 1:00\n", 7, "SlurmOptions: '1:00' is not an option: write each as --name=value"),
        ("            SlurmOptions: \"--comment='x\"\n", 7, "SlurmOptions: cannot split"),
        ("            SlurmConf: slurm.conf\n", 7, "SlurmConf: expected the absolute path of a slurm.conf"),
        ("            SSHHost: -oProxyCommand=x\n", 7, "SSHHost: expected a host name (no blanks"),
        ("            SSHUser: a@b\n", 7, "SSHUser: expected a user name"),
        ("            SSHPort: 70000\n", 7, "SSHPort: expected a TCP port (1 to 65535), got 70000"),
        ("            SSHKey: id_ed25519\n", 7, "SSHKey: expected the absolute path of a private key"),
        ("            Backend: ssh\n            SSHUser: pilot\n", 6,
         "Queues.long: Backend ssh needs SSHHost (at the queue, its CE or its site)"),
        ("            ARCEndpoint: http://ce.example.org/arex\n", 7,
         "ARCEndpoint: expected the https URL of an A-REX (https://ce.example.org:443/arex)"),
        ("            ARCEndpoint: 'https://ce/arex?x=1'\n", 7, "ARCEndpoint: expected the https URL of an A-REX"),
        ("            ARCProxy: x509up_u0\n", 7, "ARCProxy: expected the absolute path of a proxy certificate"),
        ("            ARCTokenFile: token\n", 7, "ARCTokenFile: expected the absolute path of a file holding a token"),
        ("            ARCQueue: 'a b'\n", 7, "ARCQueue: expected an ARC queue name (no blanks"),
        ("            ARCRSL: '(executable=\"/bin/sh\")'\n", 7,
         "ARCRSL: 'executable' is set by the arc backend itself"),
        ("            ARCRSL: '(walltime=\"60\"'\n", 7,
         "ARCRSL: cannot read '(walltime=\"60\"' as xRSL relations: a relation opened at character 1 is not closed"),
        ("            ARCRSL: 'walltime=60'\n", 7, "ARCRSL: cannot read 'walltime=60' as xRSL relations: expected '('"),
        ("            Backend: arc\n", 6,
         "Queues.long: Backend arc needs ARCEndpoint (at the queue, its CE or its site)"),
        ("          a/b: {}\n", 6, "Queues.a/b: a name must not contain '/'"),
        ("          7: {}\n", 6, "a name must be a string, got 7"),
        ("          " + "q" * 129 + ": {}\n", 6, "a name may have at most 128 characters"),
    ],
)
def test_resources_errors(tmp_path: Path, body: str, line: int, message: str) -> None:
    _write(tmp_path, "operations.yaml", (DEFAULT_DIR / "operations.yaml").read_text())
    head = RESOURCES_HEAD if body.startswith("            ") else RESOURCES_HEAD.rsplit("          long:\n", 1)[0]
    error = _error(tmp_path, "resources.yaml", head + body)
    assert error.where == f"{tmp_path}/resources.yaml:{line}", str(error)
    assert message in error.message, error.message


def test_a_backend_parameter_may_come_from_the_ce(tmp_path: Path) -> None:
    _write(tmp_path, "operations.yaml", (DEFAULT_DIR / "operations.yaml").read_text())
    _write(tmp_path, "resources.yaml", RESOURCES_HEAD.replace(
        "        Queues:", "        Backend: ssh\n        SSHHost: node1\n        Queues:") + "            CPUTime: 60\n")
    resources = load_config(tmp_path, environ=NO_ENV).make_resources(None)
    [queue] = resources.queues()
    assert resources.queue_parameter_map(queue)["SSHHost"] == "node1"


def test_resources_names_and_structure_errors(tmp_path: Path) -> None:
    error = _error(tmp_path, "resources.yaml", "Sites:\n  A/B:\n    Country: ch\n")
    assert (error.where, error.message) == (
        f"{tmp_path}/resources.yaml:2",
        "Sites.A/B: a name must not contain '/' (queues are named Site/CE/Queue), got 'A/B'",
    )
    error = _error(tmp_path, "resources.yaml", "Sites:\n  S:\n    Queues: {q: {}}\n")
    assert error.where.endswith("resources.yaml:3")
    assert "a site holds CEs" in error.message
    error = _error(tmp_path, "resources.yaml", "Site:\n  S: {}\n")
    assert error.where.endswith("resources.yaml:1") and "Site: unknown key" in error.message
    error = _error(tmp_path, "resources.yaml", "Sites:\n  S:\n    CEs:\n      C/D: {}\n")
    assert error.where.endswith("resources.yaml:4") and "'/'" in error.message


def test_first_problem_is_reported_with_a_count(tmp_path: Path) -> None:
    error = _error(tmp_path, "wms.yaml", "match_lease: 0\nheartbeat_timeout: 0\nbind: x\n")
    assert error.where.endswith("wms.yaml:1")
    assert error.message.endswith("(and 2 more problems)")


def test_resource_values_are_normalised_and_types_from_operations(tmp_path: Path) -> None:
    _write(tmp_path, "operations.yaml", "JobDescription:\n  Parameters: {Memory: number, Platform: list}\n")
    _write(tmp_path, "cluster.yaml", "usersets: {staff: [roland]}\n")
    _write(
        tmp_path,
        "resources.yaml",
        """
        Sites:
          S:
            CEs:
              C:
                Platform: [el9, el8]
                Queues:
                  q:
                    memory: "4000"
                    CPUTime: 3600.0
                    user_lists: staff
                    xuser_lists: [NONE]
        """,
    )
    config = load_config(tmp_path, environ=NO_ENV)
    queue = config.resources["S"]["CEs"]["C"]["Queues"]["q"]
    assert queue == {"memory": 4000, "CPUTime": 3600, "user_lists": "staff", "xuser_lists": ["NONE"]}
    assert config.parameter_types["Platform"] == "list"


def test_an_empty_file_and_empty_nodes_are_allowed(tmp_path: Path) -> None:
    _write(tmp_path, "wms.yaml", "# nothing\n")
    _write(tmp_path, "resources.yaml", "Sites:\n  S:\n  T:\n    CEs:\n      C:\n")
    config = load_config(tmp_path, environ=NO_ENV)
    assert config.resources == {"S": {}, "T": {"CEs": {"C": {}}}}
    assert config.make_resources().queues() == []


def test_yaml_merge_keys_and_unsafe_tags(tmp_path: Path) -> None:
    path = _write(tmp_path, "m.yaml", "a: &x {b: 1, e: 3}\nc:\n  <<: *x\n  b: 2\n")
    data, lines = load_yaml_with_lines(path)
    assert data["c"] == {"b": 2, "e": 3}
    assert lines[("c", "b")] == 4
    error = _error(tmp_path, "cluster.yaml", "projects: [p1]\npes: !!python/object:os.system x\n")
    assert error.where == f"{tmp_path}/cluster.yaml:2"
    assert "could not determine a constructor" in error.message
    (tmp_path / "cluster.yaml").unlink()
    error = _error(tmp_path, "operations.yaml", "Shares:\n\t- b\n")
    assert error.where == f"{tmp_path}/operations.yaml:2"
    assert "YAML syntax error" in error.message


# -- limits ----------------------------------------------------------------------------
def test_limits_have_defaults_and_can_be_set(tmp_path: Path) -> None:
    s = load_config(tmp_path, environ=NO_ENV).settings
    assert s.limits.core() == DEFAULT_LIMITS
    _write(tmp_path, "wms.yaml", "limits: {request_bytes: 1000, jdl_bytes: 500, depth: 8, expression_terms: 50,"
                                 " statement_timeout: 2.5}\n")
    limits = load_config(tmp_path, environ=NO_ENV).settings.limits.core()
    assert (limits.request_bytes, limits.jdl_bytes, limits.depth, limits.expression_terms,
            limits.statement_timeout) == (1000, 500, 8, 50, 2.5)


@pytest.mark.parametrize("text, key", [
    ("limits: {depth: 65}\n", "depth"),
    ("limits: {expression_terms: 301}\n", "expression_terms"),
    ("limits: {request_bytes: 0}\n", "request_bytes"),
    ("limits: {statement_timeout: -1}\n", "statement_timeout"),
    ("limits: {unknown: 1}\n", "unknown"),
])
def test_limits_past_what_is_safe_are_refused(tmp_path: Path, text: str, key: str) -> None:
    error = _error(tmp_path, "wms.yaml", text)
    assert "wms.yaml:1" in str(error) and key in str(error)


# -- visibility ------------------------------------------------------------------------
def test_visibility_has_the_documented_defaults_and_can_be_set(tmp_path: Path) -> None:
    s = load_config(tmp_path, environ=NO_ENV).settings
    assert s.visibility.core() == DEFAULT_VISIBILITY
    assert (DEFAULT_VISIBILITY.jobs, DEFAULT_VISIBILITY.task_queues, DEFAULT_VISIBILITY.reservations,
            DEFAULT_VISIBILITY.quota_usage) == ("owner", "vo", "all", "all")
    _write(tmp_path, "wms.yaml", "visibility: {jobs: group, task_queues: all, reservations: owner, quota_usage: owner}\n")
    v = load_config(tmp_path, environ=NO_ENV).settings.visibility.core()
    assert (v.jobs, v.task_queues, v.reservations, v.quota_usage) == ("group", "all", "owner", "owner")


def test_the_scopes_in_the_schema_are_those_the_rule_knows() -> None:
    assert set(get_args(Scope)) == set(SCOPES) and set(get_args(OwnerOrAll)) == set(OWNER_OR_ALL)


@pytest.mark.parametrize("text, key", [
    ("visibility:\n  jobs: everyone\n", "jobs"),
    ("visibility:\n  reservations: group\n", "reservations"),       # a reservation knows no group
    ("visibility:\n  quota_usage: vo\n", "quota_usage"),
    ("visibility:\n  task_queue: all\n", "task_queue"),
])
def test_a_visibility_scope_that_does_not_exist_is_refused(tmp_path: Path, text: str, key: str) -> None:
    error = _error(tmp_path, "wms.yaml", text)
    assert "wms.yaml:2" in str(error) and key in str(error)


def test_the_database_pool_has_defaults_and_can_be_set(tmp_path: Path) -> None:
    assert load_config(tmp_path, environ=NO_ENV).settings.database_pool.model_dump() == {
        "size": 10, "max_overflow": 30, "recycle": 3600, "pre_ping": False, "timeout": 30, "connect_timeout": 10}
    _write(tmp_path, "wms.yaml", """
        database_pool: {size: 4, max_overflow: 0, recycle: 0, pre_ping: true, timeout: 2.5, connect_timeout: 3}
    """)
    pool = load_config(tmp_path, environ=NO_ENV).settings.database_pool
    assert (pool.size, pool.max_overflow, pool.recycle, pool.pre_ping, pool.timeout, pool.connect_timeout) == (
        4, 0, 0, True, 2.5, 3)


@pytest.mark.parametrize("text, line, message", [
    ("database_pool:\n  size: 0\n", 2, "database_pool.size: must be greater than 0, got 0"),
    ("database_pool:\n  max_overflow: -1\n", 2, "database_pool.max_overflow: must be at least 0, got -1"),
    ("database_pool:\n  recycle: soon\n", 2, "database_pool.recycle: expected an integer, got 'soon'"),
    ("database_pool:\n  pre_ping: maybe\n", 2, "database_pool.pre_ping: Input should be a valid boolean"),
    ("database_pool:\n  timeout: 0\n", 2, "database_pool.timeout: must be greater than 0, got 0"),
    ("database_pool:\n  size: true\n", 2, "database_pool.size: expected an integer, got True"),
    ("database_pool:\n  sise: 5\n", 2, "database_pool.sise: unknown key"),
])
def test_a_bad_database_pool_names_file_line_and_key(tmp_path: Path, text: str, line: int, message: str) -> None:
    error = _error(tmp_path, "wms.yaml", text)
    assert error.where == f"{tmp_path}/wms.yaml:{line}"
    assert message in error.message, error.message
