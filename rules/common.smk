import sys

# The package lives beside the Snakefile: importable with or without `pip install -e .`.
sys.path.insert(0, workflow.basedir)

from snakemake.utils import validate

from aoe.workflow import (
    PRETRAINED,
    ConfigError,
    check_config,
    enabled_tables,
    eval_cells,
    run_cells,
    table_cells,
    train_params,
)
from aoe.data.io import DataError
from aoe.data.sts import STS_DATASETS, STS_TASKS, resolve_downstream_root, sts_files

validate(config, workflow.source_path("../schemas/config.schema.yaml"))
try:
    check_config(config)
except ConfigError as err:
    raise WorkflowError(f"config: {err}") from None

try:
    # SentEval's downstream folder in the mirror (data.mirror or $AOE_DATA_MIRROR); None: download.
    DOWNSTREAM = resolve_downstream_root(config["data"]["mirror"])
except DataError as err:
    raise WorkflowError(f"data.mirror: {err}") from None


# datasets of the STS tasks evaluated (config evaluation.sts.tasks, default all seven)
STS_EVAL_DATASETS = [STS_TASKS[t] for t in config["evaluation"]["sts"]["tasks"]]


wildcard_constraints:
    backbone="|".join(map(re.escape, config["backbones"])),
    objective="|".join(map(re.escape, [PRETRAINED, *config["objectives"], *{o for r in config["runs"] for o in r["objectives"]}])),
    trainset="|".join(map(re.escape, ["none", *config["trainsets"]])),
    dataset="|".join(STS_DATASETS),
    split="train|dev|test",
    seed=r"\d+",
    max_len=r"\d+",
    table="|".join(map(re.escape, enabled_tables(config))) or "NO_TABLES",


def get_downstream_inputs(wildcards):
    """The raw files a prepared table is read from: mirror files, or the downloaded archive."""
    if DOWNSTREAM is not None:
        return [DOWNSTREAM / f for f in sts_files(wildcards.dataset, wildcards.split)]
    return "results/downloads/senteval/source.json"


def get_model_dir(wildcards):
    """A trained model folder, or the backbone as downloaded for objective 'pretrained'."""
    if wildcards.objective == PRETRAINED:
        return f"results/backbones/{wildcards.backbone}"
    return f"results/models/{wildcards.backbone}/{wildcards.objective}/{wildcards.trainset}/seed{wildcards.seed}"


def get_train_params(wildcards):
    return train_params(config, wildcards.backbone, wildcards.objective, wildcards.trainset, int(wildcards.seed))


def get_trainset_table(wildcards):
    ts = config["trainsets"][wildcards.trainset]
    return f"results/data/{ts['dataset']}/{ts['split']}.parquet"


def get_trainset_tokens(wildcards):
    ts = config["trainsets"][wildcards.trainset]
    max_len = get_train_params(wildcards).get("max_length", 128)
    return f"results/tokens/{wildcards.backbone}-{max_len}/{ts['dataset']}/{ts['split']}"


def get_table_evals(wildcards):
    return [f"results/eval/{c.path}/sts.json" for c in table_cells(config, wildcards.table)]


def train_resources(key, default):
    """A training job's resource from its backbone's config."""
    return lambda wildcards: config["backbones"][wildcards.backbone].get("resources", {}).get(key, default)
