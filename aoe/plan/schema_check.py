"""The config against its JSON schema, before Snakemake fills in defaults: one line per problem.

Snakemake's ``validate`` prints a failing config with the whole schema and config after the
message (thousands of lines for an unknown key). :func:`check_schema` runs the same schema
first and, on failure, raises :class:`aoe.config.errors.ConfigError` with one line: the key's
path, what is wrong, the config file that set it (:mod:`aoe.plan.key_sources`) and, for an unknown
key, the closest valid ones.

It also validates the free-form override dictionaries against the schema of the keys they
override, which a plain schema cannot do without copying those definitions (and their
defaults, which Snakemake would then fill in and so override everything):

- ``backbones.<b>.train_overrides`` and ``backbones.<b>.objective_train.<t>.<o>``: keys and values of ``trainsets.<t>.train``;
- ``trainsets.<t>.objective_settings.<objective>`` (``.all``: every objective) and
  ``backbones.<b>.objective_settings.<trainset>.<objective>``: keys and values of ``objectives.<o>``;
- ``objectives.<o>.by_format.<format>``: keys and values of ``objectives.<o>.weights``;
- ``llm_supervised.generators.<table>.generation``: keys and values of ``llm_supervised.generation``.

Text the schema takes as a number is read as one first (:func:`read_typed`). :func:`fill_defaults` then fills
in the schema's defaults. The checks across keys, which a schema cannot express, run after it on the defaulted
config (:mod:`aoe.plan.check`).
"""

from __future__ import annotations

import copy
import difflib
import math
import re
from pathlib import Path
from typing import Any, Iterable

from aoe.config.hparams import EVERY_OBJECTIVE, NOT_SET, lookup, read_yaml
from aoe.config.errors import ConfigError
from aoe.plan.key_sources import key_path, set_in

__all__ = ["check_schema", "fill_defaults", "read_typed"]


def _validator(schema: dict):
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema)


def _retired(key: tuple) -> str:
    """What replaced a key the schema once had ("" for any other key): the ``enabled`` switches of a
    table, the figures and the GIS analysis gave way to the build lists, a train set's
    ``objective_overrides`` to its ``objective_settings.all`` (issue 40)."""
    if len(key) == 3 and key[0] == "trainsets" and key[2] == "objective_overrides":
        return f"; objective_overrides gave way to trainsets.{key[1]}.objective_settings.{EVERY_OBJECTIVE}: move its keys there"
    if key[-1:] != ("enabled",):
        return ""
    parent = key[:-1]
    if len(parent) == 2 and parent[0] == "tables":
        lists = "tables"
    else:
        lists = {("figures",): "figures", ("figures", "training_curves"): "figures", ("analysis", "gis"): "analyses"}.get(parent)
    return f"; the enabled switches gave way to build.{lists}: list what is built there" if lists else ""


def _message(error, configfiles: list, overrides: dict | None = None) -> str:
    path = tuple(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(k for k in error.instance if k not in allowed)
        key = (*path, extra[0]) if extra else path
        where = set_in(key, configfiles, overrides)
        valid = f"; valid keys: {', '.join(allowed)}" if allowed else ""
        if len(extra) > 1:
            return f"{key_path(path)}: unknown keys {', '.join(extra)}{where}{valid}"
        # a misspelt key: the closest valid ones first, as for a misspelt target (aoe.plan.targets)
        close = difflib.get_close_matches(str(key[-1]), allowed, n=3, cutoff=0.75) if extra and not _retired(key) else []
        if close:
            valid = f"; did you mean {' or '.join(close)}? valid keys: {', '.join(allowed)}"
        return f"{key_path(key)}: unknown key{where}{valid}{_retired(key)}"
    return f"{key_path(path)}: {error.message}{set_in(path, configfiles, overrides)}"


# YAML 1.1 (PyYAML, Snakemake's reader) reads 5e-5 as text, since its floats need a dot (5.0e-5), and Snakemake
# reads every value inside a --config structure as text ('trainsets={"stsb":{"train":{"learning_rate":0.0001}}}'
# gives '0.0001'): where the schema takes a number, integer, boolean or null and not text, such text is read as one
_INTEGER = re.compile(r"[-+]?[0-9][0-9_]*")


def _typed(text: str, types) -> Any:
    """``text`` as the first of the schema's ``types`` that reads it, or NOT_SET."""
    types = [types] if isinstance(types, str) else list(types)
    word = text.strip()
    if "null" in types and word in ("null", "Null", "NULL", "~"):
        return None
    if "boolean" in types and word.lower() in ("true", "false"):
        return word.lower() == "true"
    if ("integer" in types or "number" in types) and _INTEGER.fullmatch(word):
        return int(word)
    if "integer" in types or "number" in types:
        try:
            number = float(word)
        except ValueError:
            return NOT_SET
        if math.isfinite(number) and ("number" in types or number.is_integer()):
            return number if "number" in types else int(number)
    return NOT_SET


def _leaf_errors(errors):
    for error in errors:
        yield error
        yield from _leaf_errors(error.context or ())


def read_typed(validator, instance) -> list:
    """Read, in place, each text value of ``instance`` that the schema of ``validator`` takes as a number, integer,
    boolean or null (and not as text) as that. The one place for config files and --config. Returns the errors
    that remain (one validation pass where nothing is read)."""
    for _ in range(1000):  # each pass reads at least one value, or ends
        errors, fixes = list(validator.iter_errors(instance)), {}
        for error in _leaf_errors(errors):
            path = tuple(error.absolute_path)
            if error.validator == "type" and isinstance(error.instance, str) and path and path not in fixes:
                value = _typed(error.instance, error.validator_value)
                if value is not NOT_SET:
                    fixes[path] = value
        if not fixes:
            return errors
        for path, value in fixes.items():
            lookup(instance, path[:-1])[path[-1]] = value
    return errors


def _first_error(validator, instance):
    """The error to report of ``instance``, after its text values the schema takes as numbers are read as numbers."""
    from jsonschema.exceptions import best_match

    return best_match(read_typed(validator, instance))


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
        for ts, per_objective in (spec.get("objective_train") or {}).items():
            for obj, value in (per_objective or {}).items():
                yield ("backbones", name, "objective_train", ts, obj), value, "train"
    for name, spec in (config.get("trainsets") or {}).items():
        if not isinstance(spec, dict):
            continue
        for obj, value in (spec.get("objective_settings") or {}).items():
            yield ("trainsets", name, "objective_settings", obj), value, "objective"
    for name, spec in (config.get("objectives") or {}).items():
        if isinstance(spec, dict):
            for fmt, value in (spec.get("by_format") or {}).items():
                yield ("objectives", name, "by_format", fmt), value, "weights"
    for name, spec in ((config.get("llm_supervised") or {}).get("generators") or {}).items():
        if isinstance(spec, dict) and isinstance(spec.get("generation"), dict):
            yield ("llm_supervised", "generators", name, "generation"), spec["generation"], "generation"


def check_schema(
    config: dict, schema_path: str | Path, configfiles: Iterable[str | Path] = (), overrides: dict | None = None
) -> None:
    """Raise ConfigError with one line if ``config`` breaks the schema, overrides included; the line
    names the file that set the bad key (``configfiles`` in merge order, :func:`aoe.plan.key_sources.key_source`) or
    --config (``overrides``: the command line's values). Text the schema takes as a number (YAML 1.1's 5e-5,
    --config's nested values) is first read as one, in place (:func:`read_typed`)."""
    schema = read_yaml(schema_path)
    configfiles = list(configfiles)
    error = _first_error(_validator(schema), config)
    if error is not None:
        raise ConfigError(_message(error, configfiles, overrides))
    objective = schema["properties"]["objectives"]["additionalProperties"]
    sub = {
        "train": schema["$defs"]["train"],
        "objective": objective,
        "weights": objective["properties"]["weights"],
        "generation": schema["properties"]["llm_supervised"]["properties"]["generation"],
    }
    for path, value, kind in _overrides(config):
        error = _first_error(_validator({"$defs": schema["$defs"], **sub[kind]}), value)
        if error is not None:
            error.path.extendleft(reversed(path))  # absolute_path reads relative_path + parents
            raise ConfigError(_message(error, configfiles, overrides) + f" ({key_path(path)} takes the keys of {_OVERRIDDEN[kind]})")


_OVERRIDDEN = {
    "train": "trainsets.<name>.train",
    "objective": "objectives.<name>",
    "weights": "objectives.<name>.weights",
    "generation": "llm_supervised.generation",
}


def fill_defaults(config: dict, schema_path: str | Path) -> None:
    """Fill in the schema's defaults, in place, as Snakemake's ``validate(config, schema)`` does: the recipe of
    jsonschema's FAQ that Snakemake runs (each ``properties`` default set where its key is missing, as the
    validator walks the config). Snakemake's parses the schema with pure-Python YAML at each call (0.2 CPU-s,
    twice in a planning that compares with the paper grid); this one uses the schema :func:`check_schema` parsed.
    A default is a copy, not shared with that parse (``read_yaml`` keeps it for every caller) nor between the keys a
    ``$ref`` fills. tests/test_schema_check.py checks that it fills what Snakemake's ``validate`` fills."""
    from jsonschema import Draft202012Validator, validators

    properties = Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator, props, instance, schema):
        if validator.is_type(instance, "object"):
            for key, subschema in props.items():
                if "default" in subschema:
                    instance.setdefault(key, copy.deepcopy(subschema["default"]))
        yield from properties(validator, props, instance, schema)

    validators.extend(Draft202012Validator, {"properties": set_defaults})(read_yaml(schema_path)).validate(config)
