"""The config against its JSON schema, before Snakemake fills in defaults: one line per problem.

Snakemake's ``validate`` prints a failing config with the whole schema and config after the
message (thousands of lines for an unknown key). :func:`check_schema` runs the same schema
first and, on failure, raises :class:`aoe.workflow.ConfigError` with one line: the key's
path, what is wrong, the config file that set it and, for an unknown key, the valid ones.

It also validates the free-form override dictionaries against the schema of the keys they
override, which a plain schema cannot do without copying those definitions (and their
defaults, which Snakemake would then fill in and so override everything):

- ``backbones.<b>.train_overrides``: keys and values of ``trainsets.<t>.train``;
- ``trainsets.<t>.objective_overrides``, ``trainsets.<t>.objective_settings.<objective>`` and
  ``backbones.<b>.objective_settings.<trainset>.<objective>``: keys and values of ``objectives.<o>``;
- ``objectives.<o>.by_format.<format>``: keys and values of ``objectives.<o>.weights``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import yaml

__all__ = ["check_schema", "complete_config", "key_source", "load_config"]


def _validator(schema: dict):
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema)


def _where(path: Iterable) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def key_source(path: tuple, configfiles: Iterable[str | Path]) -> str | None:
    """The last config file (the one that wins) whose YAML sets ``path``; None if none does."""
    found = None
    for file in configfiles:
        try:
            node = yaml.safe_load(Path(file).read_text())
        except (OSError, yaml.YAMLError):
            continue
        for part in path:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                node = node[part]
            else:
                break
        else:
            found = Path(file)
    if found is None:
        return None
    try:  # as the user typed it on the command line, relative to the workflow folder
        return str(found.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(found)


def _message(error, configfiles) -> str:
    path = tuple(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(k for k in error.instance if k not in allowed)
        key = (*path, extra[0]) if extra else path
        source = key_source(key, configfiles)
        where = f" (in {source})" if source else ""
        valid = f"; valid keys: {', '.join(allowed)}" if allowed else ""
        if len(extra) > 1:
            return f"{_where(path)}: unknown keys {', '.join(extra)}{where}{valid}"
        return f"{_where(key)}: unknown key{where}{valid}"
    source = key_source(path, configfiles)
    where = f" (in {source})" if source else ""
    return f"{_where(path)}: {error.message}{where}"


def _first_error(validator, instance):
    from jsonschema.exceptions import best_match

    return best_match(validator.iter_errors(instance))


def _overrides(config: dict) -> Iterable[tuple[tuple, dict, str]]:
    """(path, value, which $defs/properties schema it takes) of every override dictionary."""
    for name, spec in (config.get("backbones") or {}).items():
        if not isinstance(spec, dict):
            continue
        if isinstance(spec.get("train_overrides"), dict):
            yield ("backbones", name, "train_overrides"), spec["train_overrides"], "train"
        for ts, per_objective in (spec.get("objective_settings") or {}).items():
            for obj, value in (per_objective or {}).items():
                yield ("backbones", name, "objective_settings", ts, obj), value, "objective"
    for name, spec in (config.get("trainsets") or {}).items():
        if not isinstance(spec, dict):
            continue
        if isinstance(spec.get("objective_overrides"), dict):
            yield ("trainsets", name, "objective_overrides"), spec["objective_overrides"], "objective"
        for obj, value in (spec.get("objective_settings") or {}).items():
            yield ("trainsets", name, "objective_settings", obj), value, "objective"
    for name, spec in (config.get("objectives") or {}).items():
        if isinstance(spec, dict):
            for fmt, value in (spec.get("by_format") or {}).items():
                yield ("objectives", name, "by_format", fmt), value, "weights"


def check_schema(config: dict, schema_path: str | Path, configfiles: Iterable[str | Path] = ()) -> None:
    """Raise ConfigError with one line if ``config`` breaks the schema, overrides included."""
    from aoe.workflow import ConfigError

    schema = yaml.safe_load(Path(schema_path).read_text())
    configfiles = list(configfiles)
    error = _first_error(_validator(schema), config)
    if error is not None:
        raise ConfigError(_message(error, configfiles))
    objective = schema["properties"]["objectives"]["additionalProperties"]
    sub = {
        "train": schema["$defs"]["train"],
        "objective": objective,
        "weights": objective["properties"]["weights"],
    }
    for path, value, kind in _overrides(config):
        error = _first_error(_validator({"$defs": schema["$defs"], **sub[kind]}), value)
        if error is not None:
            error.path.extendleft(reversed(path))  # absolute_path reads relative_path + parents
            raise ConfigError(_message(error, configfiles) + f" ({_where(path)} takes the keys of {_OVERRIDDEN[kind]})")


_OVERRIDDEN = {"train": "trainsets.<name>.train", "objective": "objectives.<name>", "weights": "objectives.<name>.weights"}


def complete_config(config: dict, schema_path: str | Path, configfiles: Iterable[str | Path] = ()) -> None:
    """Check ``config`` as the workflow does at start-up and fill in the schema's defaults, in place:
    the schema first, as one line (Snakemake's ``validate`` would print the whole schema), then
    Snakemake's ``validate`` for the defaults, then the cross-key checks. Raises ConfigError."""
    from snakemake.utils import validate

    from aoe.workflow import check_config

    check_schema(config, schema_path, configfiles)
    validate(config, str(schema_path))
    check_config(config)


def load_config(repo: str | Path, configfiles: Iterable[str | Path] = ()) -> dict:
    """The config a ``snakemake --configfile <configfiles>`` run of the workflow at ``repo`` sees:
    ``config.yaml`` with each file merged over it as Snakemake merges them, checked, the schema's
    defaults filled in. For tools outside the workflow (bench/), so they read what a run would."""
    from snakemake.utils import update_config

    repo = Path(repo)
    files = [repo / "config.yaml", *map(Path, configfiles)]
    config: dict = {}
    for path in files:
        if not path.is_file():
            from aoe.workflow import ConfigError

            raise ConfigError(f"{path}: no such config file")
        update_config(config, yaml.safe_load(path.read_text()) or {})
    complete_config(config, repo / "schemas" / "config.schema.yaml", files)
    return config
