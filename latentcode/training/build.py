"""Build a task, a `ModelConfig` and a `TrainConfig` from names and `KEY=VALUE` overrides.

What `latentcode train` and a sweep grid share: the command line and `latentcode.training.sweep` both sit on top of
it, so the library never imports its command line. Values arrive as text (`--train.lr=3e-3`) or YAML; each is
checked against the field's type here, so an error names the field and the value. No argument parsing here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import types
import typing
from collections.abc import Iterator
from typing import Any, Literal

import latentcode.config as lc_config
from latentcode.config import VARIANTS, ModelConfig, TrainConfig, model_config, train_config

__all__ = [
    "PRESETS",
    "SECTIONS",
    "build_model_config",
    "build_task",
    "build_train_config",
    "parse_value",
    "split_overrides",
]

PRESETS = ("tiny", "small", "paper")
"""The presets every built-in task declares (a task may declare others: `TaskPresets`)."""
SECTIONS = ("model", "task", "train")
_OVERRIDE = re.compile(r"^--(model|task|train)\.([A-Za-z_]\w*)(?:=(.*))?$", re.DOTALL)


def parse_value(text: str) -> Any:
    """A command-line value: JSON where it parses (numbers, lists, quoted strings), true/false/none, else the
    string itself.

    >>> parse_value("3e-3"), parse_value("4"), parse_value("true"), parse_value("relu"), parse_value("[0.9, 0.99]")
    (0.003, 4, True, 'relu', [0.9, 0.99])
    """
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def split_overrides(argv: list[str]) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Pull `--model.KEY=VALUE` (or `--model.KEY VALUE`) options out of `argv`.

    Returns:
        (the remaining arguments, {"model": {...}, "task": {...}, "train": {...}}).

    Raises:
        ValueError: an option without a value, or one given twice.
    """
    rest: list[str] = []
    found: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            rest.extend(argv[i:])
            break
        match = _OVERRIDE.match(token)
        if not match:
            rest.append(token)
            i += 1
            continue
        section, key, value = match.groups()
        if value is None:
            if i + 1 >= len(argv):
                raise ValueError(f"{token} needs a value: {token}=VALUE")
            value = argv[i + 1]
            i += 1
        if key in found[section]:
            raise ValueError(f"--{section}.{key} is given twice")
        found[section][key] = parse_value(value)
        i += 1
    return rest, found


def _check_keys(section: str, given: dict[str, Any], valid: set[str]) -> None:
    unknown = sorted(set(given) - valid)
    if unknown:
        names = ", ".join(f"--{section}.{k}" for k in unknown)
        raise ValueError(f"unknown option(s) {names}; valid --{section}.KEY keys: {', '.join(sorted(valid))}")


def _accepts(kind: Any, value: Any) -> tuple[bool, Any, str]:
    """Whether `value` fits the annotation `kind`: (fits, the value converted, what the field takes)."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(kind)
        for option in options:
            ok, converted, _ = _accepts(option, value)
            if ok:
                return True, converted, ""
        return False, value, " or ".join(_accepts(option, None)[2] or "none" for option in options)
    if kind is type(None):
        return value is None, value, "none"
    if origin is Literal:
        choices = typing.get_args(kind)
        return value in choices, value, f"one of {list(choices)}"
    if kind is bool:
        return isinstance(value, bool), value, "true or false"
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool), value, "an integer"
    if kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return ok, float(value) if ok else value, "a number"
    if kind is str:
        return isinstance(value, str), value, "a string"
    if origin is tuple:
        args = typing.get_args(kind)
        if not isinstance(value, list | tuple) or (args and args[-1] is not Ellipsis and len(value) != len(args)):
            return False, value, f"a list of {len(args)} values" if args else "a list"
        if args and args[-1] is not Ellipsis:
            converted = []
            for arg, item in zip(args, value, strict=True):
                ok, item, _ = _accepts(arg, item)
                if not ok:
                    return False, value, f"a list of {len(args)} numbers"
                converted.append(item)
            return True, tuple(converted), ""
        return True, tuple(value), ""
    return True, value, ""


def _coerce(cls: type, values: dict[str, Any], section: str) -> dict[str, Any]:
    """Check each override against its field's type and convert it (ints to floats, lists to tuples).

    Raises:
        ValueError: naming the option, the value given and what the field takes.
    """
    hints = typing.get_type_hints(cls)
    out = {}
    for key, value in values.items():
        if key in hints:
            ok, value, wanted = _accepts(hints[key], value)
            if not ok:
                raise ValueError(f"--{section}.{key}={json.dumps(values[key])} is not valid: {key} takes {wanted}")
        out[key] = value
    return out


def _task_config_class(name: str) -> type | None:
    """The dataclass holding a task's parameters (its `config`), if it has one."""
    from latentcode.tasks import get_task  # the task modules load torch; the CLI's start-up must not

    config = getattr(get_task(name), "config", None)
    return type(config) if config is not None and dataclasses.is_dataclass(config) else None


def build_task(name: str, params: dict[str, Any]) -> Any:
    """A task by name with `--task.*` overrides (unknown keys rejected with the valid list)."""
    from latentcode.tasks import TASKS, get_task  # the task modules load torch; the CLI's start-up must not

    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; valid tasks: {', '.join(sorted(TASKS))}")
    config_cls = _task_config_class(name)
    if config_cls is not None:
        _check_keys("task", params, {f.name for f in dataclasses.fields(config_cls)})
        params = _coerce(config_cls, params, "task")
    with _typed("task"):
        return get_task(name, **params)


def build_model_config(task: Any, variant: str, preset: str, params: dict[str, Any]) -> ModelConfig:
    """`model_config` with `--model.*` overrides (unknown keys rejected with the valid list)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; valid variants: {', '.join(VARIANTS)}")
    # the preset is checked against the task's own presets by model_config (its message lists them)
    _check_keys("model", params, {f.name for f in dataclasses.fields(ModelConfig)} | {"width"})
    with _typed("model"):
        return model_config(task, variant, preset, **_coerce(ModelConfig, params, "model"))


def build_train_config(task: str, preset: str, flags: dict[str, Any], params: dict[str, Any]) -> TrainConfig:
    """`train_config` with the command's flags (`--steps`, `--seed`, ...) and `--train.*` overrides.

    When `--steps` shortens a run below the preset's warm-up, the warm-up keeps its share of the run.
    """
    _check_keys("train", params, {f.name for f in dataclasses.fields(TrainConfig)})
    for key, value in flags.items():
        if key in params and params[key] != value:
            raise ValueError(f"--{key.replace('_', '-')}={value} and --train.{key}={params[key]} disagree")
    merged = _coerce(TrainConfig, {**flags, **params}, "train")
    presets = lc_config.TRAIN_PRESETS  # the task registry, loaded here rather than when the parser is built
    if "steps" in merged and "warmup" not in merged and task in presets and preset in presets[task]:
        base = {**{f.name: f.default for f in dataclasses.fields(TrainConfig)}, **presets[task][preset]}
        if base["warmup"] >= merged["steps"]:
            merged["warmup"] = int(merged["steps"] * base["warmup"] / base["steps"])
    with _typed("train"):
        return train_config(task, preset, **merged)


@contextlib.contextmanager
def _typed(section: str) -> Iterator[None]:
    """A value of a wrong type that slipped past `_coerce` is a user error too: TypeError becomes ValueError."""
    try:
        yield
    except TypeError as e:
        raise ValueError(f"a --{section}.* value has the wrong type ({' '.join(str(e).split()[:40])})") from e
