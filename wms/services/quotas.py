"""Resource quota sets at run time: stored, shared by every server
process, compiled for the Matcher, changed by qconf, shown by qquota
(specs/001; sge_resource_quota(5), qconf(1), qquota(1)).

* The rule sets live in the database as one canonical text
  (``cluster_objects`` kind ``rqs``). Until the first change, the sets of
  ``config/rqs/*.rqs`` apply (INTERFACE.md: loaded at first start).
* Each process looks at the stored version at most once a second
  (``sync``) and recompiles when it, the complex table or the group
  definitions changed. Compiling resolves every @group once, so a match
  request never resolves membership.
* A change is a read-modify-write guarded by the version: two
  administrators changing rule sets at once both succeed, one after the
  other, and nothing half-stored is ever seen.
* Only operators and managers change rule sets.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Connection

from wms.core import complexes as cx_rules
from wms.core.complexes import ComplexTable
from wms.core.errors import ConfigError, Conflict, Forbidden, InvalidInput, NotFound
from wms.core.limits import decode_utf8
from wms.core.identity import Identity
from wms.core.match.quotas import QuotaRequest
from wms.core.quotas.evaluate import limit_value, parse_scope
from wms.core.quotas.filters import CompiledFilter, Groups
from wms.core.quotas.model import FILTER_KINDS, Filter, Rule, RuleSet
from wms.core.quotas.parser import QuotaSyntaxError, parse_rule_sets
from wms.core.quotas.render import filter_text, render_sets
from wms.db import cluster_objects as objects_db
from wms.db import matching as match_db
from wms.db import quotas as quotas_db
from wms.db.engine import reading
from wms.services import quota_usage
from wms.services import stored_objects
from wms.services import access
from wms.services.access import ADMINS
from wms.services.retry import run_in_transaction
from wms.services.caches import ConfiguredRuleSets, QuotaState
from wms.services.runtime import Runtime

KIND = "rqs"
SYNC_INTERVAL = 1.0
TEMPLATE_NAME = "template"
TEMPLATE = "{\n   name         template\n   description  \"\"\n   enabled      true\n}\n"

MSG_EXISTS = 'resource quota set "{name}" already exists'
MSG_MISSING = 'resource quota set "{name}" does not exist'
MSG_MISMATCH = 'resource quota set "{name}" does not match rule set definition'
MSG_TEMPLATE = 'resource quota set name "template" is not valid'
MSG_NO_RULE = 'resource quota rule "{target}" does not exist'


# ---------------------------------------------------------------- reading
def read_rule_set_files(runtime: Runtime, table: ComplexTable) -> list[RuleSet]:
    """The sets of ``<config>/rqs/*.rqs`` (file order, then set order); a bad file is a ConfigError.

    Start-up checks them against the configuration's own complex table,
    before the database is reached."""
    sets: list[RuleSet] = []
    directory = Path(runtime.config.directory) / "rqs"
    for path in sorted(directory.glob("*.rqs")) if directory.is_dir() else []:
        try:
            text = decode_utf8(path.read_bytes(), str(path))
            found = parse_rule_sets(text, table, source=str(path))
        except InvalidInput as exc:  # QuotaSyntaxError, or not UTF-8
            raise ConfigError(exc.message, where=exc.where) from None
        for rule_set in found:
            if any(s.name == rule_set.name for s in sets):
                raise ConfigError(f"resource quota set {rule_set.name!r} is defined twice", where=str(path))
            sets.append(rule_set)
    return sets


def initial_rule_sets(runtime: Runtime) -> list[RuleSet]:
    """The configuration's sets, read against the complex table in force, until a manager stores others."""
    table = runtime.read_stored_complexes()     # first: adopting a newer table drops the sets read with the old
    cached = runtime.caches.initial_rule_sets
    if cached is None:
        cached = runtime.caches.initial_rule_sets = ConfiguredRuleSets(
            table, tuple(read_rule_set_files(runtime, table)))
    return list(cached.sets)


def _parse_stored(runtime: Runtime, text: str) -> list[RuleSet]:
    return parse_rule_sets(text, None, source="stored resource quota sets")


def sync(runtime: Runtime) -> QuotaState:
    """The current rule sets of this process, re-read at most once per SYNC_INTERVAL.

    The state is replaced whole (never filled in place), so concurrent
    requests of one process see either the old or the new rule sets.
    """
    runtime.read_stored_complexes()     # first: adopting a newer table drops the state compiled with the old
    row = stored_objects.changed(runtime, KIND, SYNC_INTERVAL)
    if row is not None:
        return _adopt(runtime, row["version"], _parse_stored(runtime, row["text"]))
    state = runtime.caches.quota_state
    if state is None:       # never stored: the sets of config/rqs/ apply
        return _adopt(runtime, 0, initial_rule_sets(runtime))
    return state


def _adopt(runtime: Runtime, version: int, sets: list[RuleSet]) -> QuotaState:
    state = QuotaState(version, tuple(sets), runtime.read_stored_complexes(), groups(runtime))
    runtime.caches.quota_state = state
    stored_objects.adopted(runtime, KIND, version)
    return state


def rule_sets(runtime: Runtime) -> list[RuleSet]:
    return list(sync(runtime).sets)


def groups(runtime: Runtime) -> Groups:
    cluster = runtime.config.cluster
    return Groups(usersets=cluster.usersets, hostgroups=cluster.hostgroups)


def for_request(runtime: Runtime, usage: dict[tuple[str, str], float] | None = None) -> QuotaRequest | None:
    rules = sync(runtime).rules
    return QuotaRequest(rules, usage) if rules is not None else None


def for_claim(runtime: Runtime) -> tuple[int, QuotaRequest | None]:
    """The version of the sets this process applies, and them compiled for a pilot's request.

    The claim names the version: it is refused if the stored sets are newer.
    """
    state = sync(runtime)
    return state.version, QuotaRequest(state.rules) if state.rules is not None else None


def adopt_now(runtime: Runtime) -> None:
    """Read the stored sets at the next use, whatever the interval (a claim found them changed)."""
    stored_objects.look_again(runtime, KIND)


# ---------------------------------------------------------------- changing
def _check_admin(identity: Identity) -> None:
    if identity.role not in ADMINS:
        raise Forbidden(f"{identity.user} must be manager or operator to change resource quota sets")


def _who(identity: Identity) -> str:
    return f"{identity.user}@{socket.gethostname()}"


def _change(runtime: Runtime, identity: Identity, now: datetime,
            change: Callable[[list[RuleSet]], tuple[list[RuleSet], list[str]]]) -> list[str]:
    """Apply ``change`` to the stored sets, guarded by the version; retried if another change came first."""
    _check_admin(identity)
    # The row the usage guard locks on MariaDB (migration 0009 creates it).
    run_in_transaction(runtime.engine, lambda conn: objects_db.ensure(conn, KIND, identity.user, now))
    for _ in range(20):
        with reading(runtime.engine) as conn:
            version = objects_db.version(conn, KIND)
            row = objects_db.get_object(conn, KIND) if version else None
        current = _parse_stored(runtime, row["text"]) if row else initial_rule_sets(runtime)
        new, messages = change(list(current))
        text = render_sets(new)
        # What is stored must read back with the current complexes.
        _validated(runtime, text, "resulting resource quota sets")
        stored = run_in_transaction(runtime.engine, lambda conn: _store(runtime, conn, new, text, version, identity, now))
        if stored:
            _adopt(runtime, version + 1, new)
            return messages
    raise Conflict("resource quota sets are being changed by others; try again")


def _store(runtime: Runtime, conn: Connection, sets: list[RuleSet], text: str, version: int, identity: Identity,
           now: datetime) -> bool:
    """Store the new sets if the stored ones are still ``version``, and recount
    what running jobs hold under them, in one transaction (quota_usage.py)."""
    match_db.lock_usage_for_recount(conn)
    if not objects_db.replace_if_version(conn, KIND, text, version, identity.user, now):
        return False
    quota_usage.recount(runtime, conn, sets, groups(runtime))
    return True


def _validated(runtime: Runtime, text: str, source: str) -> list[RuleSet]:
    return parse_rule_sets(text, runtime.read_stored_complexes(), source=source)


def _names(sets: Sequence[RuleSet]) -> list[str]:
    return [s.name for s in sets]


def _index(sets: Sequence[RuleSet], name: str) -> int | None:
    return next((i for i, s in enumerate(sets) if s.name == name), None)


def add(runtime: Runtime, identity: Identity, text: str, now: datetime, source: str = "rule set file") -> list[str]:
    """qconf -arqs / -Arqs: add every set of ``text``; refused whole if one exists or is invalid."""
    _check_admin(identity)
    new_sets = _validated(runtime, text, source)
    if not new_sets:
        raise InvalidInput("no resource quota set in the input")
    for rule_set in new_sets:
        if rule_set.name == TEMPLATE_NAME:
            raise InvalidInput(MSG_TEMPLATE)

    def change(sets: list[RuleSet]) -> tuple[list[RuleSet], list[str]]:
        for rule_set in new_sets:
            if _index(sets, rule_set.name) is not None:
                raise Conflict(MSG_EXISTS.format(name=rule_set.name))
        return sets + new_sets, [f'{_who(identity)} added "{s.name}" to resource quota set list' for s in new_sets]

    return _change(runtime, identity, now, change)


def modify(runtime: Runtime, identity: Identity, text: str, now: datetime, name: str | None = None,
           source: str = "rule set file") -> list[str]:
    """qconf -mrqs / -Mrqs: with ``name``, replace that set (the text must define it alone);
    without, the text becomes the whole list."""
    _check_admin(identity)
    new_sets = _validated(runtime, text, source)
    for rule_set in new_sets:
        if rule_set.name == TEMPLATE_NAME:
            raise InvalidInput(MSG_TEMPLATE)

    def change(sets: list[RuleSet]) -> tuple[list[RuleSet], list[str]]:
        if name is None:
            return new_sets, [f"{_who(identity)} modified resource quota set list"]
        if len(new_sets) != 1 or new_sets[0].name != name:
            raise InvalidInput(MSG_MISMATCH.format(name=name))
        index = _index(sets, name)
        if index is None:
            raise NotFound(MSG_MISSING.format(name=name))
        sets[index] = new_sets[0]
        return sets, [f'{_who(identity)} modified "{name}" in resource quota set list']

    return _change(runtime, identity, now, change)


def delete(runtime: Runtime, identity: Identity, names: Sequence[str], now: datetime) -> list[str]:
    """qconf -drqs: the named sets, or all of them; refused whole if one does not exist."""

    def change(sets: list[RuleSet]) -> tuple[list[RuleSet], list[str]]:
        if not names:
            return [], [f"{_who(identity)} removed resource quota set list"]
        for name in names:
            if _index(sets, name) is None:
                raise NotFound(f"denied: {MSG_MISSING.format(name=name)}")
        return ([s for s in sets if s.name not in names],
                [f'{_who(identity)} removed "{name}" from resource quota set list' for name in names])

    return _change(runtime, identity, now, change)


def show(runtime: Runtime, names: Sequence[str] = ()) -> str:
    """qconf -srqs: the named sets (all without names) in canonical form."""
    sets = rule_sets(runtime)
    if not names:
        if not sets:
            raise NotFound("no resource quota set list defined")
        return render_sets(sets)
    chosen = []
    for name in names:
        index = _index(sets, name)
        if index is None:
            raise NotFound(MSG_MISSING.format(name=name))
        chosen.append(sets[index])
    return render_sets(chosen)


def names(runtime: Runtime) -> list[str]:
    return _names(rule_sets(runtime))


def template(name: str | None) -> str:
    """What ``qconf -arqs [name]`` opens in the editor."""
    return TEMPLATE if name is None else TEMPLATE.replace("template", name, 1)


# ---------------------------------------------------------------- -aattr and friends
ATTRIBUTE_OPERATIONS = {"aattr": "add", "Aattr": "add", "dattr": "delete", "Dattr": "delete",
                        "mattr": "modify", "Mattr": "modify", "rattr": "replace", "Rattr": "replace"}
# The list named in the success message, switch by switch, as the specification's transcripts show it.
LIST_WORD = {"aattr": "rqs", "dattr": "rqs"}
SET_ATTRIBUTES = ("name", "enabled", "description")


def change_attribute(runtime: Runtime, identity: Identity, switch: str, attribute: str, value: str, target: str,
                     now: datetime) -> list[str]:
    """qconf -aattr/-dattr/-mattr/-rattr (and the file forms) on ``resource_quota``.

    ``target`` is ``set`` or ``set/rule`` (the rule's name or number).
    """
    operation = ATTRIBUTE_OPERATIONS.get(switch)
    if operation is None:
        raise InvalidInput(f"unknown switch -{switch}")
    word = LIST_WORD.get(switch, "resource_quota")
    set_name, slash, rule_ref = target.partition("/")

    def change(sets: list[RuleSet]) -> tuple[list[RuleSet], list[str]]:
        index = _index(sets, set_name)
        if index is None:
            raise NotFound(MSG_MISSING.format(name=set_name))
        rule_set = sets[index]
        if not slash:
            sets[index], label = _set_attribute(sets, rule_set, operation, attribute, value), set_name
            return sets, [f'{_who(identity)} modified "{label}" in {word} list']
        rule_index = rule_set.find_rule(rule_ref)
        if rule_index is None:
            raise NotFound(MSG_NO_RULE.format(target=target))
        label = f"{set_name}/{rule_index + 1}"
        rule, notes = _rule_attribute(runtime, rule_set.rules[rule_index], operation, attribute, value, label)
        sets[index] = rule_set.with_rule(rule_index, rule)
        return sets, notes or [f'{_who(identity)} modified "{label}" in {word} list']

    return _change(runtime, identity, now, change)


def _set_attribute(sets: list[RuleSet], rule_set: RuleSet, operation: str, attribute: str, value: str) -> RuleSet:
    if attribute == "limit" or attribute in FILTER_KINDS:
        raise InvalidInput(f'"{attribute}" belongs to a rule: address it as "{rule_set.name}/<rule>"')
    if attribute not in SET_ATTRIBUTES:
        raise InvalidInput(f'unknown attribute "{attribute}" of "resource_quota" (name, enabled, description, limit)')
    if operation in ("add", "delete"):
        raise InvalidInput(f'"{attribute}" is not a list: use -mattr or -rattr')
    if attribute == "enabled":
        word = value.strip().lower()
        if word not in ("true", "false", "1", "0"):
            raise InvalidInput(f"enabled must be true or false, got {value!r}")
        return replace(rule_set, enabled=word in ("true", "1"))
    if attribute == "description":
        text = value.strip()
        return replace(rule_set, description=text[1:-1] if text.startswith('"') and text.endswith('"') else text)
    if _index(sets, value) is not None:
        raise Conflict(MSG_EXISTS.format(name=value))
    if value == TEMPLATE_NAME:
        raise InvalidInput(MSG_TEMPLATE)
    return replace(rule_set, name=value.strip())


def _rule_attribute(runtime: Runtime, rule: Rule, operation: str, attribute: str, value: str,
                    label: str) -> tuple[Rule, list[str]]:
    """A rule with one attribute changed, read through the language's own parser."""
    if attribute == "limit":
        return _rule_limits(runtime, rule, operation, value, label)
    if attribute not in (*FILTER_KINDS, "name"):
        raise InvalidInput(f'unknown attribute "{attribute}" of "resource_quota" (name, enabled, description, limit)')
    if operation in ("add", "delete"):
        raise InvalidInput(f'use -mattr or -rattr to change "{attribute}" of "{label}"')
    parsed = _parse_rule(runtime, f"limit {attribute} {value} to slots=0", label)
    return replace(rule, **{attribute: getattr(parsed, attribute)}), []


def _parse_rule(runtime: Runtime, line: str, label: str) -> Rule:
    text = "{\n name x\n " + line + "\n}\n"
    try:
        return parse_rule_sets(text, runtime.read_stored_complexes(), source=label)[0].rules[0]
    except QuotaSyntaxError as exc:
        raise InvalidInput(exc.message, where=label) from None


def _rule_limits(runtime: Runtime, rule: Rule, operation: str, value: str, label: str) -> tuple[Rule, list[str]]:
    hosts = f"hosts {filter_text(rule.hosts)} " if rule.hosts is not None else ""
    given = _parse_rule(runtime, f"limit {hosts}to {value.replace(' ', '')}", label).limits
    limits = list(rule.limits)
    notes: list[str] = []
    for limit in given:
        found = next((i for i, lim in enumerate(limits) if lim.resource == limit.resource), None)
        if operation == "add":
            if found is not None:
                raise Conflict(f'No modification because "{limit.resource}" already exists in "limit" of "{label}"')
            limits.append(limit)
        elif operation == "delete":
            if found is None:
                raise NotFound(f'"{limit.resource}" does not exist in "limit" of "resource_quota"')
            del limits[found]
        elif operation == "modify":
            if found is None:
                notes.append(f'Unable to find "{limit.resource}" in "limit" of "resource_quota" - Adding new element.')
                limits.append(limit)
            else:
                limits[found] = limit
    if operation == "replace":
        limits = list(given)
    if not limits:
        raise InvalidInput(f'"{label}" would have no limit left: a rule needs at least one')
    return replace(rule, limits=tuple(limits)), notes


# ---------------------------------------------------------------- qquota
SELECTION_KINDS = {"users": "users", "projects": "projects", "pes": "pes", "queues": "queues", "hosts": "hosts"}
XML_NAMES = {"users": "user", "projects": "project", "pes": "pe", "queues": "queue", "hosts": "host"}


def usage_report(runtime: Runtime, identity: Identity, selections: dict[str, list[str]],
                 resources: Sequence[str] = ()) -> list[dict[str, Any]]:
    """qquota: one row per rule instance and resource in use, and per static non-consumable limit.

    ``selections`` maps users/projects/pes/queues/hosts to the names asked
    for (wildcards allowed); users defaults to the caller.
    """
    table = runtime.read_stored_complexes()
    sets = [s for s in rule_sets(runtime) if s.enabled]
    wanted_resources = set()
    for name in resources:
        cx = table.get(name)
        if cx is None:
            raise InvalidInput(cx_rules.REASON_UNKNOWN_RESOURCE.format(name=name))
        wanted_resources.add(cx.name)
    selections = {k: v for k, v in selections.items() if v}
    selections.setdefault("users", [identity.user])
    if not access.may_see_usage_of(identity, selections["users"], access.policy(runtime)):
        raise Forbidden("users see only their own quota usage here (visibility.quota_usage is owner): "
                        f"ask for -u {identity.user}, or leave -u out")
    with reading(runtime.engine) as conn:
        in_use = quotas_db.quota_usage(conn)
    by_label: dict[str, list[tuple[str, str, float]]] = {}
    for scope, resource, used in in_use:
        parsed = parse_scope(scope)
        if parsed is not None:
            by_label.setdefault(parsed[0], []).append((parsed[1], resource, used))
    grp = groups(runtime)
    rows: list[dict[str, Any]] = []
    for rule_set in sets:
        for index, rule in enumerate(rule_set.rules):
            label = rule_set.label(index)
            compiled_filters = {kind: CompiledFilter(kind, flt, grp) for kind in FILTER_KINDS
                                if (flt := rule.filter(kind)) is not None}
            entries = [(instance, resource, used) for instance, resource, used in by_label.get(label, [])]
            for limit in rule.limits:
                cx = table.get(limit.resource)
                if cx is not None and not cx.is_consumable and not limit.dynamic:
                    entries.append(("*", limit.resource, None))
            for instance, resource, used in sorted(entries, key=lambda e: (e[0], e[1])):
                limit = rule.limit(resource)
                if limit is None or (wanted_resources and resource not in wanted_resources):
                    continue
                members = dict(part.split("=", 1) for part in instance.split(",") if "=" in part)
                if not _selected(selections, compiled_filters, members):
                    continue
                rows.append(_row(runtime, table, label, rule, limit, members, used))
    return rows


def _selected(selections: dict[str, list[str]], filters: dict[str, CompiledFilter], members: dict[str, str]) -> bool:
    from wms.core.patterns import match_pattern

    for kind, wanted in selections.items():
        if kind in members:
            if not any(match_pattern(w, members[kind]) for w in wanted):
                return False
        elif kind in filters:
            if not any(w == "*" or filters[kind].matches(w) for w in wanted):
                return False
    return True


def _row(runtime: Runtime, table: ComplexTable, label: str, rule: Rule, limit: Any, members: dict[str, str],
         used: float | None) -> dict[str, Any]:
    cx = table.resolve(limit.resource)
    host = members.get("hosts")

    def host_value(name: str) -> Any:
        from wms.core.match.levels import host_configuration
        values = host_configuration(runtime.config.cluster, host) if host else {}
        raw = values.get(name)
        ref = table.get(name)
        return cx_rules.parse_value(ref, raw) if raw is not None and ref is not None else None

    value = limit_value(table, limit, host_value)
    shown_limit = cx_rules.format_value(cx, value) if value is not None else limit.value
    if used is None:
        text = f"{cx.name}={shown_limit}"
    else:
        text = f"{cx.name}={cx_rules.format_value(cx, used)}/{shown_limit}"
    filters: list[str] = []
    xml: dict[str, list[str]] = {}
    for kind in FILTER_KINDS:
        flt: Filter | None = rule.filter(kind)
        if flt is None:
            continue
        if kind in members:
            filters.append(f"{kind} {members[kind]}")
            xml.setdefault(XML_NAMES[kind], []).append(members[kind])
        else:
            filters.append(f"{kind} {filter_text(flt)}")
            xml.setdefault(XML_NAMES[kind], []).extend(flt.scope)
            xml.setdefault("x" + XML_NAMES[kind], []).extend(flt.xscope)
    return {"rule": label, "limit": text, "filter": " ".join(filters) or "-", "resource": cx.name,
            "limit_value": shown_limit, "used": None if used is None else cx_rules.format_value(cx, used),
            "filters": {k: v for k, v in xml.items() if v}}
