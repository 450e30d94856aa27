"""Reading one YAML configuration file, keeping the line of every key.

INTERFACE.md ("Configuration directory"): a configuration error names the
file, the line and what is wrong. So we compose the YAML node tree, build
the plain data ourselves and remember, for every key path, the line where
it starts. A mapping that repeats a key is an error (PyYAML would silently
keep the last one).

Scalars follow the YAML 1.2 core schema rather than PyYAML's YAML 1.1
default, on purpose: only ``true``/``false`` are booleans (``YES``, ``no``,
``on`` stay strings, so ``Country: no`` is Norway and ``requestable: YES``
reads as Grid Engine prints it), ``1:30:00`` stays a string (no base-60
numbers) and dates stay strings.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from wms.core.errors import ConfigError

KeyPath = tuple[Any, ...]


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core-schema scalar resolution."""


_Loader.yaml_implicit_resolvers = {}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
    list("-+0123456789"),
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
)
_Loader.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), ["<"])


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = loader.construct_scalar(node)
    if text.startswith(("0o", "0x")):
        return int(text, 0)
    return int(text, 10)  # "010" is ten, as in YAML 1.2


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


class _Builder:
    def __init__(self, loader: _Loader, where: str) -> None:
        self.loader = loader
        self.where = where
        self.lines: dict[KeyPath, int] = {}

    def build(self, node: yaml.Node, path: KeyPath, line: int) -> Any:
        self.lines.setdefault(path, line)
        if isinstance(node, yaml.MappingNode):
            own = sum(1 for key_node, _ in node.value if key_node.tag != "tag:yaml.org,2002:merge")
            self.loader.flatten_mapping(node)  # resolves "<<" merge keys, placed first
            merged_count = len(node.value) - own
            result: dict[Any, Any] = {}
            first_line: dict[Any, int] = {}
            for position, (key_node, value_node) in enumerate(node.value):
                if position < merged_count:  # merged in: the mapping's own keys override it
                    key = self.loader.construct_object(key_node, deep=True)
                    result[key] = self.build(value_node, path + (key,), _line(key_node))
                    continue
                if not isinstance(key_node, yaml.ScalarNode):
                    raise ConfigError(
                        "a key must be a plain value, not a list or mapping",
                        where=f"{self.where}:{_line(key_node)}",
                    )
                key = self.loader.construct_object(key_node, deep=True)
                key_line = _line(key_node)
                if key in first_line:
                    raise ConfigError(
                        f"{_dotted(path + (key,))}: duplicate key {key!r} "
                        f"(first given at line {first_line[key]})",
                        where=f"{self.where}:{key_line}",
                    )
                first_line[key] = key_line
                if key in result:  # overrides a merged-in key: point at this line
                    self.lines.pop(path + (key,), None)
                result[key] = self.build(value_node, path + (key,), key_line)
            return result
        if isinstance(node, yaml.SequenceNode):
            return [
                self.build(item, path + (index,), _line(item))
                for index, item in enumerate(node.value)
            ]
        return self.loader.construct_object(node, deep=True)


def _dotted(path: KeyPath) -> str:
    """``("complexes", 0, "name")`` -> ``complexes[0].name``."""
    out = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


dotted_path = _dotted


def parse_yaml_with_lines(text: str, where: str) -> tuple[Any, dict[KeyPath, int]]:
    """Parse YAML text; ``where`` names it in errors. See load_yaml_with_lines."""
    loader = _Loader(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else 1
            problem = exc.problem or exc.context or "invalid YAML"
            context = f" ({exc.context})" if exc.context and exc.problem else ""
            raise ConfigError(f"YAML syntax error: {problem}{context}", where=f"{where}:{line}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"YAML syntax error: {exc}", where=f"{where}:1") from None
        if node is None:
            return None, {(): 1}
        builder = _Builder(loader, where)
        try:
            data = builder.build(node, (), _line(node))
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else 1
            raise ConfigError(f"YAML error: {exc.problem or exc}", where=f"{where}:{line}") from None
        except TypeError as exc:  # e.g. an unhashable key
            raise ConfigError(f"YAML error: {exc}", where=f"{where}:{_line(node)}") from None
        return data, builder.lines
    finally:
        loader.dispose()


def load_yaml_with_lines(path: str | Path) -> tuple[Any, dict[KeyPath, int]]:
    """Read a YAML file: ``(data, lines)`` where ``lines`` maps each key path
    (a tuple of keys and list indices; ``()`` is the document) to the
    1-based line where it starts. An empty file gives ``None``.

    Raises ConfigError naming ``file:line`` for unreadable files, syntax
    errors and duplicate keys.
    """
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("file not found", where=where) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the file: {exc}", where=where) from None
    return parse_yaml_with_lines(text, where)


def line_of(lines: dict[KeyPath, int], path: KeyPath) -> int:
    """The line of the longest prefix of ``path`` that the file holds."""
    path = tuple(path)
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return lines.get((), 1)
