"""Scenario YAML with YAML 1.2 core-schema scalars and no duplicate keys.

PyYAML follows YAML 1.1, where ``010`` is octal 8, ``1:30`` is sexagesimal 90, ``yes``/``on``/``no``
are booleans and ``2024-01-01`` is a date, while ``1e-3`` is a string. A scenario means none of
that, so scenarios are read with the YAML 1.2 core schema instead:

* null: ``null``, ``Null``, ``NULL``, ``~`` or nothing;
* booleans: ``true``/``false`` (also ``True``, ``TRUE``, ...) and nothing else;
* integers: decimal ``[-+]?[0-9]+`` (``010`` is ten), ``0o17`` octal, ``0x1F`` hexadecimal;
* floats: ``1.5``, ``1e-3``, ``.5``, ``-2.``, ``.inf``, ``.nan`` (later rejected as non-finite);
* everything else is a string (``yes``, ``1:30``, ``2024-01-01``, ``1_000``).

A key that appears twice in one mapping is an error (:class:`DuplicateKeyError`, naming the key
and its line), instead of PyYAML's silent "last one wins".
"""

from __future__ import annotations

import re
from typing import Any

import yaml

_RESOLVERS: list[tuple[str, re.Pattern[str], str]] = [
    ("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), "~nN\0"),
    ("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), "tTfF"),
    ("tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), "-+0123456789"),
    ("tag:yaml.org,2002:float",
     re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
     "-+.0123456789"),
]


class DuplicateKeyError(yaml.MarkedYAMLError):
    """A mapping holds the same key twice."""

    def __init__(self, key: Any, mark: yaml.Mark | None) -> None:
        super().__init__(problem=f"duplicate key {key!r}", problem_mark=mark)
        self.key = key


def _install(cls: type) -> None:
    """Replace the class's implicit scalar resolvers by the YAML 1.2 core schema's."""
    cls.yaml_implicit_resolvers = {}
    for tag, regexp, first in _RESOLVERS:
        for ch in first:
            key = None if ch == "\0" else ch
            cls.yaml_implicit_resolvers.setdefault(key, []).append((tag, regexp))
    cls.yaml_implicit_resolvers.setdefault(None, []).append(("tag:yaml.org,2002:null", _RESOLVERS[0][1]))


class Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core-schema scalars that refuses duplicate keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
            seen: set = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:  # unhashable key: the base constructor reports it
                    continue
                if duplicate:
                    raise DuplicateKeyError(key, key_node.start_mark)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        text = str(self.construct_scalar(node))
        base = {"0o": 8, "0x": 16}.get(text[:2], 10)
        try:
            return int(text[2:] if base != 10 else text, base)
        except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
            raise yaml.constructor.ConstructorError(None, None, "integer too long", node.start_mark) from None

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        text = str(self.construct_scalar(node)).lower()
        if text.endswith(".inf"):
            return float("-inf") if text.startswith("-") else float("inf")
        if text == ".nan":
            return float("nan")
        return float(text)


_install(Loader)
Loader.add_constructor("tag:yaml.org,2002:int", Loader.construct_yaml_int)
Loader.add_constructor("tag:yaml.org,2002:float", Loader.construct_yaml_float)


class Dumper(yaml.SafeDumper):
    """Writes what :class:`Loader` (and PyYAML's own YAML 1.1 ``safe_load``) read back unchanged:
    a string that either schema would read as something else is quoted."""

    def represent_str(self, data: str) -> yaml.ScalarNode:
        node = super().represent_str(data)
        as_12 = Loader.resolve(Loader, yaml.ScalarNode, data, (True, False))
        if node.style is None and as_12 != "tag:yaml.org,2002:str":
            node.style = "'"
        return node


Dumper.add_representer(str, Dumper.represent_str)


def load(text: str) -> Any:
    """Parse one YAML document with :class:`Loader`."""
    return yaml.load(text, Loader=Loader)  # Loader is a SafeLoader


def dump(data: Any) -> str:
    return yaml.dump(data, Dumper=Dumper, sort_keys=False, allow_unicode=True)
