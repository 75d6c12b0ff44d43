"""aoe.plan.key_sources: a config error names the file whose value Snakemake merged, or --config: in process through
complete_config with a stand-in workflow's config_sources, and through a real `snakemake -n`."""

from __future__ import annotations

import types

import pytest
import yaml
from snakemake.utils import update_config

from aoe.config.errors import ConfigError
from aoe.config.hparams import YAML_LOADER
from aoe.plan.check import complete_config
from aoe.plan.key_sources import config_sources
from aoe.plan.schema_check import check_schema
from tests.forkserver import forked_snakemake
from tests.workflow_utils import MIRROR, REPO, copy_workflow

# Each Snakemake run a process of its own, forked from one that imported Snakemake once (tests/forkserver.py)
snakemake, dry_run, _snakemake_forks = forked_snakemake()

SCHEMA = REPO / "schemas" / "config.schema.yaml"


# -- the file named is the one whose value won --------------------------------------------------
# Snakemake lists workflow.configfiles as [--configfile files..., config.yaml] (the Snakefile's
# configfile: comes last) but merges config.yaml first: a bad value a preset sets over config.yaml's
# was reported "(in config.yaml)". And a --config value was named after whatever file set the key.


def _snakemake_order(tmp_path, monkeypatch, override: dict, command_line: dict | None = None):
    """The merged config, and config_sources() of a stand-in workflow of config.yaml, ci.yaml and
    ``override`` (as rules/common.smk hands it the running one)."""
    files = [REPO / "config.yaml", REPO / "presets" / "ci.yaml", tmp_path / "override.yaml"]
    files[-1].write_text(yaml.safe_dump(override))
    config = {}
    for file in files:
        update_config(config, yaml.load(file.read_text(), Loader=YAML_LOADER))
    update_config(config, command_line or {})
    listed = [*files[1:], "config.yaml"]  # as Snakemake lists them
    workflow = types.SimpleNamespace(configfiles=listed, overwrite_configfiles=files[1:],
                                     config_settings=types.SimpleNamespace(config=command_line or {}))
    monkeypatch.chdir(REPO)
    return config, config_sources(workflow)


@pytest.mark.parametrize(
    "override, start",
    [
        # ci.yaml and config.yaml set learning_rate too: the override's value is the one merged
        ({"trainsets": {"stsb": {"train": {"learning_rate": "fast"}}}}, "trainsets.stsb.train.learning_rate: 'fast' is not of type 'number'"),
        ({"trainsets": {"stsb": {"train": {"batch_size": -4}}}}, "trainsets.stsb.train.batch_size: -4 is less than the minimum of 2"),
        ({"backbones": {"minilm-l6": {"pooling": "median"}}}, "backbones.minilm-l6.pooling: 'median' is not one of"),
    ],
)
def test_a_bad_value_names_the_file_it_was_merged_from(tmp_path, monkeypatch, override, start):
    config, (files, command_line) = _snakemake_order(tmp_path, monkeypatch, override)
    assert files[0].endswith("config.yaml") and command_line == {}
    with pytest.raises(ConfigError) as err:
        complete_config(config, SCHEMA, files, command_line)
    assert str(err.value).startswith(start) and str(err.value).endswith(f"(in {tmp_path / 'override.yaml'})"), str(err.value)


def test_a_value_given_by_config_on_the_command_line_is_named_so(tmp_path, monkeypatch):
    command_line = {"trainsets": {"stsb": {"train": {"learning_rate": "fast"}}}}
    config, sources = _snakemake_order(tmp_path, monkeypatch, {}, command_line)
    with pytest.raises(ConfigError) as err:
        complete_config(config, SCHEMA, *sources)
    assert str(err.value) == "trainsets.stsb.train.learning_rate: 'fast' is not of type 'number' (from --config)"
    # as check_schema's own argument, outside a Snakemake run
    with pytest.raises(ConfigError, match=r"^colour: unknown key \(from --config\); valid keys: "):
        check_schema({**config, "colour": "blue"}, SCHEMA, [REPO / "config.yaml"], overrides={"colour": "blue"})


def test_a_table_built_but_not_defined_names_the_file_that_lists_it(tmp_path, monkeypatch):
    """build.tables is replaced whole by the last file that gives it: that file is the one named."""
    config, sources = _snakemake_order(tmp_path, monkeypatch, {"build": {"tables": ["table1_sts", "table9_x", "table8_y"]}})
    with pytest.raises(ConfigError) as err:
        complete_config(config, SCHEMA, *sources)
    assert str(err.value).startswith(
        f"build.tables: no tables 'table9_x', 'table8_y' in tables (in {tmp_path / 'override.yaml'}); defined: table1_sts, "), str(err.value)
    # ci.yaml's own list, all defined, passes; a table only defined, not listed, is simply not built
    config, sources = _snakemake_order(tmp_path, monkeypatch, {"tables": {"table9_x": {"kind": "stsb"}}})
    complete_config(config, SCHEMA, *sources)


def test_a_cross_key_error_names_the_file_it_was_merged_from(tmp_path, monkeypatch):
    config, sources = _snakemake_order(tmp_path, monkeypatch, {"trainsets": {"stsb": {"train": {"batch_size": 6000}}}})
    with pytest.raises(ConfigError) as err:
        complete_config(config, SCHEMA, *sources)
    assert str(err.value).startswith(f"trainsets.stsb.train.batch_size: 6000 (in {tmp_path / 'override.yaml'}) is more"), str(err.value)


@pytest.fixture(scope="module")
def workflow_copy(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("configcheck") / "wf")


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, text, line",
    [
        (["--configfile", "presets/ci.yaml", "override.yaml"], "trainsets: {stsb: {train: {learning_rate: fast}}}\n",
         "config: trainsets.stsb.train.learning_rate: 'fast' is not of type 'number' (in override.yaml)"),
        # a file outside the workflow folder, given relative to it: its absolute path, without the ".."
        (["--configfile", "presets/ci.yaml", "../outside.yaml"], "trainsets: {stsb: {train: {batch_size: -4}}}\n",
         "config: trainsets.stsb.train.batch_size: -4 is less than the minimum of 2 (in {outside})"),
        (["--configfile", "presets/ci.yaml", "--config", "trainsets={stsb: {train: {learning_rate: fast}}}"], "",
         "config: trainsets.stsb.train.learning_rate: 'fast' is not of type 'number' (from --config)"),
        (["--configfile", "presets/ci.yaml", "override.yaml"], "trainsets: {stsb: {train: {batch_size: 6000}}}\n",
         "config: trainsets.stsb.train.batch_size: 6000 (in override.yaml) is more than the 5749 rows of stsb train"),
    ],
)
def test_a_dry_run_names_the_file_that_set_the_bad_value(workflow_copy, args, text, line):
    """The real `snakemake -n`: the line names the file whose value Snakemake merged, before anything is planned."""
    outside = workflow_copy.parent / "outside.yaml"
    for path in (workflow_copy / "override.yaml", outside):
        path.write_text(text or "{}\n")
    out = snakemake(workflow_copy, "-n", *args, env={"AOE_DATA_MIRROR": str(MIRROR or "")}, timeout=300)
    assert out.returncode != 0
    assert line.format(outside=outside) in out.stdout, out.stdout[-3000:]


@pytest.mark.slow
def test_a_preset_building_an_undefined_table_is_refused_at_planning(workflow_copy):
    """Issue 40: a preset's build.tables names a table neither it nor config.yaml defines: `snakemake -n`
    stops before planning with one line naming the preset and the key (not a KeyError, nor a silent skip)."""
    preset = workflow_copy / "presets" / "builds-undefined.yaml"
    preset.write_text(
        (REPO / "presets" / "cpu-demo.yaml").read_text().replace("tables: [table1_sts, table2_indomain]", "tables: [table1_sts, table9_new]")
    )
    assert "table9_new" in preset.read_text()
    try:
        out = snakemake(workflow_copy, "-n", "--configfile", "presets/builds-undefined.yaml",
                        env={"AOE_DATA_MIRROR": str(MIRROR or "")}, timeout=300)
    finally:
        preset.unlink()
    assert out.returncode != 0
    assert ("config: build.tables: no table 'table9_new' in tables (in presets/builds-undefined.yaml); defined: table1_sts, "
            in out.stdout), out.stdout[-3000:]
