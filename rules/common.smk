import functools
import sys

from snakemake.logging import logger

# The package lives beside the Snakefile: importable with or without `pip install -e .`.
sys.path.insert(0, workflow.basedir)

from aoe.plan.check import complete_config, load_config
from aoe.plan.key_sources import config_sources
from aoe.plan.code_changes import code_change_message, models_of_other_code
from aoe.plan.interruptions import install as install_interruption_filter
from aoe.plan.cost import CostError, training_gpu_hours, training_runtime_minutes
from aoe.plan.cluster import PlanCost, placeholder_line, slurm_profile, slurm_retries
from aoe.plan.ledger import reading_presets
from aoe.plan.trees import explain_tree, record_tree
from aoe.plan.scheduling import drop_default_rate_limit
from aoe.config.hparams import freeze_for_planning
from aoe.config.errors import ConfigError
from aoe.config.cells import PRETRAINED, RELEASED, Cell, results_path, run_cells
from aoe.config.pretrained import pretrained_embedding, released_checkpoints
from aoe.config.cell_settings import (
    cell_eval_gold,
    cell_eval_pooling,
    evaluation_text,
    init_cell,
    loss_settings,
    settings_changed,
    train_params,
)
from aoe.config.rows import grid_paper_rows, table_rows
from aoe.config.checkpoint_selection import scored_split_selections
from aoe.config.captions import protocol_differences, training_summary
from aoe.config.workflow import (
    built_analyses,
    built_tables,
    cell_parts,
    eval_cells,
    suite_results,
    table_inputs,
    table_target,
)
from aoe.config.measures import measured_rows
from aoe.config.memory import grows_on_retry
from aoe.data.io import DataError
from aoe.data.mirror import DOWNSTREAM_SUBDIR, mirror_sources, resolve_downstream_root, upstream_url
from aoe.data.sts import STS_DATASETS, STS_TASKS, sts_files
from aoe.data.glue import HUB_PAIR_SETS
from aoe.data.nli import NLI_MIRROR_FILES
from aoe.data.transfer import transfer_files
from aoe.evaluate.nli_probe import probe_inputs
from aoe.data.catalog import ALLNLI_FILE, SOURCES, dataset_splits
from aoe.util.formats import TOKEN_CACHE_FORMAT
from aoe.model.pooling_names import BATCHED_EVAL_POOLING_RE, EVAL_POOLING_NAMES
from aoe.llm_supervised import generators as llm_generators
from aoe.results.stats import FLAG_RULE

# config.yaml, then the --configfile files (a preset), then --config: the files and values a message
# names (the report names the preset behind each table, the recipe the file behind each value)
CONFIGFILES, CONFIG_OVERRIDES = config_sources(workflow)
RUN_CONFIGFILES = [os.path.relpath(f) for f in CONFIGFILES]
# the paper grid's ledger lists the readings of the sources it did not take: the overlay presets over it
RECIPE_READINGS = reading_presets(
    Path.cwd(), RUN_CONFIGFILES
)  # the run is in the repository root (aoe.plan.targets.explain_workdir)

try:
    # the schema, then every cross-key check (aoe.plan.check: the rules files check nothing more);
    # one line naming the key and its file; fills in the schema's defaults
    complete_config(config, workflow.source_path("../schemas/config.schema.yaml"), CONFIGFILES, CONFIG_OVERRIDES)
except ConfigError as err:
    raise WorkflowError(f"config: {err}") from None
# an interrupted training (Ctrl-C, SIGTERM: a checkpoint, exit 75) and a stop on request are said as such, once,
# not as failed jobs (aoe.plan.interruptions; a real failure keeps Snakemake's every line)
if workflow.is_main_process:
    install_interruption_filter()
# under a SLURM profile: an unedited partition/account placeholder said at planning, and a dry run's trainings
# costed where it ends (requested and estimated GPU-hours; aoe.plan.cluster, issue 71)
if workflow.is_main_process:
    _slurm = slurm_profile(sys.argv)
    if _slurm is not None:
        _placeholder = placeholder_line(*_slurm, config)
        if _placeholder:
            logger.warning(_placeholder)
        logger.addFilter(PlanCost(slurm_retries(sys.argv, _slurm[1]), lambda w: planned_cost(w)))
# the tree belongs to the file that names it (results:): a copy of a preset with other settings would retrain into,
# and --report from, the preset's tree (aoe.plan.trees; its record is written as the run starts: Snakefile, onstart)
if workflow.is_main_process:
    _why = explain_tree(config, CONFIGFILES, CONFIG_OVERRIDES, workflow.basedir)
    if _why:
        raise WorkflowError(_why)
freeze_for_planning(config)


@functools.cache
def grid_config():
    """The paper grid (config.yaml alone), which a preset's tables are compared with (protocol_differences): read
    when a table job or a target's explanation asks for it, not at each planning."""
    return config if len(CONFIGFILES) == 1 and not CONFIG_OVERRIDES else load_config(workflow.basedir, [])


def R(path):
    """A ``results/...`` path in this configuration's results tree (config ``results``)."""
    return results_path(config, path)


try:
    # a mirror named (data.mirror or $AOE_DATA_MIRROR) must be one: said here, not at the first copy.
    # Where it is and whether one is set change nothing in the plan (rule download_file).
    resolve_downstream_root(config["data"]["mirror"])
except DataError as err:
    raise WorkflowError(str(err)) from None  # names data.mirror or AOE_DATA_MIRROR, whichever was used

# Trained models that record other settings than the config gives now: said at every planning, since
# Snakemake retrains them only from the params it recorded (.snakemake/), which may be gone
_changed = settings_changed(config, run_cells(config))
if _changed:
    logger.warning(
        f"{len(_changed)} trained model(s) record other settings than the config now gives "
        f"(first: {R(f'results/models/{_changed[0][0].path}')}, {_changed[0][1]}): Snakemake retrains them from the "
        "params it recorded in .snakemake/; if that record is gone, it cannot tell: add --forcerun train_model "
        "(or delete those model folders and their .ckpt folders)"
    )

# Trained models of other code than the tree's (an edited loss, step or pooling): Snakemake cannot see package
# code, so planning names them and the command that retrains them (aoe.plan.code_changes; issue 70)
if workflow.is_main_process:
    _other_code = models_of_other_code(config, run_cells(config))
    if _other_code:
        logger.warning(code_change_message(_other_code, RUN_CONFIGFILES[1:], bool(CONFIG_OVERRIDES)))

NLI_DATASETS = ["allnli", *NLI_MIRROR_FILES]
PAIR_DATASETS = [d for d in SOURCES if d not in NLI_DATASETS]
ALL_SPLITS = sorted({s for splits in dataset_splits(config).values() for s in splits})

# the configured suites on every model of the grid, and every result a table reads
EVAL_RESULTS = suite_results(config)

# the analyses build.analyses names (a preset names its own: none where it leaves the key out of its list)
_sat = config["analysis"]["saturation"]
SATURATION_RESULTS = (
    [R(f"results/analysis/saturation/{b}/{_sat['dataset']}-{_sat['split']}.json") for b in _sat["backbones"]]
    if "saturation" in built_analyses(config)
    else []
)

GIS_RESULTS = (
    [
        R("results/analysis/gis/stats.json"),
        *(
            R(f"results/figures/{f}.{e}")
            for f in ("gis_fig8_ngram_overlap", "gis_fig9_token_lengths")
            for e in ("pdf", "png")
        ),
    ]
    if "gis" in built_analyses(config)
    else []
)

# the values of a results path's backbone/objective/trainset folders
CELL_PARTS = cell_parts(config)

# datasets of the STS tasks evaluated (config evaluation.sts.tasks, default all seven)
STS_EVAL_DATASETS = [STS_TASKS[t] for t in config["evaluation"]["sts"]["tasks"]]


wildcard_constraints:
    backbone="|".join(map(re.escape, CELL_PARTS["backbone"])),
    objective="|".join(map(re.escape, CELL_PARTS["objective"])),
    trainset="|".join(map(re.escape, CELL_PARTS["trainset"])),
    dataset="|".join(dataset_splits(config)),
    split="|".join(ALL_SPLITS),
    seed=r"\d+(?:-rerun[1-9]\d*)?",  # the run: seed, or seed-rerunK (aoe.config.cells.Cell.run)
    max_len=r"\d+",
    table="|".join(map(re.escape, built_tables(config))) or "NO_TABLES",
    evalset="|".join(map(re.escape, config["trainsets"])) or "NO_TRAINSETS",
    # a pooling, or an official one in SentEval batches of a named size (aoe.model.pooling_names.split_senteval_batch)
    eval_pooling="|".join([BATCHED_EVAL_POOLING_RE, *map(re.escape, EVAL_POOLING_NAMES)]),


def get_model_dir(wildcards):
    """A trained model folder, the backbone as downloaded for objective 'pretrained', or a published
    checkpoint (objective 'released', train set its released.checkpoints key) laid out as a trained one."""
    if wildcards.objective == PRETRAINED:
        return R(f"results/backbones/{wildcards.backbone}")
    if wildcards.objective == RELEASED:
        return R(f"results/released/{wildcards.trainset}")
    return R(f"results/models/{wildcards.backbone}/{wildcards.objective}/{wildcards.trainset}/seed{wildcards.seed}")


def get_eval_pooling(wildcards):
    """The pooling of a backbone evaluated as downloaded (its own, or its pretrained variant's, the
    cell's train set); None for a trained one (its folder records it)."""
    if wildcards.objective == PRETRAINED:
        return pretrained_embedding(config, wildcards.backbone, wildcards.trainset)[0]
    return None


def get_prompt(wildcards):
    """An LLM backbone's prompt template (None for encoders), or a pretrained variant's; a trained model
    records the backbone's, a released checkpoint its own (its aoe_config.json)."""
    objective = getattr(wildcards, "objective", None)  # the tokenize rule has no objective
    if objective == RELEASED:
        return None
    if objective == PRETRAINED:
        return pretrained_embedding(config, wildcards.backbone, wildcards.trainset)[1]
    return config["backbones"][wildcards.backbone].get("prompt")


def get_cell_eval_pooling(wildcards):
    """The pooling an STS or transfer evaluation scores with instead of the trained one: an evaluation-only
    variant's (its file's wildcard), else the cell's resolved eval_pooling; None: the trained one."""
    if getattr(wildcards, "eval_pooling", None):
        return wildcards.eval_pooling
    return cell_eval_pooling(config, Cell.from_wildcards(wildcards))


def get_cell_eval_gold(wildcards):
    """The gold an in-domain evaluation's headline correlates with: the cell's resolved eval_gold (int where
    angle-emb's AnglE.evaluate scored the row's source, float otherwise; both are in the file)."""
    return cell_eval_gold(config, Cell.from_wildcards(wildcards))


def get_eval_text(wildcards):
    """How the cell's STS and transfer evaluations rewrite each text before the prompt
    (backbones.<name>.eval_text; the official eval.py's rewrite for the LLaMA cells)."""
    return evaluation_text(config, wildcards.backbone, wildcards.objective, wildcards.trainset)


def get_train_params(wildcards):
    cell = Cell.from_wildcards(wildcards)
    return train_params(config, cell.backbone, cell.objective, cell.trainset, cell.seed, job=True)


def get_loss_settings(wildcards):
    cell = Cell.from_wildcards(wildcards)
    return loss_settings(config, cell.backbone, cell.objective, cell.trainset, cell.seed)


def get_init_model(wildcards):
    """The trained model a cell starts from (trainsets.<t>.train.init), or none: the backbone's weights."""
    start = init_cell(config, Cell.from_wildcards(wildcards))
    return R(f"results/models/{start.path}") if start else []


def _trainset_table_name(wildcards):
    """{split} for pairs, {split}.{format} for the other formats (see aoe.data.catalog.table_paths)."""
    ts = config["trainsets"][wildcards.trainset]
    fmt = get_train_params(wildcards)["format"]
    return ts["split"] if fmt == "pairs" else f"{ts['split']}.{fmt}"


def get_trainset_table(wildcards):
    ts = config["trainsets"][wildcards.trainset]
    return R(f"results/data/{ts['dataset']}/{_trainset_table_name(wildcards)}.parquet")


def get_trainset_tokens(wildcards):
    ts = config["trainsets"][wildcards.trainset]
    max_len = get_train_params(wildcards)["max_length"]
    return R(f"results/tokens/{wildcards.backbone}-{max_len}/{ts['dataset']}/{_trainset_table_name(wildcards)}")


def get_table_inputs(wildcards):
    return table_inputs(config, wildcards.table)


def get_indomain_split(wildcards):
    """The in-domain evaluation table of a train set: its dataset's eval_split."""
    ts = config["trainsets"][wildcards.evalset]
    if not ts.get("eval_split"):
        raise WorkflowError(f"trainsets.{wildcards.evalset}: no eval_split, so no in-domain evaluation")
    return R(f"results/data/{ts['dataset']}/{ts['eval_split']}")


def backbone_resources(wildcards):
    """backbones.<backbone>.resources of a job's backbone wildcard (the schema fills in the defaults)."""
    return config["backbones"][wildcards.backbone]["resources"]


def _capped(resources, key, value):
    """A runtime request cut to the backbone's max_runtime (the cluster's MaxTime, docs/cluster.md)."""
    if key.endswith("runtime") and resources.get("max_runtime"):
        return min(value, resources["max_runtime"])
    return value


def train_resources(key):
    """A training job's resource from its backbone's config; a runtime at most max_runtime (``auto``: the training's
    estimate times a margin, aoe.plan.cost); a memory request that grows with each retry (aoe.config.memory.grows_on_retry).
    """

    def resource(wildcards):
        resources = backbone_resources(wildcards)
        value = resources[key]
        if key == "runtime" and value == "auto":
            cell = Cell.from_wildcards(wildcards)
            try:
                value = training_runtime_minutes(get_train_params(wildcards), cell.backbone, cell.trainset, resources)
            except CostError as err:
                raise WorkflowError(
                    f"backbones.{cell.backbone}.resources.runtime: auto cannot size {cell.path}: {err}; "
                    "add its size there or give the runtime in minutes"
                ) from None
        return _capped(resources, key, value)

    return grows_on_retry(resource) if key.endswith("mem_mb") else resource


def planned_cost(wildcards):
    """(estimated GPU-hours, the speed's source) of a planned training (its dry run's wildcards); None where its
    train set's size is unknown (aoe.plan.cost)."""
    cell = Cell.from_wildcards(wildcards)
    try:
        hours, source, _ = training_gpu_hours(
            get_train_params(wildcards), cell.backbone, cell.trainset, config["backbones"][cell.backbone]["resources"]
        )
    except CostError:
        return None
    return hours, source


def gpu_placement(resources_of=None):
    """Where a backbone's GPU job runs, as SLURM resources (snakemake-executor-plugin-slurm):
    ``nodes=1`` (sbatch --nodes=1: a 4-GPU training is one ``accelerate launch`` on one node, so
    its GPUs must not be spread over nodes; no ``tasks``, which the plugin turns into
    --ntasks-per-gpu: the job is one SLURM task that starts a process per GPU), and the backbone's
    ``resources.partition`` (-p) and ``resources.constraint`` (-C, e.g. the GPU type).

    A key no backbone of the config sets is not declared at all, so the profile's
    default-resources (slurm_partition) still reach these jobs; once a backbone sets it, a
    backbone without it leaves the partition to the plugin (slurm-partition-config or the
    cluster's default partition). docs/cluster.md. ``resources_of(wildcards)``: the resources of the
    backbone the job runs (default: its {backbone} wildcard's)."""
    resources_of = resources_of or backbone_resources
    placement = {"nodes": 1}
    for key, resource in (("partition", "slurm_partition"), ("constraint", "constraint")):
        if any((b.get("resources") or {}).get(key) for b in config["backbones"].values()):
            placement[resource] = lambda wildcards, key=key: resources_of(wildcards).get(key)
    return placement


def library_code(*modules):
    """Package modules a rendering job runs, as inputs: Snakemake's code trigger sees only the job's
    own script, so an edit of aoe/results/tables.py would otherwise leave every table stale. Relative to the
    working folder, as RUN_CONFIGFILES: an absolute path is part of the job's recorded input set, so a results
    tree moved or copied elsewhere replanned every table, figure and report ("Set of input files has changed")."""
    return [os.path.relpath(Path(workflow.basedir) / "aoe" / m) for m in modules]


def eval_resources(key, scale=1, extra=0):
    """A job's resource that loads a backbone to embed or generate, from the backbone's config
    (LLaMA needs more than BERT): ``scale`` times the STS evaluation's, plus ``extra``; a runtime
    at most the backbone's max_runtime; a memory request that grows with each retry (aoe.config.memory.grows_on_retry).
    """
    resource = lambda wildcards: _capped(
        backbone_resources(wildcards), key, int(backbone_resources(wildcards)[key] * scale) + extra
    )
    return grows_on_retry(resource) if key.endswith("mem_mb") else resource


def file_url(relpath):
    """Where download_file fetches a file: config data.urls, AllNLI's URL, or the mirror file's recorded source."""
    if relpath in config["data"]["urls"]:
        return config["data"]["urls"][relpath]
    if relpath == ALLNLI_FILE:
        return config["data"]["allnli_url"]
    return upstream_url(relpath)


def file_sha256(relpath):
    if relpath == ALLNLI_FILE:
        return config["data"]["allnli_sha256"]
    return mirror_sources().get(relpath, {}).get("sha256")


# every published file the workflow reads, in the mirror's layout: copied from the data mirror when
# it has the file, else downloaded from its recorded source (rule download_file). One folder either
# way, so a run with AOE_DATA_MIRROR and one without plan the same jobs and rerun nothing.
DOWNLOADED_FILES = Path(R("results/downloads/files"))
# SentEval's downstream folder there, read as a whole by SentEval's own code (transfer tasks, backend senteval)
DOWNSTREAM = DOWNLOADED_FILES / DOWNSTREAM_SUBDIR


def get_pairset_root(wildcards):
    """The folder a split is read from: the published files' folder, or a hub snapshot."""
    src = SOURCES[wildcards.dataset][wildcards.split]
    if src.kind == "hub":
        return R(f"results/downloads/hub/{wildcards.dataset}")
    return str(DOWNLOADED_FILES)


def get_pairset_input(wildcards):
    if wildcards.split not in SOURCES[wildcards.dataset]:
        raise WorkflowError(
            f"dataset {wildcards.dataset!r} has no split {wildcards.split!r}; it has {list(SOURCES[wildcards.dataset])}"
        )
    src = SOURCES[wildcards.dataset][wildcards.split]
    if src.kind == "hub":
        return R(f"results/downloads/hub/{wildcards.dataset}")
    return [str(DOWNLOADED_FILES / f) for f in src.files]


def get_transfer_inputs(wildcards):
    """The SentEval files of the transfer tasks evaluated, in SentEval's folder."""
    return [str(DOWNSTREAM / f) for t in config["evaluation"]["transfer"]["tasks"] for f in transfer_files(t)]


def get_llm_generator(wildcards):
    """The llm_supervised.generators entry of an {llmset} job (rules/llm_supervised.smk)."""
    return llm_generators(config)[wildcards.llmset]


def llm_generator_resources(wildcards):
    """An llm_generate job is sized like an evaluation of its generator (forward passes, no gradients)."""
    return config["backbones"][get_llm_generator(wildcards)["backbone"]]["resources"]
