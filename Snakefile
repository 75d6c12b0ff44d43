# AoE / AnglE reproduction: raw data -> token caches -> training -> evaluation -> tables.
#
#   snakemake --cores 2 --configfile presets/cpu-demo.yaml     # CPU demo
#   snakemake --profile slurm all                              # the paper's grid on a SLURM cluster
#
# results/                                      (the workflow's API: every rule writes one of these)
# ├── downloads/files/, downloads/hub/          raw sources (SentEval's files, upstream files, hub datasets), when not mirrored
# ├── data/{dataset}/{split}.parquet            sentence1, sentence2, score, split, subset
# │        {split}.manifest.json                source files, sha256, row counts
# │        {split}.triplets.parquet, .nli3.parquet   NLI in the other training formats
# ├── llm_supervised/                           AnglE Table 4: sampled texts, generations (data/stsb_llm, stsb_self)
# ├── backbones/{backbone}/                     the backbone as downloaded (local rule)
# ├── tokens/{backbone}-{max_len}/{dataset}/{split}/   datasets Arrow token cache + cache.json
# ├── models/{backbone}/{objective}/{trainset}/seed{seed}/   weights, aoe_config.json, versions.json, metrics.jsonl,
# │        tensorboard/ (the training curves' event files)
# ├── eval/{backbone}/{objective}/{trainset}/seed{seed}/{suite}.json   sts, indomain_{evalset}, transfer,
# │                                             nli_probe, mteb, flickr30k
# ├── embeddings/{model key}/{text-set key}.npz  embedding cache shared by a model's evaluations
# │        (objective "pretrained", trainset "none", seed0: the backbone as downloaded)
# ├── analysis/saturation/{backbone}/{dataset}-{split}.json   cosine saturation of training pairs
# ├── analysis/figures/{backbone}/.../{dataset}-test.npz     pair embeddings and t-SNE the figures draw
# ├── analysis/gis/stats.json                   GIS Table 7 / Fig. 8-9 data (published dataset)
# ├── gis/collected/pairs.jsonl, stats.json     our own GIS collection (target gis_collect)
# ├── figures/{figure}.pdf, .png, .json
# │        training_curves/{table}.pdf, .png, .json   loss vs step of each table's trained models
# ├── tables/{table}.tex, .md, .csv, .json
# ├── cards/{backbone}/{objective}/{trainset}/seed{seed}/README.md   model card (hub front matter, evaluation
#                                             beside the paper, recipe, usage); hub/{...}.json: a push's receipt
# ├── REPORT.md                                 every reproduced number beside the paper's
# ├── REPORT.html, RECIPE.html, tables/{table}.html   the same rendered for `snakemake --report`
# ├── RUNTIMES.tsv, .html                       every job's wall time and max RSS from its benchmark file
# ├── logs/, benchmarks/                        one per job
# └── configuration.json                        the config file that names this tree, and its resolved settings
#                                               (aoe.plan.trees: another file naming the tree is refused)

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

min_version("9.0")


# config.yaml and every relative path are read from the working directory: a run started elsewhere
# (`snakemake -s ../Snakefile`) would read the preset alone and blame it for what config.yaml holds
from aoe.plan.targets import explain_workdir

_elsewhere = explain_workdir(workflow.basedir)
if _elsewhere:
    raise WorkflowError(_elsewhere)


configfile: "config.yaml"


# `snakemake -n -q rules` printed its job counts twice, the second table straight under the first (Snakemake logs
# them before and after a dry run's job list, which -q rules leaves out): the counts once, then the reasons
from aoe.plan.targets import job_counts_once

job_counts_once(workflow)


# the report's front page: where to start (the summary), before Snakemake's rule graph
report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/llm_supervised.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/tables.smk"
include: "rules/gis.smk"
include: "rules/mteb.smk"
include: "rules/figures.smk"
include: "rules/report.smk"
include: "rules/cards.smk"


# the tree records which file made it, and its settings (aoe.plan.trees: another file naming it is refused
# in rules/common.smk); hooks run in a real run's main process only, not in a dry run. Snakemake's default
# start-rate limit would wake the scheduler ever more often as jobs finish (aoe.plan.scheduling).
onstart:
    record_tree(config, CONFIGFILES, CONFIG_OVERRIDES)
    drop_default_rate_limit(workflow.scheduler)


rule all:
    default_target: True
    input:
        expand(R("results/tables/{table}.tex"), table=built_tables(config)),
        EVAL_RESULTS,
        SATURATION_RESULTS,
        GIS_RESULTS,
        FIGURE_RESULTS,
        CURVE_RESULTS,
        R("results/REPORT.md"),
        R("results/RECIPE.md"),
        CARD_RESULTS,
        REPORT_PAGES,
        RUNTIME_RESULTS,


rule train:
    input:
        [R(f"results/models/{c.path}") for c in run_cells(config)],


rule evaluate:
    input:
        EVAL_RESULTS,


rule analysis:
    input:
        SATURATION_RESULTS,
        GIS_RESULTS,


rule tables:
    input:
        expand(R("results/tables/{table}.tex"), table=built_tables(config)),


rule figures:
    input:
        [f for f in GIS_RESULTS if f.startswith(R("results/figures/"))],
        FIGURE_RESULTS,
        CURVE_RESULTS,


# One target per table: `snakemake table2` builds results/tables/table2_indomain.tex and only
# what it needs (aoe.config.workflow.table_target: table<N>, else the whole name, e.g. table_mteb).
for _table in built_tables(config):

    rule:
        name:
            table_target(_table)
        input:
            R(f"results/tables/{_table}.tex"),


# Snakemake says only "No rule to produce X" for a target no rule matches: name the unknown part
# (backbone, objective, train set, seed, dataset, split, table) or the config file not building it.
from aoe.plan.targets import explain_report, explain_target, requested_report, requested_targets

from snakemake.io import strip_wildcard_constraints

_wildcard_rules = {r.name: strip_wildcard_constraints(str(r.output[0])) for r in workflow.rules if r.has_wildcards()}
for _target in requested_targets(sys.argv):
    _why = explain_target(
        _target,
        config,
        rule_names=[r.name for r in workflow.rules],
        configfiles=CONFIGFILES,
        wildcard_rules=_wildcard_rules,
        grid=grid_config,
    )
    if _why:
        raise WorkflowError(f"target {_why}")
# `snakemake --report` without the run's --configfile files plans another configuration and prints a
# "Missing metadata" line for each of its outputs: say which configuration the report needs
_report = requested_report(sys.argv) if not requested_targets(sys.argv) else None
_why = explain_report(_report, config, CONFIGFILES) if _report else None
if _why:
    raise WorkflowError(_why)
