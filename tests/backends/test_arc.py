"""The arc backend against a real A-REX of the session's own (tests/arc.py:
a test CA, the fork LRMS, jobs run as nobody): pilots are ARC jobs
submitted through the REST interface, their states come back in one
request per CE and cycle with the logs of those that ended, kill cancels
them, a CE that does not answer says nothing and one that refuses the
SiteDirector's certificate fails the submission. Plus the pure parts."""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest

from tests.pilot_backends import NO_SERVER, QUICK_PILOT, queue_ref, wait_for_states
from wms.core import xrsl
from wms.core.errors import InvalidInput
from wms.backends.arc import ArcBackend, ArcError
from wms.backends.arc_jobs import (
    ArcCredentials,
    ArcRef,
    check_ref_length,
    job_description,
    parse_created,
    parse_states,
    pilot_script,
)
from wms.backends.base import PilotArgs

SECRET = "wms_secret_arc_token"


def options(ce, **more) -> dict:
    return {"ARCEndpoint": ce.endpoint, "ARCCertificate": str(ce.user_cert), "ARCKey": str(ce.user_key),
            "ARCCAFile": str(ce.ca_file()), **more}


def args(opts, *pilot_ids, token=SECRET, argv=QUICK_PILOT):
    return PilotArgs(url=NO_SERVER, token=token, pilot_ids=pilot_ids, argv=argv, options=opts)


# ---------------------------------------------------------------- pure parts
def test_a_reference_holds_the_ce_the_job_the_pilot_and_the_credential_digest():
    credentials = ArcCredentials(proxy="/etc/wms/proxy.pem", ca_dir="/etc/grid-security/certificates")
    ref = ArcRef("https://ce.example.org:443/arex", "AbC12xyz", "Site.q-ab12", credentials.digest)
    text = str(ref)
    assert text == f"https://ce.example.org:443/arex/jobs/AbC12xyz?pilot=Site.q-ab12&cred={credentials.digest}"
    assert ArcRef.parse(text) == ref and "proxy" not in text
    assert ArcCredentials(proxy="/etc/wms/other.pem").digest != credentials.digest
    for bad in ("host:12:p", "ssh://u@h:22/1/p", "https://ce/arex/jobs/x?pilot=p", "https://ce/arex?pilot=p&cred=c",
                "https://ce/arex/jobs/x?pilot=../p&cred=c", "https://ce/arex/jobs/x?pilot=.p&cred=c",
                "https://ce/arex/jobs/..%2Fx?pilot=p&cred=c"):
        assert ArcRef.parse(bad) is None, bad


def test_a_queue_names_one_whole_credential():
    assert ArcCredentials.of({"ARCProxy": "/p"}).proxy == "/p"
    assert ArcCredentials.of({"ARCTokenFile": "/t"}).token_file == "/t"
    for opts, message in (({}, "needs a credential"), ({"ARCCertificate": "/c"}, "ARCCertificate and ARCKey together"),
                          ({"ARCProxy": "/p", "ARCCertificate": "/c", "ARCKey": "/k"}, "not both")):
        with pytest.raises(InvalidInput, match=message):
            ArcCredentials.of(opts)


def test_a_reference_too_long_for_its_column_is_refused_before_submission():
    with pytest.raises(InvalidInput, match="the endpoint's URL is too long"):
        check_ref_length("https://ce.example.org:443/" + "a" * 200, "Site.q-ab12")


def test_the_description_runs_the_script_and_keeps_only_the_log():
    text = job_description("S.q-1", queue="grid", extra='(walltime="120")')
    assert text.startswith('&(executable="pilot.sh")') and "arguments" not in text
    assert '(inputfiles=("pilot.sh" "")("pilot.pyz" "")("pilot.token" ""))' in text
    assert '(stdout="pilot.log")(stderr="pilot.log")' in text and '(outputfiles=("pilot.log" ""))' in text
    assert '(jobname="wms-S.q-1")' in text and '(queue="grid")' in text and text.rstrip().endswith('(walltime="120")')
    assert xrsl.relation_attributes(text[1:]) == ["executable", "inputfiles", "stdout", "stderr", "outputfiles",
                                                   "jobname", "queue", "walltime"]
    # The token is never in the description: it travels as a file the script removes.
    assert "token" not in text.replace('"pilot.token"', "")


def test_the_script_holds_the_pilot_options_quoted_for_the_shell():
    script = pilot_script(["--url", "http://h:1", "--site", 'A "quoted" $HOME site'])
    assert "rm -f pilot.token" in script and "--token-file - <&3 3<&-" in script
    [start] = [line for line in script.splitlines() if line.startswith("exec python3")]
    assert shlex.split(start)[2:9] == ["pilot.pyz", "--url", "http://h:1", "--site", 'A "quoted" $HOME site',
                                       "--on-sigterm", "leave"]
    assert xrsl.quote('say "hi"') == '"say ""hi"""'


def test_xrsl_relations_are_read_whole_or_refused():
    assert xrsl.relation_attributes('(memory >= "2000") ( count = 4 )(runtimeenvironment="A (b)")') == \
        ["memory", "count", "runtimeenvironment"]
    for text, message in (("walltime=1", "expected '\\('"), ('(walltime="1"', "not closed"),
                          ('(a="x)', "quoted value opened"), ("(=1)", "no attribute name"), ("(a 1)", "no operator")):
        with pytest.raises(ValueError, match=message):
            xrsl.relation_attributes(text)
    with pytest.raises(ValueError, match="line break"):
        xrsl.quote("a\nb")


def test_output_of_a_reference_that_is_not_arc_s_is_refused(tmp_path):
    with pytest.raises(InvalidInput, match="not an ARC pilot reference: '12:p'"):
        ArcBackend(log_dir=tmp_path).output("12:p", 1 << 20)


def test_rest_answers_are_read_for_one_job_or_many():
    assert parse_created({"job": {"status-code": "201", "reason": "Created", "id": "J1", "state": "ACCEPTING"}}) == "J1"
    with pytest.raises(ValueError, match="not a job id"):
        parse_created({"job": {"status-code": "201", "id": "../../info"}})
    with pytest.raises(ValueError, match="A-REX refused the job: 500 Requested queue does not exist"):
        parse_created({"job": {"status-code": "500", "reason": "Requested queue does not exist"}})
    answer = {"job": [{"status-code": "200", "id": "a", "state": "QUEUING"},
                      {"status-code": "200", "id": "b", "state": "EXITINGLRMS"},
                      {"status-code": "200", "id": "c", "state": "FINISHED"},
                      {"status-code": "200", "id": "d", "state": "FAILED"},
                      {"status-code": "200", "id": "e", "state": "KILLED"},
                      {"status-code": "200", "id": "f", "state": "OTHER"},
                      {"status-code": "404", "id": "g", "reason": "Job not found", "state": "None"}]}
    assert parse_states(answer) == ({"a": "Submitted", "b": "Running", "c": "Done", "d": "Failed", "e": "Aborted"},
                                    {"g"})
    with pytest.raises(ValueError, match="not an A-REX answer"):
        parse_states({"jobs": []})


def test_only_the_end_of_a_huge_pilot_log_is_kept(tmp_path, monkeypatch):
    import httpx

    from wms.backends import arc as arc_backend

    monkeypatch.setattr(arc_backend, "LOG_LIMIT", 10)
    path = tmp_path / "p.log"
    arc_backend._keep_tail(httpx.Response(200, content=b"0123456789" * 5 + b"the end\n"), path)
    text = path.read_text()
    assert text.startswith("(the pilot's log at the CE was 58 bytes: its last ") and text.endswith("the end\n")
    arc_backend._keep_tail(httpx.Response(200, content=b"short\n"), path)
    assert path.read_text() == "short\n"


# ---------------------------------------------------------------- a real A-REX
def test_pilots_run_as_arc_jobs_and_their_end_and_logs_come_back(arc_ce, tmp_path):
    backend = ArcBackend(log_dir=tmp_path / "logs")
    opts = options(arc_ce)
    pilots = PilotArgs(url=NO_SERVER, tokens={"ok": SECRET, "notok": ""}, pilot_ids=("ok", "notok"), argv=QUICK_PILOT,
                       options=opts)
    ok, no_token = backend.submit_pilots(queue_ref(), 2, pilots)
    assert ArcRef.parse(ok).pilot_id == "ok" and ArcRef.parse(ok).endpoint == arc_ce.endpoint
    assert SECRET not in ok
    # One request asks for both; the second pilot's token file is empty: the pilot says it has none.
    states = wait_for_states(backend, [ok, no_token], {"Done", "Failed", "Aborted"})
    assert states == {ok: "Done", no_token: "Failed"}, states
    log = (tmp_path / "logs" / "ok.log").read_text()
    assert "pilot ok starting against http://127.0.0.1:9" in log, log
    assert "no token" in (tmp_path / "logs" / "notok.log").read_text()
    assert backend.output(ok, 1 << 20) == log                   # `wms pilots --output`: the log fetched at the end
    # The ended jobs were cleaned off the CE; their ends are remembered here.
    with pytest.raises(Exception, match="404"):
        arc_ce.get(f"/jobs/{ArcRef.parse(ok).job_id}/session/pilot.log")
    assert backend.status([ok, no_token]) == {ok: "Done", no_token: "Failed"}
    # The token is in no file A-REX keeps, and the pilot ran as the mapped account.
    for path in [*arc_ce.session_dir.rglob("*"), *(arc_ce.dir / "control").rglob("*")]:
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_kill_cancels_the_pilot_at_the_ce(arc_ce, tmp_path):
    backend = ArcBackend(log_dir=tmp_path / "logs")
    waits = (*QUICK_PILOT, "--max-empty", "1000")          # the last one given counts
    [ref] = backend.submit_pilots(queue_ref(), 1, args(options(arc_ce), "long", argv=waits))
    assert wait_for_states(backend, [ref], {"Running"}) == {ref: "Running"}
    assert backend.output(ref, 1 << 20) is None                 # still at the CE: fetched when it ends
    backend.kill(ref)
    states = wait_for_states(backend, [ref], {"Aborted", "Failed", "Done"}, timeout=90)
    assert states == {ref: "Aborted"}, states
    assert backend.output(ref, 1 << 20)                         # its log, or the CE's word that it kept none
    backend.kill(ref)                                        # gone from the CE: nothing to do


def test_a_ce_that_does_not_answer_says_nothing_and_takes_no_pilot(arc_ce, tmp_path):
    from tests.servers import free_port

    down = f"https://localhost:{free_port()}/arex"
    backend = ArcBackend(log_dir=tmp_path)
    backend.configured = lambda: [options(arc_ce, ARCEndpoint=down)]
    ref = str(ArcRef(down, "J1", "p", ArcCredentials.of(options(arc_ce)).digest))
    assert backend.status([ref]) == {}
    with pytest.raises(ArcError, match=f"submission at {down}/rest/1.0: ConnectError"):
        backend.submit_pilots(queue_ref(), 1, args(options(arc_ce, ARCEndpoint=down), "p"))


def test_a_connection_dropped_before_the_request_is_tried_again(arc_ce, tmp_path):
    from urllib.parse import urlsplit

    from tests.faults.netcuts import Forwarder

    ce = urlsplit(arc_ce.endpoint)
    forwarder = Forwarder(target=(ce.hostname, ce.port), refuse_first=2).start()
    try:
        flaky = f"https://localhost:{forwarder.port}{ce.path}"
        backend = ArcBackend(log_dir=tmp_path)
        [ref] = backend.submit_pilots(queue_ref(), 1, args(options(arc_ce, ARCEndpoint=flaky), "p"))
        assert forwarder.resets == 2
        forwarder.refuse_first = 1
        assert backend.status([ref]).get(ref) in ("Submitted", "Running", "Done")
        assert forwarder.resets == 3
        backend.kill(ref)
    finally:
        forwarder.stop()


def test_an_answer_larger_than_a_ce_ever_sends_is_not_read(arc_ce, tmp_path, monkeypatch):
    import wms.backends.arc as arc

    backend = ArcBackend(log_dir=tmp_path)
    [ref] = backend.submit_pilots(queue_ref(), 1, args(options(arc_ce), "p"))
    monkeypatch.setattr(arc, "ANSWER_LIMIT", 10)
    with pytest.raises(ArcError, match=f"submission at {arc_ce.endpoint}/rest/1.0: an answer of more than 10 bytes"):
        backend.submit_pilots(queue_ref(), 1, args(options(arc_ce), "q"))
    assert backend.status([ref]) == {}          # the CE's answer is not taken: nothing said this cycle
    monkeypatch.setattr(arc, "ANSWER_LIMIT", 16 << 20)
    backend.kill(ref)


def test_a_ce_that_refuses_the_certificate_fails_the_submission(arc_ce, tmp_path):
    # A certificate of the CE's CA whose subject the CE does not map.
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    arc_ce.user_certificate("WMS Stranger", stranger)
    opts = options(arc_ce, ARCCertificate=str(stranger / "client-WMS-Stranger-cert.pem"),
                   ARCKey=str(stranger / "client-WMS-Stranger-key.pem"))
    with pytest.raises(ArcError, match="submission at .*: HTTP 40[13]"):
        ArcBackend(log_dir=tmp_path).submit_pilots(queue_ref(), 1, args(opts, "p"))
    # And a CE whose certificate the SiteDirector cannot check is not trusted.
    untrusted = options(arc_ce, ARCCAFile=str(stranger / "client-WMS-Stranger-cert.pem"))
    with pytest.raises(ArcError, match="CERTIFICATE_VERIFY_FAILED"):
        ArcBackend(log_dir=tmp_path).submit_pilots(queue_ref(), 1, args(untrusted, "p"))


def test_a_token_file_is_read_at_every_call_and_never_shown(arc_ce, tmp_path):
    token = tmp_path / "arc.token"
    token.write_text("")
    opts = options(arc_ce, ARCTokenFile=str(token))
    with pytest.raises(ArcError, match="is empty"):
        ArcBackend(log_dir=tmp_path).submit_pilots(queue_ref(), 1, args(opts, "p"))
    token.unlink()
    with pytest.raises(ArcError, match="cannot read the ARC token file") as refused:
        ArcBackend(log_dir=tmp_path).submit_pilots(queue_ref(), 1, args(opts, "p"))
    assert "No such file" in str(refused.value)
    # Not a token the CE can check: the certificate alone lets the director in.
    token.write_text("a-bearer-token-the-ce-ignores\n")
    backend = ArcBackend(log_dir=tmp_path)
    [ref] = backend.submit_pilots(queue_ref(), 1, args(opts, "p"))
    assert "a-bearer-token" not in ref
    backend.kill(ref)


def test_a_restarted_director_finds_the_credential_in_the_configuration(arc_ce, tmp_path):
    [ref] = ArcBackend(log_dir=tmp_path).submit_pilots(queue_ref(), 1, args(options(arc_ce), "p"))
    # A new process knows no credential until the configuration names one for the CE.
    assert ArcBackend(log_dir=tmp_path).status([ref]) == {}
    with pytest.raises(ArcError, match="no configured credential"):
        ArcBackend(log_dir=tmp_path).kill(ref)
    restarted = ArcBackend(log_dir=tmp_path, configured=lambda: [{"Backend": "arc"}, options(arc_ce)])
    assert restarted.status([ref]).get(ref) in ("Submitted", "Running", "Done")
    restarted.kill(ref)


def test_a_certificate_renewed_in_place_is_used_at_the_next_call(arc_ce, tmp_path):
    cert, key = tmp_path / "director-cert.pem", tmp_path / "director-key.pem"
    arc_ce.user_certificate("WMS Other", tmp_path)
    backend = ArcBackend(log_dir=tmp_path)
    opts = options(arc_ce, ARCCertificate=str(cert), ARCKey=str(key))

    def install(cert_from, key_from):
        cert.write_bytes(cert_from.read_bytes())
        key.write_bytes(key_from.read_bytes())

    install(arc_ce.user_cert, arc_ce.user_key)
    [ref] = backend.submit_pilots(queue_ref(), 1, args(opts, "p1"))
    # The files now hold a certificate the CE does not map: the next request shows it.
    install(tmp_path / "client-WMS-Other-cert.pem", tmp_path / "client-WMS-Other-key.pem")
    with pytest.raises(ArcError, match="HTTP 40"):
        backend.submit_pilots(queue_ref(), 1, args(opts, "p2"))
    assert backend.status([ref]) == {}
    install(arc_ce.user_cert, arc_ce.user_key)
    assert backend.status([ref]).get(ref) in ("Submitted", "Running", "Done")
    backend.kill(ref)


def test_a_ce_configured_for_tokens_takes_pilots_with_a_token_alone(arc_ce, tmp_path):
    from tests.arc import TOKEN_SUBJECT

    token = tmp_path / "director.token"
    token.write_text(arc_ce.issuer.token(TOKEN_SUBJECT) + "\n")
    opts = {"ARCEndpoint": arc_ce.endpoint, "ARCTokenFile": str(token), "ARCCAFile": str(arc_ce.ca_file())}
    backend = ArcBackend(log_dir=tmp_path / "logs")
    [ref] = backend.submit_pilots(queue_ref(), 1, args(opts, "bytoken"))
    assert wait_for_states(backend, [ref], {"Done", "Failed", "Aborted"}) == {ref: "Done"}
    assert "pilot bytoken starting" in (tmp_path / "logs" / "bytoken.log").read_text()
    # An expired token, or another subject's, is refused; a renewed one is read at the next call.
    token.write_text(arc_ce.issuer.token(TOKEN_SUBJECT, lifetime=-120))
    with pytest.raises(ArcError, match="HTTP 40[13]"):
        backend.submit_pilots(queue_ref(), 1, args(opts, "expired"))
    token.write_text(arc_ce.issuer.token("someone-else"))
    with pytest.raises(ArcError, match="HTTP 40[13]"):
        backend.submit_pilots(queue_ref(), 1, args(opts, "stranger"))
    token.write_text(arc_ce.issuer.token(TOKEN_SUBJECT))
    [renewed] = backend.submit_pilots(queue_ref(), 1, args(opts, "renewed"))
    backend.kill(renewed)


def test_a_proxy_made_with_arcproxy_lets_the_director_in(arc_ce, tmp_path):
    proxy = tmp_path / "proxy.pem"
    env = {**os.environ, "HOME": str(tmp_path), "X509_USER_CERT": str(arc_ce.user_cert),
           "X509_USER_KEY": str(arc_ce.user_key), "X509_CERT_DIR": str(arc_ce.ca_dir)}
    subprocess.run(["arcproxy", "--proxy", str(proxy)], env=env, check=True, capture_output=True, timeout=60)
    opts = {"ARCEndpoint": arc_ce.endpoint, "ARCProxy": str(proxy), "ARCCAFile": str(arc_ce.ca_file())}
    backend = ArcBackend(log_dir=tmp_path)
    [ref] = backend.submit_pilots(queue_ref(), 1, args(opts, "byproxy"))
    assert backend.status([ref]).get(ref) in ("Submitted", "Running", "Done")
    backend.kill(ref)
