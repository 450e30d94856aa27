"""`make demo`'s preparation: one place for every log, emptied at each run,
and a word that every site is simulated on this machine."""

from __future__ import annotations

from wms import demo
from wms.config import load_config


def test_the_demo_starts_clean_with_every_log_in_var_demo(tmp_path, monkeypatch):
    var = tmp_path / "var" / "demo"
    monkeypatch.setattr(demo, "VAR", var)
    monkeypatch.setattr(demo, "PILOT_LOGS", var / "pilots")
    (var / "pilots").mkdir(parents=True)
    (var / "pilots" / "old-pilot.log").write_text("from the last run\n")
    (var / "wms.db").write_text("")
    demo.prepare()
    assert list((var / "pilots").iterdir()) == [] and not (var / "wms.db").exists()
    settings = load_config(var / "config").settings
    assert settings.pilot_log_dir == str(var / "pilots")
    assert settings.agent_period("site_director") == 3


def test_the_demo_says_every_site_is_simulated_here():
    assert "simulated on this machine" in demo.SIMULATED
    assert "architecture" in demo.SIMULATED and "CPU model" in demo.SIMULATED
