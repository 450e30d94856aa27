"""An error no command reports itself is still one line on stderr and
exit status 1, never a traceback."""

from __future__ import annotations

from sqlalchemy.exc import OperationalError

from wms.cli import main as cli


def test_an_unexpected_error_is_one_line(monkeypatch, capsys):
    def broken(args):
        raise RuntimeError("the disk is on fire\nsecond line")

    monkeypatch.setattr(cli, "cmd_jobs", broken)
    assert cli.main(["jobs"]) == 1
    assert capsys.readouterr().err == "wms jobs: RuntimeError: the disk is on fire\n"


def test_a_database_error_names_the_database_without_its_password(monkeypatch, capsys):
    def unreachable(args):
        args.database_url = "postgresql://wms:hunter2@db.example.org/wms"
        raise OperationalError("SELECT 1", {}, Exception("connection refused\n\tIs the server running?"))

    monkeypatch.setattr(cli, "cmd_db_upgrade", unreachable)
    assert cli.main(["db", "upgrade"]) == 1
    assert capsys.readouterr().err == "wms db: database postgresql://wms:***@db.example.org/wms: connection refused\n"
