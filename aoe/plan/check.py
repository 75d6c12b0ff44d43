"""The config checked and completed at start-up: the entry points that run every check once.

:func:`complete_config` runs the schema (:mod:`aoe.plan.schema_check`: one line per problem, then its defaults filled
in as Snakemake's ``validate`` fills them), then every cross-key check of :data:`CHECKS`
(:func:`check_config`), each a function of the module of what it checks, raising ConfigError naming the key:

- :mod:`aoe.plan.training_checks`: objectives, runs, backbones, train sets, LLM-written tables, by name;
- :mod:`aoe.plan.cell_checks`: each trained cell's resolved recipe (trained starts, batch sizes, poolings);
- :mod:`aoe.plan.table_checks`: the build selection, table targets, tables and their rows, like for like;
- :mod:`aoe.plan.evaluation_checks`: evaluation settings, released checkpoints, pretrained variants,
  analysis.saturation, figures.

rules/common.smk calls :func:`complete_config` (with :func:`aoe.plan.key_sources.config_sources`), and
:func:`load_config` does the same for tools outside the workflow; the rules files only compute from a config that
passed. What stays in the rules is what needs the run itself: the data mirror on disk (rules/common.smk), a
requested target (Snakefile), a job's wildcards (input functions), a figure asked for whose model no run trains
(:func:`aoe.results.figures.figure_inputs`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import yaml

from aoe.config.hparams import YAML_LOADER, frozen_while
from aoe.config.errors import ConfigError
from aoe.plan import cell_checks, evaluation_checks, table_checks, training_checks
from aoe.plan.schema_check import check_schema, fill_defaults

__all__ = ["CHECKS", "check_config", "complete_config", "load_config"]


# in the order they run: a config with several problems names the first
CHECKS = (
    table_checks.check_build,
    training_checks.check_objectives,
    training_checks.check_runs,
    training_checks.check_backbones,
    training_checks.check_llm_supervised,
    training_checks.check_trainsets,
    cell_checks.check_inits,
    cell_checks.check_batch_sizes,
    evaluation_checks.check_senteval_caps,
    evaluation_checks.check_saturation,
    table_checks.check_table_targets,
    evaluation_checks.check_released,
    cell_checks.check_pooler_poolings,
    evaluation_checks.check_pretrained_variants,
    table_checks.check_tables,
    cell_checks.check_eval_pooling_backend,
    cell_checks.check_padded_pooling_buckets,
    evaluation_checks.check_mteb,
    evaluation_checks.check_figures,
)


# the checks whose messages name the file that set a key: called with the config files and --config values
_NAMING_FILES = (table_checks.check_build, cell_checks.check_batch_sizes)


def check_config(config: dict, configfiles: Iterable[str | Path] = (), overrides: dict | None = None) -> None:
    """Every cross-key check of :data:`CHECKS`, on a config the schema passed with its defaults
    filled in; raises ConfigError naming the first bad key (and, for :data:`_NAMING_FILES`, the file
    that set it: ``configfiles`` in merge order, ``overrides`` the --config values)."""
    configfiles = list(configfiles)
    with frozen_while(config):  # no check changes the config
        for check in CHECKS:
            if check in _NAMING_FILES:
                check(config, configfiles, overrides)
            else:
                check(config)


def complete_config(
    config: dict, schema_path: str | Path, configfiles: Iterable[str | Path] = (), overrides: dict | None = None
) -> None:
    """Check ``config`` as the workflow does at start-up and fill in the schema's defaults, in place:
    the schema first, as one line (Snakemake's ``validate`` would print the whole schema), then its
    defaults (:func:`aoe.plan.schema_check.fill_defaults`, what Snakemake's ``validate`` fills), then the
    cross-key checks (:func:`check_config`). ``configfiles``: the files merged into ``config``, in merge
    order, and ``overrides`` the --config values (a workflow's: :func:`aoe.plan.key_sources.config_sources`);
    the messages name them. Raises ConfigError."""
    configfiles = list(configfiles)
    check_schema(config, schema_path, configfiles, overrides)
    fill_defaults(config, schema_path)
    check_config(config, configfiles, overrides)


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
            raise ConfigError(f"{path}: no such config file")
        # parsed afresh, not read_yaml's shared copy: update_config merges the file's own dicts into config
        update_config(config, yaml.load(path.read_text(), Loader=YAML_LOADER) or {})
    complete_config(config, repo / "schemas" / "config.schema.yaml", files)
    return config
