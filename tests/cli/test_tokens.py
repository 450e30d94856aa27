"""`wms admin token create/list/revoke` against the server's database, and
the token file's modes."""

from __future__ import annotations

import socket

import json
import os
import stat
import time

from wms.cli.client import write_token_file
from wms.services.job_tokens import KEY_SYNC_INTERVAL
from wms.services.tokens import REVOCATION_WINDOW


def test_create_with_a_lifetime_list_and_revoke(server):
    token = server.ok("admin", "token", "create", "--user", "zoe", "--group", "lhcb_user", "--vo", "lhcb",
                      "--role", "user", "--lifetime", "2h", "--description", "laptop").strip()
    assert token.startswith("wms_")
    assert server("jobs", token=token).returncode == 0
    rows = server.json("admin", "token", "list")
    [row] = [r for r in rows if r["User"] == "zoe"]
    assert (row["Role"], row["State"], row["Description"], row["Pilot"]) == ("user", "valid", "laptop", "")
    assert row["Expires"] != "never" and token not in json.dumps(rows)
    # The table: aligned columns, the header first; never the token itself.
    table = server.ok("admin", "token", "list").splitlines()
    assert table[0].split()[:6] == ["ID", "User", "Group", "VO", "Role", "Pilot"]
    assert set(table[1]) <= {"-", " "}
    [line] = [line for line in table if " zoe " in line]
    assert line.index(" zoe ") + 1 == table[0].index("User") and token not in "\n".join(table)

    assert server.ok("admin", "token", "revoke", row["ID"]).strip() == f"token {row['ID']} (zoe, user) revoked"
    # The server verified the token before; revoked through another process,
    # it is refused a second later (tests/api/test_revocation.py: by every worker).
    time.sleep(REVOCATION_WINDOW)
    result = server("jobs", token=token)
    assert result.returncode == 1 and f"token {row['ID']} was revoked at" in result.stderr
    [again] = [r for r in server.json("admin", "token", "list") if r["User"] == "zoe"]
    assert again["State"] == "revoked"
    result = server("admin", "token", "revoke", row["ID"])
    assert result.returncode == 1 and "already revoked" in result.stderr
    result = server("admin", "token", "revoke", "ffffffffffff")
    assert result.returncode == 1 and "no token with id ffffffffffff" in result.stderr


def test_default_lifetimes_and_never(server):
    def expires(role: str, *extra: str) -> str:
        server.ok("admin", "token", "create", "--user", f"life-{role}-{len(extra)}", "--group", "g", "--vo", "lhcb",
                  "--role", role, *extra)
        [row] = [r for r in server.json("admin", "token", "list") if r["User"] == f"life-{role}-{len(extra)}"]
        return row["Expires"]

    from datetime import datetime, timezone

    def hours_left(text: str) -> float:
        return (datetime.fromisoformat(text) - datetime.now(timezone.utc)).total_seconds() / 3600

    assert 4 * 24 * 7 < hours_left(expires("user")) <= 30 * 24           # token_lifetime: 30 days
    assert 3.9 < hours_left(expires("pilot")) <= 4                         # pilot_token_lifetime: 4 hours
    assert expires("user", "--lifetime", "never") == "never"
    result = server("admin", "token", "create", "--user", "x", "--group", "g", "--vo", "v", "--role", "user",
                    "--lifetime", "soon")
    assert result.returncode == 1 and "not a duration: 'soon'" in result.stderr


def test_the_token_file_is_0600_in_a_0700_directory_never_wider(tmp_path):
    directory = tmp_path / "home" / ".config" / "wms"
    old = os.umask(0)
    try:
        path = write_token_file("wms_first", directory / "token")
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and path.read_text() == "wms_first\n"
        # A directory and file left wide by an older version are narrowed, the file replaced whole.
        os.chmod(directory, 0o755)
        os.chmod(path, 0o644)
        write_token_file("wms_second", path)
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and path.read_text() == "wms_second\n"
        assert sorted(p.name for p in directory.iterdir()) == ["token"]
    finally:
        os.umask(old)


def test_the_file_is_created_with_its_mode(tmp_path, monkeypatch):
    """os.open gets 0600 itself: there is no moment when the file is wider."""
    opened: list[int] = []
    real_open = os.open

    def spy(path, flags, mode=0o777, *args, **kw):
        opened.append(mode)
        return real_open(path, flags, mode, *args, **kw)

    monkeypatch.setattr(os, "open", spy)
    write_token_file("wms_x", tmp_path / "d" / "token")
    assert opened == [0o600]


def test_the_server_binds_loopback_and_believes_forwarded_headers_from_the_proxy_only(tmp_path, monkeypatch):
    import uvicorn

    from tests.helpers import CONFIG_DIR
    import wms.server
    from wms.db.migrate import upgrade
    from wms.server import serve

    url = f"sqlite:///{tmp_path / 'wms.db'}"
    upgrade(url)
    monkeypatch.setenv("WMS_DATABASE_URL", url)
    seen: dict = {}

    def bind(host: str, port: int) -> socket.socket:      # the default's port may be taken here
        seen.update(host=host, port=port)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        return sock

    def run(self: uvicorn.Server, sockets: list) -> None:
        seen.update(proxy_headers=self.config.proxy_headers, forwarded_allow_ips=self.config.forwarded_allow_ips)
        self.started = True

    monkeypatch.setattr(wms.server, "listening_socket", bind)
    monkeypatch.setattr(uvicorn.Server, "run", run)
    assert serve(str(CONFIG_DIR), None, embedded=False) == 0
    assert (seen["host"], seen["port"]) == ("127.0.0.1", 8080)
    assert seen["proxy_headers"] is True and seen["forwarded_allow_ips"] == "127.0.0.1"
    unit = (CONFIG_DIR.parent / "deploy" / "systemd" / "wms-server.service").read_text()
    assert "--bind 127.0.0.1:8080" in unit and "0.0.0.0" not in unit


def test_rotating_the_job_token_key_ends_the_job_tokens_handed_out(server, tokens, tmp_path):
    jdl = tmp_path / "hello.jdl"
    jdl.write_text('[ Executable = "/bin/echo"; Arguments = "hello"; CPUTime = 300; ]')
    [job_id] = [int(i) for i in server.ok("submit", str(jdl), token=tokens["roland"]).split()]
    with server.api(tokens["rotate-pilot"]) as pilot:
        answer = pilot.post("/matcher/request-job", json={
            "site": "DIRAC.Local.ch", "ce": "localhost", "queue": "default", "host": "wn01",
            "pilot_id": "rotate-pilot", "platform": "x86_64-el9", "cpu_time_left": 100000}).json()
    assert answer["match"] and answer["job"]["JobID"] == job_id, answer
    with server.api(answer["job"]["JobToken"]) as payload:
        assert payload.get(f"/jobs/{job_id}").status_code == 200
        rotated = server.json("admin", "job-token-key", "rotate")
        assert rotated["Version"] >= 2
        # Every server process looks for a new key at least once a second:
        # a second after the rotation the old key is refused everywhere.
        time.sleep(KEY_SYNC_INTERVAL)
        response = payload.get(f"/jobs/{job_id}")
        assert (response.status_code, response.json()["detail"]) == (401, "invalid job token (bad signature)")
    line = server.ok("admin", "job-token-key", "rotate").strip()
    assert line.startswith(f"job token key rotated (version {rotated['Version'] + 1})")
