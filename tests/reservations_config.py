"""The configuration of the advance-reservation tests: the spec's cluster
(all.q on host1 and host2, user3 on the denied list)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from wms.config import Config, load_config
from wms.core.identity import Identity

SITE, CE = "SGE.Local.ch", "ce"
ALLQ = f"{SITE}/{CE}/all.q"
OTHERQ = f"{SITE}/{CE}/other.q"

USER1 = Identity(user="user1", group="lhcb_user", vo="lhcb", role="user")
USER2 = Identity(user="user2", group="lhcb_user", vo="lhcb", role="user")
USER3 = Identity(user="user3", group="lhcb_user", vo="lhcb", role="user")
MANAGER = Identity(user="admin", group="lhcb_prod", vo="lhcb", role="manager")
OPERATOR = Identity(user="oper", group="lhcb_prod", vo="lhcb", role="operator")

CLUSTER = """
complexes:
  - {name: myapp, shortcut: ma, type: INT, relop: "<=", requestable: YES, consumable: YES, default: 0, urgency: 0}
global: {complex_values: {myapp: 4}}
hosts:
  host1: {complex_values: {slots: 1}}
  host2: {complex_values: {slots: 1}}
usersets:
  arusers: [user1, admin]
  denied_users: [user3]
  staff: [user1, user2]
pes: {mpi: {slots: 16}}
users:
  user1: {group: lhcb_user, vo: lhcb}
  user2: {group: lhcb_user, vo: lhcb}
  user3: {group: lhcb_user, vo: lhcb}
"""

RESOURCES = f"""
Sites:
  {SITE}:
    CEs:
      {CE}:
        Platform: x86_64-el9
        Queues:
          all.q:
            CPUTime: 86400
            xuser_lists: [denied_users]
            qtype: BATCH
            complex_values: {{slots: 2}}
          other.q:
            CPUTime: 86400
            ckpt_list: [blcr]
            complex_values: {{slots: 4, myapp: 2}}
"""

WMS = "duration_offset: 60\nmax_advance_reservations: 0\nreservation_settle: 0\n"


def write_config(directory: Path, wms: str = WMS) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cluster.yaml").write_text(CLUSTER)
    (directory / "resources.yaml").write_text(RESOURCES)
    (directory / "wms.yaml").write_text(wms)
    (directory / "operations.yaml").write_text("Shares: {lhcb_user: 1000, lhcb_prod: 4000}\n")
    return directory


def reservation_config(directory: Path, **settings) -> Config:
    config = load_config(write_config(directory))
    if settings:
        config = dataclasses.replace(config, settings=config.settings.model_copy(update=settings))
    return config
