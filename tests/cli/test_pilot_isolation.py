"""`wms pilots` shows how each pilot isolates payloads and warns of those
without isolation; `wms admin token list` shows what each pilot token
declared (a real server on SQLite, the commands as separate processes)."""

from __future__ import annotations

NOTE = "user namespaces are not available on this node: unshare: Operation not permitted"


def declare(server, pilot_id: str, **declaration) -> None:
    with server.api(server.pilot_token(pilot_id)) as pilot:
        answer = pilot.post("/pilots/token/renew", json={"pilot_id": pilot_id, **declaration})
        assert answer.status_code == 200, answer.text


def test_pilots_without_isolation_are_marked_and_named_in_a_footer(server, tokens):
    declare(server, "hand-bare", slots=4, isolation="none", isolation_note=NOTE)
    declare(server, "hand-boxed", slots=1, isolation="apptainer")
    declare(server, "hand-quiet", slots=2)              # an older pilot: slots only
    admin = tokens["admin"]
    lines = server.ok("pilots", token=admin).splitlines()
    header = lines[0].split()
    assert header == ["PilotID", "Queue", "VO", "Backend", "State", "Isolation", "JobsRun", "Submitted",
                      "LastUpdate"]
    rows = {line.split()[0]: line for line in lines[2:] if line.startswith("hand-")}
    column = lines[0].index("Isolation")
    assert rows["hand-bare"][column:].startswith("none (!)")
    assert rows["hand-boxed"][column:].startswith("apptainer ")
    assert rows["hand-quiet"][column:].startswith("- ")
    assert "by hand" in rows["hand-bare"]
    assert lines[-1] == f"(!) 1 pilot(s) run payloads without isolation: hand-bare ({NOTE})"
    listed = {p["PilotID"]: p for p in server.json("pilots", token=admin)}
    assert {k: listed["hand-bare"][k] for k in ("Queue", "Backend", "State", "Isolation", "IsolationNote",
                                                "Warning")} == {
        "Queue": "", "Backend": "by hand", "State": "Running", "Isolation": "none", "IsolationNote": NOTE,
        "Warning": f"runs payloads without isolation: {NOTE}"}
    assert listed["hand-boxed"]["Warning"] == "" and listed["hand-quiet"]["Isolation"] == ""


def test_token_list_shows_what_each_pilot_token_declared(server, tokens):
    declare(server, "hand-listed", slots=3, isolation="bubblewrap")
    [row] = [r for r in server.json("admin", "token", "list") if r["Pilot"] == "hand-listed"]
    assert (row["Slots"], row["Isolation"]) == (3, "bubblewrap")
    header = server.ok("admin", "token", "list").splitlines()[0].split()
    assert header[:8] == ["ID", "User", "Group", "VO", "Role", "Pilot", "Slots", "Isolation"]
