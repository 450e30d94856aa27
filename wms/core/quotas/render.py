"""The canonical text of rule sets: how they are stored and shown (qconf -srqs).

Whatever order an administrator wrote the filters in, a rule is printed
as ``limit [name N] [users ..] [projects ..] [pes ..] [queues ..] [hosts ..]
to r=v,..`` (specs/001: "the rules will be ordered automatically to a
human readable form"); in a filter the names come first, then the
excluded ones; attributes are aligned as sge_resource_quota(5) shows them.
"""

from __future__ import annotations

from collections.abc import Iterable

from wms.core.quotas.model import FILTER_KINDS, Filter, Rule, RuleSet

WIDTH = 13


def filter_text(flt: Filter) -> str:
    text = ",".join([*flt.scope, *(f"!{name}" for name in flt.xscope)])
    return f"{{{text}}}" if flt.expand else text


def limits_text(rule: Rule) -> str:
    return ",".join(f"{lim.resource}={lim.value}" for lim in rule.limits)


def rule_text(rule: Rule) -> str:
    parts = [f"name {rule.name}"] if rule.name else []
    for kind in FILTER_KINDS:
        flt = rule.filter(kind)
        if flt is not None:
            parts.append(f"{kind} {filter_text(flt)}")
    parts.append(f"to {limits_text(rule)}")
    return " ".join(parts)


def render_set(rule_set: RuleSet) -> str:
    lines = ["{", f"   {'name'.ljust(WIDTH)}{rule_set.name}"]
    if rule_set.description:
        lines.append(f"   {'description'.ljust(WIDTH)}\"{rule_set.description}\"")
    lines.append(f"   {'enabled'.ljust(WIDTH)}{'true' if rule_set.enabled else 'false'}")
    lines += [f"   {'limit'.ljust(WIDTH)}{rule_text(rule)}" for rule in rule_set.rules]
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_sets(sets: Iterable[RuleSet]) -> str:
    return "".join(render_set(s) for s in sets)
