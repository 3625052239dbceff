"""How are a YAML file's text and its mistakes turned into a ``SootheConfig`` or one clear line?

Separate from ``config.py`` (which holds the models) because this is the part that talks to
people: the YAML loader (safe, duplicate keys refused), ``${VAR}`` interpolation, and the
translation of pydantic's errors into ``file: dotted.path = value: rule`` with a suggestion for a
misspelt key. Values that came from the environment are never shown (they may be secrets), and
neither is any value of a secret field.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, SecretStr, ValidationError

from soothe_planner.errors import ConfigError

if TYPE_CHECKING:
    from soothe_planner.config.schema import SootheConfig

__all__ = ["config_from_dict", "format_validation_error", "interpolate", "load_config", "parse_yaml"]

Loc = tuple[str | int, ...]

_REF = re.compile(r"\$\$\{|\$\{([^}]*)\}")
_REF_BODY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.DOTALL)
_SECRET_WORDS = frozenset(
    {"api_key", "apikey", "key", "token", "secret", "password", "public_key", "secret_key", "openai_api_key"}
)


# --------------------------------------------------------------------------- YAML


class _StrictSafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping (YAML keeps the last)."""


def _construct_mapping(loader: _StrictSafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
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
    return loader.construct_mapping(node, deep=True)


_StrictSafeLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(text: str, source: str) -> Any:
    """The YAML document in ``text`` as plain data; a syntax error names the line and column."""
    try:
        return yaml.load(text, Loader=_StrictSafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: invalid YAML: {problem}") from None


# --------------------------------------------------------------------------- ${VAR} interpolation


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def interpolate(
    data: Any, env: Mapping[str, str], source: str, loc: Loc = (), seen: set[Loc] | None = None
) -> Any:
    """``data`` with ``${VAR}`` / ``${VAR:-default}`` expanded in string values; records where in ``seen``."""
    if isinstance(data, dict):
        return {k: interpolate(v, env, source, (*loc, k), seen) for k, v in data.items()}
    if isinstance(data, list):
        return [interpolate(v, env, source, (*loc, i), seen) for i, v in enumerate(data)]
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
    exc: ValidationError, source: str, root: type[BaseModel], from_env: set[Loc] | None = None
) -> str:
    """One line for every error in ``exc``: ``source: path = value: rule``, secrets hidden."""
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
        shown = "(hidden)" if hidden else _show(err.get("input"))
        prefix = f"{path} = {shown}" if shown is not None else path
        lines.append(f"{prefix}: {_rule(err['msg'])}")
    return f"{source}: " + "; ".join(lines)


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
    expanded = interpolate(data, os.environ if env is None else env, source, (), from_env)
    base = Path(base_dir).resolve() if base_dir is not None else Path.cwd()
    try:
        config = SootheConfig.model_validate(expanded, context={"base_dir": base})
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source, SootheConfig, from_env)) from None
    return config


def load_config(path: str | Path, *, env: Mapping[str, str] | None = None) -> SootheConfig:
    """Load, interpolate and validate one YAML file. Every problem is a one-line ``ConfigError``."""
    file = Path(path)
    source = str(path)
    if not file.exists():
        raise ConfigError(f"{source}: no such config file")
    if file.is_dir():
        raise ConfigError(f"{source}: is a folder, not a config file")
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"{source}: cannot be read: {exc.strerror}") from None
    config = config_from_dict(parse_yaml(text, source), base_dir=file.parent, source=source, env=env)
    config._source = source
    return config
