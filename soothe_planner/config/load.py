"""How are a YAML file's text and its mistakes turned into a ``SootheConfig`` or one clear line?

Separate from ``config.py`` (which holds the models) because this is the part that talks to
people: the YAML loader (safe, duplicate keys refused), ``${VAR}`` interpolation, and the
translation of pydantic's errors into ``file: dotted.path = value: rule`` with a suggestion for a
misspelt key. Values that came from the environment are never shown (they may be secrets), and
neither is any value of a secret field.

What was weighed:

- **A config file is input, and may be hostile.** It is bounded before anything expensive runs:
  at most ``MAX_CONFIG_BYTES`` read (never more, so a FIFO or ``/dev/zero`` cannot stall the
  load), at most ``MAX_CONFIG_DEPTH`` levels of nesting (PyYAML composes recursively: thousands of
  levels end in ``RecursionError``), and at most ``MAX_CONFIG_VALUES`` values *once every alias is
  expanded*, counted on the composed node graph (each node once, memoised) before anything is
  constructed: a few hundred bytes of nested aliases (the "billion laughs") stay a small graph
  for PyYAML but would be copied out in full by ``${VAR}`` interpolation. An alias to a node that
  contains it is refused too. Each bound is a ``ConfigError`` naming the bound.
- **Merge keys** (``<<: *base``) are standard YAML and accepted: the mapping's own keys override
  merged ones. Duplicates are looked for among a mapping's *own* keys only, so an override is not
  mistaken for a duplicate while a key written twice still is.
- **Interpolated values are never echoed.** ``interpolate`` records where a variable's value went
  and the values themselves; an error at such a place shows ``(hidden)`` for the value, and the
  values are scrubbed from every rule text (a validator that quotes its input would otherwise
  leak a key pasted into a model string), and so is every word of six characters or more in them
  (a message may quote part of a value: the module of a ``module:attr`` spec). The config keeps
  both so ``validate`` prints ``SootheConfig.redacted_dump()`` and resolution errors are scrubbed
  the same way. Values shorter than four characters are still hidden as inputs but not scrubbed
  from prose (they would mangle it: a ``3`` is in many rules).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, SecretStr, ValidationError

from soothe_planner.config.redaction import HIDDEN, scrub
from soothe_planner.errors import ConfigError

if TYPE_CHECKING:
    from soothe_planner.config.schema import SootheConfig

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "MAX_CONFIG_VALUES",
    "config_from_dict",
    "format_validation_error",
    "interpolate",
    "load_config",
    "parse_yaml",
]

MAX_CONFIG_BYTES = 1 << 20  # 1 MiB: a config is a page of settings, and this reads in a few ms
MAX_CONFIG_DEPTH = 64
MAX_CONFIG_VALUES = 100_000  # keys and values, with every alias expanded

Loc = tuple[str | int, ...]

_REF = re.compile(r"\$\$\{|\$\{([^}]*)\}")
_REF_BODY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.DOTALL)
_SECRET_WORDS = frozenset(
    {"api_key", "apikey", "key", "token", "secret", "password", "public_key", "secret_key", "openai_api_key"}
)


# --------------------------------------------------------------------------- YAML


class _BoundExceeded(yaml.YAMLError):
    """A bound on the document was crossed; carries the place like PyYAML's own errors."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


class _StrictSafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with bounds on depth and expanded size, refusing a key given twice in one mapping."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_CONFIG_DEPTH:
                raise _BoundExceeded(
                    f"nested deeper than {MAX_CONFIG_DEPTH} levels (a config needs a handful)",
                    self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        if node is not None:
            _check_expanded_size(node)
        return node


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expanded_size(root: yaml.Node) -> None:
    """Refuse a node graph whose tree, with aliases expanded, has more than ``MAX_CONFIG_VALUES`` nodes."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            visiting.discard(key)
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            if size > MAX_CONFIG_VALUES:
                raise _BoundExceeded(
                    f"holds more than {MAX_CONFIG_VALUES} values once its aliases are expanded "
                    "(aliases nested inside aliases multiply)",
                    node.start_mark,
                )
            sizes[key] = size
            continue
        if key in sizes:
            continue
        visiting.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in visiting:
                raise _BoundExceeded("an alias refers to a node that contains it", child.start_mark)
            if id(child) not in sizes:
                stack.append((child, False))


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _construct_mapping(loader: _StrictSafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    # Own keys only: a key that overrides one brought in by a merge key (<<) is not a duplicate.
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
        except TypeError:  # an unhashable key: let the stock constructor report it
            break
        if duplicate:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    loader.flatten_mapping(node)  # merged pairs first, own pairs after: the own ones win
    return loader.construct_mapping(node, deep=True)


_StrictSafeLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(text: str, source: str) -> Any:
    """The YAML document in ``text`` as plain data; a syntax error names the line and column."""
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source}: {len(text)} characters, over the {MAX_CONFIG_BYTES}-byte limit for a config")
    try:
        return yaml.load(text, Loader=_StrictSafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        kind = "" if isinstance(exc, _BoundExceeded) else "invalid YAML: "
        raise ConfigError(f"{where}: {kind}{problem}") from None


# --------------------------------------------------------------------------- ${VAR} interpolation


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def interpolate(
    data: Any,
    env: Mapping[str, str],
    source: str,
    loc: Loc = (),
    seen: set[Loc] | None = None,
    values: set[str] | None = None,
) -> Any:
    """``data`` with ``${VAR}`` / ``${VAR:-default}`` expanded in string values.

    Records where a variable's value went in ``seen``, and the values themselves in ``values``
    (defaults written in the file are not recorded: they are no secret).
    """
    if isinstance(data, dict):
        return {k: interpolate(v, env, source, (*loc, k), seen, values) for k, v in data.items()}
    if isinstance(data, list):
        return [interpolate(v, env, source, (*loc, i), seen, values) for i, v in enumerate(data)]
    if not isinstance(data, str) or "${" not in data:
        return data
    if re.search(r"\$\{[^}]*$", data.replace("$${", "")):
        raise ConfigError(f"{source}: {_dotted(loc)}: unclosed '${{' (write ${{VAR}}, or $${{ for a literal)")

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        body = _REF_BODY.fullmatch(match.group(1))
        if body is None:
            raise ConfigError(
                f"{source}: {_dotted(loc)}: '${{{match.group(1)}}}' is not ${{VAR}} or ${{VAR:-default}}"
            )
        name, default = body.group(1), body.group(2)
        value = env.get(name)
        if value:  # like the shell's ':-', an empty variable takes the default too
            if seen is not None:
                seen.add(loc)
            if values is not None:
                values.add(value)
            return value
        if default is not None:
            return default
        if value is not None:
            return value
        raise ConfigError(
            f"{source}: {_dotted(loc)}: environment variable {name} is not set and has no default "
            f"(set it, or write ${{{name}:-default}})"
        )

    return _REF.sub(substitute, data)


# --------------------------------------------------------------------------- pydantic errors


def _unwrap(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, __import__("types").UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else annotation
    return annotation


def _section_at(root: type[BaseModel], loc: Loc) -> Any:
    """The type found at ``loc`` below ``root`` (through models, dicts and lists), or None."""
    current: Any = root
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            if field is None:
                return None
            current = field.annotation
        elif get_origin(current) is dict:
            current = get_args(current)[1]
        elif get_origin(current) is list:
            current = get_args(current)[0]
        else:
            return None
    return _unwrap(current)


# Fields whose value is never echoed in an error: a key pasted where its variable's NAME belongs.
_HIDDEN_ON_ERROR = frozenset({"api_key_env", "dsn"})


def _is_secret(root: type[BaseModel], loc: Loc) -> bool:
    if any(part in _HIDDEN_ON_ERROR for part in loc):
        return True
    return any(_section_at(root, loc[:i]) is SecretStr for i in range(1, len(loc) + 1))


def _show(value: Any) -> str | None:
    if isinstance(value, str | int | float | bool) or value is None:
        text = repr(value)
        return text if len(text) <= 80 else text[:77] + "...'"
    return None


def _unknown_key(root: type[BaseModel], loc: Loc) -> str:
    key = str(loc[-1])
    section = _section_at(root, loc[:-1])
    allowed = list(section.model_fields) if isinstance(section, type) and issubclass(section, BaseModel) else []
    if key.lower() in _SECRET_WORDS:
        return (
            "unknown key; secrets are never read from the config file: put the key in an environment "
            "variable (models.api_key_env names it; Langfuse reads LANGFUSE_PUBLIC_KEY/LANGFUSE_SECRET_KEY)"
        )
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {close[0]}?"
    return f"unknown key; allowed keys: {', '.join(allowed)}" if allowed else "unknown key"


def _rule(message: str) -> str:
    message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    message = message.replace("Input should be", "must be")
    return " ".join(message.split())


def format_validation_error(
    exc: ValidationError,
    source: str,
    root: type[BaseModel],
    from_env: set[Loc] | None = None,
    env_values: Iterable[str] = (),
) -> str:
    """One line for every error in ``exc``: ``source: path = value: rule``, secrets and interpolated values hidden."""
    from_env = from_env or set()
    lines: list[str] = []
    # an unknown key is usually the cause of a "missing" one next to it: show it first
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    for err in errors:
        loc: Loc = tuple(err["loc"])
        path = _dotted(loc)
        if err["type"] == "extra_forbidden":
            lines.append(f"{path}: {_unknown_key(root, loc)}")
            continue
        if err["type"] == "missing":
            lines.append(f"{path}: required key is missing")
            continue
        hidden = _is_secret(root, loc) or any(loc[: len(e)] == e for e in from_env)
        shown = HIDDEN if hidden else _show(err.get("input"))
        prefix = f"{path} = {shown}" if shown is not None else path
        lines.append(f"{prefix}: {_rule(err['msg'])}")
    return scrub(f"{source}: " + "; ".join(lines), env_values)


# --------------------------------------------------------------------------- entry points


def config_from_dict(
    data: Any,
    *,
    base_dir: str | Path | None = None,
    source: str = "config",
    env: Mapping[str, str] | None = None,
) -> SootheConfig:
    """A ``SootheConfig`` from plain data (as YAML would give), with interpolation and clear errors."""
    from soothe_planner.config.schema import SootheConfig

    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: the top level must be a mapping of sections "
            f"({', '.join(SootheConfig.model_fields)}), got {type(data).__name__}"
        )
    from_env: set[Loc] = set()
    env_values: set[str] = set()
    expanded = interpolate(data, os.environ if env is None else env, source, (), from_env, env_values)
    base = Path(base_dir).resolve() if base_dir is not None else Path.cwd()
    try:
        config = SootheConfig.model_validate(expanded, context={"base_dir": base})
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source, SootheConfig, from_env, env_values)) from None
    config._from_env = frozenset(from_env)
    config._env_values = frozenset(env_values)
    return config


def load_config(path: str | Path, *, env: Mapping[str, str] | None = None) -> SootheConfig:
    """Load, interpolate and validate one YAML file. Every problem is a one-line ``ConfigError``."""
    file = Path(path)
    source = str(path)
    if not file.exists():
        raise ConfigError(f"{source}: no such config file")
    if file.is_dir():
        raise ConfigError(f"{source}: is a folder, not a config file")
    if not file.is_file():
        raise ConfigError(f"{source}: is not a regular file (a pipe or a device cannot be a config file)")
    try:
        with file.open("rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)  # never more: the path may be a FIFO or a device
    except OSError as exc:
        raise ConfigError(f"{source}: cannot be read: {exc.strerror}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source}: over the {MAX_CONFIG_BYTES}-byte limit for a config file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: not UTF-8 text") from None
    config = config_from_dict(parse_yaml(text, source), base_dir=file.parent, source=source, env=env)
    config._source = source
    return config
