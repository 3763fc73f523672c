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

A document is input and is bounded before it is built (:class:`LimitError`, naming the line): at most
``MAX_DEPTH`` levels of nesting (PyYAML composes recursively: 50,000 levels would be a
``RecursionError``), at most ``MAX_ALIASES`` aliases, and at most ``MAX_NODES`` nodes once every
alias is expanded (a "billion laughs" document of a few hundred bytes names 10^9 of them, and every
walk over the tree afterwards would take forever); a recursive alias is refused too.
"""

from __future__ import annotations

import re
from typing import Any, cast

import yaml  # type: ignore[import-untyped]  # PyYAML ships no type information (types-PyYAML not installed)

_RESOLVERS: list[tuple[str, re.Pattern[str], str]] = [
    ("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), "~nN\0"),
    ("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), "tTfF"),
    ("tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), "-+0123456789"),
    ("tag:yaml.org,2002:float",
     re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
     "-+.0123456789"),
]


class DuplicateKeyError(yaml.MarkedYAMLError):  # type: ignore[misc]  # yaml is untyped (Any)
    """A mapping holds the same key twice."""

    def __init__(self, key: Any, mark: yaml.Mark | None) -> None:
        super().__init__(problem=f"duplicate key {key!r}", problem_mark=mark)
        self.key = key


def _install(cls: Any) -> None:  # a yaml Loader class (yaml is untyped)
    """Replace the class's implicit scalar resolvers by the YAML 1.2 core schema's."""
    cls.yaml_implicit_resolvers = {}
    for tag, regexp, first in _RESOLVERS:
        for ch in first:
            key = None if ch == "\0" else ch
            cls.yaml_implicit_resolvers.setdefault(key, []).append((tag, regexp))
    cls.yaml_implicit_resolvers.setdefault(None, []).append(("tag:yaml.org,2002:null", _RESOLVERS[0][1]))


MAX_DEPTH = 64
MAX_ALIASES = 1000
MAX_NODES = 100_000


class LimitError(yaml.MarkedYAMLError):  # type: ignore[misc]  # yaml is untyped (Any)
    """A document beyond the loader's bounds (too deep, too many aliases, too large expanded)."""

    def __init__(self, problem: str, mark: yaml.Mark | None) -> None:
        super().__init__(problem=problem, problem_mark=mark)


def _expanded_size(root: yaml.Node, limit: int) -> int:
    """Nodes in the tree ``root`` stands for, every alias expanded (shared nodes counted per use),
    computed without expanding anything; stops counting past ``limit``. Iterative: alias chains can
    be deeper than Python's recursion."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = [] if isinstance(node, yaml.ScalarNode) else (
            [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else list(node.value))
        if done:
            on_path.discard(key)
            sizes[key] = min(limit + 1, 1 + sum(sizes[id(c)] for c in children))
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise LimitError("recursive alias (a node that contains itself)", node.start_mark)
        on_path.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                raise LimitError("recursive alias (a node that contains itself)", child.start_mark)
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


class BoundedSafeLoader(yaml.SafeLoader):  # type: ignore[misc]  # yaml is untyped (Any)
    """PyYAML's SafeLoader (YAML 1.1 scalars) refusing documents beyond the bounds above: for files
    fedgc wrote with ``yaml.safe_dump`` and reads back (a sweep's plan, a run's scenario in reports)."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise LimitError(f"more than {MAX_ALIASES} aliases", self.peek_event().start_mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise LimitError(f"nested more than {MAX_DEPTH} levels deep", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> yaml.Node | None:
        node = super().compose_document()
        if node is not None and _expanded_size(node, MAX_NODES) > MAX_NODES:
            raise LimitError(f"more than {MAX_NODES} values once its aliases are expanded", node.start_mark)
        return node


class Loader(BoundedSafeLoader):
    """SafeLoader with YAML 1.2 core-schema scalars that refuses duplicate keys and documents beyond
    its bounds."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:  # unhashable key: the base constructor reports it
                    continue
                if duplicate:
                    raise DuplicateKeyError(key, key_node.start_mark)
        return cast("dict[Any, Any]", super().construct_mapping(node, deep=deep))  # yaml is untyped

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


class Dumper(yaml.SafeDumper):  # type: ignore[misc]  # yaml is untyped (Any)
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


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` (YAML 1.1) within the bounds above."""
    return yaml.load(text, Loader=BoundedSafeLoader)  # a SafeLoader


def dump(data: Any) -> str:
    return cast(str, yaml.dump(data, Dumper=Dumper, sort_keys=False, allow_unicode=True))  # no stream: a str
