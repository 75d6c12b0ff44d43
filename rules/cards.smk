# Model cards and the push to the Hugging Face hub (aoe.publish.modelcard, aoe.publish.hub).
#
# A card is its own output, results/cards/<cell>/README.md, never a file in the model folder: that
# folder is train_model's directory output (and the resumed run's identity), and a file added to it
# would rerun everything downstream. Pushing uploads the model folder's files and the card together.
# The grid never pushes: `snakemake push_models` (every trained cell) or one cell's
# results/hub/<cell>.json, to config model_cards.repo_id, with HF_TOKEN in the environment.

from aoe.publish.modelcard import CardPlanner, card_path, check_card_config, push_repo_id

try:
    check_card_config(config)
except ConfigError as err:
    raise WorkflowError(f"config: {err}") from None

# what each trained cell's card says, from the config: built once, each cell when its job is planned
CARD_PLANNER = CardPlanner(config, RUN_CONFIGFILES, EVAL_RESULTS)
CARD_RESULTS = [card_path(config, c) for c in run_cells(config) if c.trained]


localrules:
    model_card,
    push_model,
    push_models,


rule model_card:
    input:
        model=R("results/models/{backbone}/{objective}/{trainset}/seed{seed}"),
        # every result the workflow makes of the cell (the configured suites, what tables read)
        results=lambda wildcards: CARD_PLANNER.results_of(Cell.from_wildcards(wildcards)),
        numbers="aoe/resources/paper_numbers.yaml",
        code=library_code("publish/modelcard.py"),
    output:
        R("results/cards/{backbone}/{objective}/{trainset}/seed{seed}/README.md"),
    log:
        R("results/logs/cards/{backbone}/{objective}/{trainset}/seed{seed}.log"),
    conda:
        "../envs/cards.yaml"
    params:
        # the recipe ledger's rows, the hub metadata and the paper rows compared: a change redoes the card
        plan=lambda wildcards: CARD_PLANNER.plan(Cell.from_wildcards(wildcards)),
    script:
        "../workflow_scripts/model_card.py"


rule push_model:
    # needs the internet and a token (HF_TOKEN): a local rule; the receipt holds the commit, never the token
    input:
        model=R("results/models/{backbone}/{objective}/{trainset}/seed{seed}"),
        card=R("results/cards/{backbone}/{objective}/{trainset}/seed{seed}/README.md"),
    output:
        R("results/hub/{backbone}/{objective}/{trainset}/seed{seed}.json"),
    log:
        R("results/logs/hub/{backbone}/{objective}/{trainset}/seed{seed}.log"),
    conda:
        "../envs/hub.yaml"
    params:
        # model_cards.repo_id for the cell; null: an error naming the key
        repo_id=lambda wildcards: push_repo_id(config, Cell.from_wildcards(wildcards)),
        private=config["model_cards"]["private"],
    script:
        "../workflow_scripts/push_model.py"


rule push_models:
    # every trained cell of the configuration; asked for by name only (not in all)
    input:
        [R(f"results/hub/{c.path}.json") for c in run_cells(config) if c.trained],
