"""Model cards: a ``README.md`` for every trained model, as the Hugging Face hub shows it.

Rule ``model_card`` (rules/cards.smk) writes ``results/cards/<cell>/README.md`` beside the model
folder, never into it: ``results/models/<cell>`` is train_model's directory output, and a file added
to it would make Snakemake rerun everything downstream (and it is the resumed run's identity).
``aoe export`` / ``aoe push`` (aoe.publish.hub) put the card at the root of the repository they lay out.

A card is

* front matter written by huggingface_hub's own :class:`~huggingface_hub.ModelCardData`:
  library, base model, datasets, ``pipeline_tag: sentence-similarity``, tags, the base model's
  license where config ``model_cards.licenses`` knows it, and a ``model-index`` of
  :class:`~huggingface_hub.EvalResult` (one per task and metric, the value as the result file has it);
* the recipe from the ledger (:func:`aoe.plan.ledger.cell_ledger`, what ``snakemake recipe`` prints in
  RECIPE.md): every value, the key and file that set it, its source, the official code's value, and
  ⚠ where ours differs;
* every evaluation result of the cell that the workflow makes (``results/eval/<cell>/*.json``), beside
  the paper's number where a table of the config compares that row with one (the table's ``paper``
  and ``reproduction`` references, read from paper_numbers.yaml as aoe.results.paper_numbers reads them);
* usage: sentence-transformers on the pushed repository (or the model folder, which training made
  a sentence-transformers model) and ``aoe embed`` on the model folder.

:class:`CardPlanner` resolves, from the config alone, what a cell's card says (:func:`CardPlanner.plan`,
the rule's params, so a card is redone exactly when its recipe or its comparisons change);
:func:`render_card` reads the model folder's aoe_config.json and the result files. Torch-free.

    python -m aoe card results/models/<backbone>/<objective>/<trainset>/seed<N> [--configfile PRESET] [--out README.md]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

from aoe.config.workflow import suite_file, built_tables
from aoe.config.cells import Cell, parse_run, results_path, run_cells
from aoe.config.errors import ConfigError
from aoe.config.rows import row_label, table_rows
from aoe.model.pooling_names import OFFICIAL_POOLING_NAMES
from aoe.plan.ledger import ConfigFiles, cell_ledger, format_value, md_cell, recipe_table, training_length

__all__ = ["CardError", "CardPlanner", "card_path", "cell_repo_id", "check_card_config", "push_repo_id", "render_card", "write_card", "main"]

CARDS = "results/cards"
PIPELINE_TAG = "sentence-similarity"
# the repo_id template's fields
REPO_FIELDS = ("backbone", "objective", "trainset", "seed", "run")
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]{1,96}$")


class CardError(ValueError):
    """A card cannot be written as asked (a result file missing, not a trained model folder); the message says which and how to fix it."""


def card_path(config: dict, cell: Cell) -> str:
    return results_path(config, f"{CARDS}/{cell.path}/README.md")


def _cards_config(config: dict) -> dict:
    return config.get("model_cards") or {}


def cell_repo_id(config: dict, cell: Cell) -> str | None:
    """The hub id ``model_cards.repo_id`` gives the cell (a template over :data:`REPO_FIELDS`), or None."""
    template = _cards_config(config).get("repo_id")
    if not template:
        return None
    return template.format(backbone=cell.backbone, objective=cell.objective, trainset=cell.trainset, seed=cell.seed, run=cell.run)


def push_repo_id(config: dict, cell: Cell) -> str:
    """The hub id a push of ``cell`` goes to; an error naming the key when config model_cards.repo_id is null."""
    repo_id = cell_repo_id(config, cell)
    if repo_id is None:
        raise ConfigError(
            "push: config model_cards.repo_id is null; set a hub id template in a config file, e.g. "
            "model_cards: {repo_id: 'your-name/aoe-{backbone}-{objective}-{trainset}-seed{run}'}"
        )
    return repo_id


def check_card_config(config: dict) -> None:
    """The ``model_cards`` keys name known backbones, and the repo_id template makes a valid hub id."""
    cards = _cards_config(config)
    for key in ("base_models", "licenses"):
        unknown = sorted(set(cards.get(key) or {}) - set(config["backbones"]))
        if unknown:
            raise ConfigError(f"model_cards.{key}: unknown backbone(s) {', '.join(unknown)}; known: {', '.join(config['backbones'])}")
    template = cards.get("repo_id")
    if template:
        try:
            example = template.format(backbone="b", objective="o", trainset="t", seed=42, run="42")
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(
                f"model_cards.repo_id {template!r}: a template over {{{'}, {'.join(REPO_FIELDS)}}} only ({type(exc).__name__}: {exc})"
            ) from None
        if not _REPO_ID.match(example):
            raise ConfigError(f"model_cards.repo_id {template!r}: not a hub id <namespace>/<name> (gives {example!r})")


# ---------------------------------------------------------------------------
# What a card says, from the config (planning time: the rule's params).


def _result_suite(name: str) -> tuple[str, str, str]:
    """(suite, evaluation-only pooling, in-domain eval set) of a result file name."""
    stem = name.removesuffix(".json")
    if stem.startswith("indomain_"):
        return "indomain", "", stem.removeprefix("indomain_")
    suite, _, pooling = stem.partition(".pool-")
    return suite, pooling, ""


class CardPlanner:
    """What each trained cell's card says, from the config: built once per workflow, each cell on demand.

    ``eval_results``: the result files the workflow makes (``aoe.config.workflow.suite_results``), whose
    files under ``results/eval/<cell>/`` the card reports. ``configfiles``: the files merged into
    the config, in merge order (the ledger names the file behind each value).
    """

    def __init__(self, config: dict, configfiles: list[str], eval_results: list[str]):
        self.config = config
        self.configfiles = [str(f) for f in configfiles]
        self.eval_results = list(eval_results)
        self._by_cell: dict[str, list[str]] | None = None
        self._rows: dict[Cell, list[dict]] | None = None
        self._files = None

    def results_of(self, cell: Cell) -> list[str]:
        """The cell's result files, in name order."""
        if self._by_cell is None:
            self._by_cell = {}
            root = results_path(self.config, "results/eval") + "/"
            for f in self.eval_results:
                if f.startswith(root):
                    cell_path, _, name = f[len(root):].rpartition("/")
                    self._by_cell.setdefault(cell_path, []).append(f)
        return sorted(self._by_cell.get(cell.path, []))

    def _table_rows(self) -> dict[Cell, list[dict]]:
        """Cell -> every table row that shows it: table, kind, label, evaluation pooling, train sets, paper refs."""
        if self._rows is None:
            from aoe.config.table_kinds import table_kind
            from aoe.results.tables import row_paper_refs

            self._rows = {}
            for table, spec in built_tables(self.config).items():
                kind = table_kind(spec["kind"])
                if kind.suite is None:
                    continue
                rows = table_rows(self.config, table)
                dicts = [r.as_dict() for r in rows]
                refs = row_paper_refs(spec, dicts)
                repros = row_paper_refs(spec, dicts, "reproduction")
                for row, d, ref, repro in zip(rows, dicts, refs, repros):
                    entry = {"table": table, "kind": kind.name, "suite": kind.suite, "label": row_label(d),
                             "eval_pooling": row.eval_pooling, "eval_gold": row.eval_gold, "trainsets": list(row.trainsets), "paper": ref,
                             "reproduction": repro}
                    for cell in row.cells:
                        self._rows.setdefault(cell, []).append(entry)
        return self._rows

    def comparisons(self, cell: Cell, result: str) -> list[dict]:
        """The table rows that show ``result`` (a result file of ``cell``): one entry per table."""
        suite, pooling, evalset = _result_suite(Path(result).name)
        out = []
        for e in self._table_rows().get(cell, []):
            if e["suite"] != suite:
                continue
            if suite == "indomain":
                # a gold variant row reads the file's other gold (by_gold), not the headline a card prints
                if evalset != cell.trainset or evalset not in e["trainsets"] or e["eval_gold"]:
                    continue
            elif Path(result).name != suite_file(suite, e["eval_pooling"]):
                continue
            out.append({k: e[k] for k in ("table", "kind", "label", "paper", "reproduction")})
        return out

    def _ledger(self, cell: Cell) -> tuple[str | None, list[dict], str]:
        from aoe.config.cell_settings import train_params

        if self._files is None:
            self._files = ConfigFiles([Path(p) for p in self.configfiles])
        name, rows = cell_ledger(self.config, cell, self._files)
        params = train_params(self.config, cell.backbone, cell.objective, cell.trainset, cell.seed)
        return name, rows, training_length(self.config, cell, params)

    def plan(self, cell: Cell) -> dict:
        """Everything the card of ``cell`` takes from the config (JSON-able: a Snakemake param)."""
        config, cards = self.config, _cards_config(self.config)
        bb = config["backbones"][cell.backbone]
        ts = config["trainsets"][cell.trainset]
        official, rows, length = self._ledger(cell)
        finetune = next((r["value"] for r in rows if r["key"] == "finetune"), "full")
        datasets = _hub_datasets(config, ts["dataset"])
        return {
            "cell": {"backbone": cell.backbone, "objective": cell.objective, "trainset": cell.trainset, "seed": cell.seed,
                     "rerun": cell.rerun, "run": cell.run, "path": cell.path},
            "model_dir": results_path(config, f"results/models/{cell.path}"),
            "repo_id": cell_repo_id(config, cell),
            "base_model": (cards.get("base_models") or {}).get(cell.backbone) or bb.get("hf_id"),
            "license": (cards.get("licenses") or {}).get(cell.backbone),
            "finetune": finetune,
            "trainset": {"name": cell.trainset, "dataset": ts["dataset"], "split": ts["split"], "hub": datasets},
            "recipe": {"official_recipe": official, "length": length, "rows": rows},
            "results": [{"file": f, "compare": self.comparisons(cell, f)} for f in self.results_of(cell)],
        }


def _hub_datasets(config: dict, dataset: str) -> list[str]:
    """The hub datasets a train set's data is (config model_cards.datasets, else the hub repository it is read from)."""
    from aoe.data.glue import HUB_PAIR_SETS

    given = (_cards_config(config).get("datasets") or {}).get(dataset)
    if given:
        return [given] if isinstance(given, str) else list(given)
    return [HUB_PAIR_SETS[dataset]["repo"]] if dataset in HUB_PAIR_SETS else []


# ---------------------------------------------------------------------------
# Reading the results and writing the card.

# suite -> (model-index task type, task name, metric type, metric name)
_INDEX = {
    "sts": ("sentence-similarity", "Semantic Textual Similarity", "spearman_cosine", "Spearman correlation of cosine similarities (x100)"),
    "indomain": ("sentence-similarity", "Semantic Textual Similarity (in-domain)", "spearman_cosine",
                 "Spearman correlation of cosine similarities (x100)"),
    "transfer": ("text-classification", "SentEval transfer (logistic regression on frozen embeddings)", "accuracy", "Accuracy (%)"),
    "nli_probe": ("text-classification", "NLI probe (classifier on frozen embeddings)", "accuracy", "Accuracy (%)"),
}
_SUITE_TITLES = {
    "sts": "STS (7 tasks, SentEval 'all' setting, Spearman x100)",
    "indomain": "In-domain test (Spearman x100)",
    "transfer": "SentEval transfer tasks (accuracy %)",
    "nli_probe": "NLI probe (accuracy %)",
    "mteb": "MTEB (category averages)",
    "flickr30k": "Flickr30k retrieval",
}


def _reader(suite: str):
    from aoe.config.table_kinds import KINDS

    return next(k.read for k in KINDS.values() if k.suite == suite and k.read is not None)


def _fmt(v: Any, digits: int = 2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"




def _read_results(plan: dict, allow_missing: bool, root: Path) -> tuple[list[dict], list[str]]:
    """Each result file's values by column (None: not measured), and the files that are missing."""
    read, missing = [], []
    for entry in plan["results"]:
        path = root / entry["file"]
        name = Path(entry["file"]).name
        suite, pooling, evalset = _result_suite(name)
        if not path.is_file():
            missing.append(entry["file"])
            continue
        try:
            result = json.loads(path.read_text())
            values = _reader(suite)(result, path)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CardError(f"{entry['file']}: not a {suite} result file ({type(exc).__name__}: {exc}); rerun its evaluation") from exc
        read.append({**entry, "suite": suite, "eval_pooling": pooling, "evalset": evalset, "values": values,
                     "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "result": result})
    if missing and not allow_missing:
        raise CardError(
            f"{plan['cell']['path']}: {len(missing)} evaluation result(s) missing: {', '.join(missing)}; "
            "make them first (snakemake <file>), or write the card without them (aoe card --allow-missing)"
        )
    return read, missing


def _model_record(model_dir: Path) -> dict:
    record = model_dir / "aoe_config.json"
    if not record.is_file():
        raise CardError(f"{model_dir}: not a trained model folder (no aoe_config.json); train it first (snakemake {model_dir})")
    try:
        return json.loads(record.read_text())
    except ValueError as exc:
        raise CardError(f"{record}: not valid JSON ({exc}); retrain the cell") from exc


def _paper(ref: str | None, columns: list[str], numbers_file: str | Path | None) -> tuple[str, dict[str, float]]:
    from aoe.results.paper_numbers import paper_reference

    if not ref:
        return "", {}
    label, values, _ = paper_reference(ref, numbers_file, columns)
    return label, values


def _eval_results(plan: dict, read: list[dict]) -> list:
    """huggingface_hub EvalResults of the model as it is shipped (its trained pooling): one per task of
    the STS, in-domain, transfer and NLI-probe files, our own numbers. The hub groups a model-index by
    task type, dataset and split: a number on a dataset already listed (the in-domain STS-B test is the
    STS suite's STS-B) stays in the text only, as do evaluation-only poolings, MTEB's category means and
    retrieval recalls."""
    from huggingface_hub import EvalResult

    from aoe.data.sts import STS_TASKS

    ts = plan["trainset"]
    out, seen = [], set()
    order = list(_INDEX)
    for r in sorted((r for r in read if r["suite"] in _INDEX and not r["eval_pooling"]), key=lambda r: order.index(r["suite"])):
        task_type, task_name, metric, metric_name = _INDEX[r["suite"]]
        for col, value in r["values"].items():
            if value is None or col == "avg":
                continue
            if r["suite"] == "sts":
                dtype, dname, split = STS_TASKS[col], col, "test"
            elif r["suite"] == "indomain":
                dtype, dname, split = ts["dataset"] if col == ts["name"] else col, col, r["result"].get("split") or "test"
            else:  # SentEval's own splits or k folds, the probe's held-out protocol: no single split to name
                dtype, dname, split = col.lower(), col, None
            if (task_type, dtype, split, metric) in seen:
                continue
            seen.add((task_type, dtype, split, metric))
            out.append(EvalResult(
                task_type=task_type, task_name=task_name, dataset_type=dtype, dataset_name=dname, dataset_split=split,
                metric_type=metric, metric_name=metric_name, metric_value=value,
            ))
    return out


def _card_data(plan: dict, read: list[dict], model_name: str):
    from huggingface_hub import ModelCardData

    c = plan["cell"]
    adapter = plan["finetune"] in ("lora", "qlora")
    tags = ["sentence-transformers", "sentence-similarity", "feature-extraction", "aoe", "angle", "text-embeddings",
            f"objective-{c['objective']}", f"trainset-{c['trainset']}"]
    if adapter:
        tags.append(plan["finetune"])
    evals = _eval_results(plan, read)
    return ModelCardData(
        library_name="peft" if adapter else "sentence-transformers",
        base_model=plan["base_model"],
        datasets=plan["trainset"]["hub"] or None,
        language="en",
        license=plan["license"],
        pipeline_tag=PIPELINE_TAG,
        tags=tags,
        model_name=model_name if evals else None,
        eval_results=evals or None,
    )


def _recipe_md(plan: dict) -> list[str]:
    rec = plan["recipe"]
    rows = rec["rows"]
    deviates = [r for r in rows if r["deviates"]]
    lines = [
        "## Training recipe",
        "",
        f"Trained by the AoE/AnglE reproduction pipeline (`snakemake`, rule train_model) for {rec['length']}. "
        "Every value below, the config key (and file) that set it, that key's source, and the official code's value "
        "for the same recipe (aoe/resources/official_recipes.yaml); ⚠: ours differs. `code` rows are defaults "
        "written in aoe/config/hparams.py or aoe/config/recipes.py with their source. The whole grid's ledger: RECIPE.md (`snakemake recipe`).",
        "",
        # the files behind these values (not every file of the run: another one added changes no card)
        "- Config files that set these values: " + (", ".join(f"`{f}`" for f in dict.fromkeys(
            r["file"] for r in rows if r["file"] and r["file"] != "code")) or "none (code defaults only)"),
        "- Official recipe compared: " + (f"`{rec['official_recipe']}`" if rec["official_recipe"] else
                                           "none (the official code has no recipe for this train set and backbone)"),
    ]
    if deviates:
        lines.append(f"- ⚠ {len(deviates)} value(s) differ from the official recipe: "
                     + "; ".join(f"{r['key']} {format_value(r['value'])} (official {format_value(r['official'])})" for r in deviates))
    else:
        lines.append("- No value differs from the official recipe" + ("." if rec["official_recipe"] else " (none to compare with)."))
    return lines + ["", *recipe_table(rows)]


def _results_md(plan: dict, read: list[dict], missing: list[str], numbers_file) -> list[str]:
    from aoe.results.render import paper_digits
    from aoe.results.stats import delta_bound, delta_text, paper_seeds_of

    lines = ["## Evaluation", ""]
    if not read and not missing:
        return lines + ["The configuration evaluates this model with no suite (config evaluation.suites).", ""]
    lines += [
        "This model's numbers (one training run: seed " + str(plan["cell"]["run"]) + ") beside the paper's, where a table "
        "of the configuration compares this row with a paper row (Δ = ours − paper, [±b] beside it: the gap a different "
        "seed alone makes, for one run of ours from AoE Table 4's seed spread; aoe.results.stats.FLAG_RULE). The tables "
        "(results/tables/) print the mean over the row's runs, with the bound from their own seeds.",
        "",
    ]
    order = list(_SUITE_TITLES)
    for r in sorted(read, key=lambda r: (order.index(r["suite"]) if r["suite"] in order else len(order), r["eval_pooling"], r["file"])):
        cols = [k for k in r["values"]]
        refs = []
        for cmp in r["compare"]:
            for key, what in (("paper", "paper"), ("reproduction", "reproduction")):
                if cmp.get(key) and cmp[key] not in [x[0] for x in refs]:
                    label, values = _paper(cmp[key], cols, numbers_file)
                    refs.append((cmp[key], label, values, f"{cmp['table']}: {label}"))
        title = _SUITE_TITLES.get(r["suite"], r["suite"])
        if r["eval_pooling"]:
            title += f", evaluated with {r['eval_pooling']} pooling"
        if r["evalset"]:
            title += f", {r['evalset']}"
        gold = (r.get("result") or {}).get("by_gold") or {}
        if (r.get("result") or {}).get("gold") == "int" and gold.get("float"):
            # the cell's eval_gold: the headline is against int(score), as the paper's source scored (issue 61)
            title += f", against int(gold) as angle-emb's AnglE.evaluate (the gold as annotated: {_fmt(gold['float'].get('spearman'))})"
        lines += [f"### {title}", "", f"`{r['file']}` (sha256 {r['sha256'][:12]})"
                  + (f"; tables: {', '.join(sorted({c['table'] for c in r['compare']}))}" if r["compare"] else ""), ""]
        header = ["", "this model"]
        for _, _, _, name in refs:
            header += [name, "Δ"]
        lines += ["| " + " | ".join(md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
        for col in cols:
            ours = r["values"][col]
            cells = [col, _fmt(ours)]
            for ref, _, values, _ in refs:
                paper = values.get(col)
                # one run is one seed: the bound of FLAG_RULE at k = 1 (AoE Table 4's σ), the same as a table's one-seed row
                bound = delta_bound({plan["cell"]["run"]: ours}, True, paper_seeds_of(ref)) if ours is not None else None
                cells += [_fmt(paper, paper_digits(paper, 2)) if paper is not None else "–",
                          delta_text(ours - paper, bound, 2) if ours is not None and paper is not None else "–"]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    if missing:
        lines += ["**Not evaluated yet** (the card was written without them): " + ", ".join(f"`{m}`" for m in missing), ""]
    return lines


def _usage_md(plan: dict, record: dict) -> list[str]:
    model_dir, repo_id = plan["model_dir"], plan["repo_id"]
    adapter = plan["finetune"] in ("lora", "qlora")
    prompt = record.get("prompt")
    remote = adapter or prompt is not None  # aoe.model.interop.AoETransformer: needs aoe installed
    where = model_dir if adapter or not repo_id else repo_id
    lines = ["## Usage", "", "### sentence-transformers", ""]
    if record.get("pooling") in OFFICIAL_POOLING_NAMES:
        # a padded pooling's vector of a text depends on its batch: the folder has no sentence-transformers files
        return lines + [
            f"None: the model pools with angle-emb's official arithmetic over a padded batch (`{record['pooling']}`), "
            "so a text's embedding depends on the texts batched with it, which sentence-transformers cannot express "
            "(docs/evaluation.md, \"Pooling ablations\"). `aoe.model.encoder.Encoder(\"" + model_dir + "\").encode_batches(batches)` "
            "embeds given batches as the official code did.",
            "",
        ]
    if adapter:
        lines += [
            f"The model is a {plan['finetune'].upper()} adapter over `{plan['base_model'] or plan['cell']['backbone']}`; "
            "aoe_config.json names its base as a local folder, so it loads from the project's results tree "
            "(the adapter applied on that base, quantized as in training):",
            "",
        ]
    elif repo_id:
        lines += ["From the hub (or the model folder itself, `SentenceTransformer(\"" + model_dir + "\")`):", ""]
    else:
        lines += ["The model folder is a sentence-transformers model (`python -m aoe export " + model_dir
                  + " OUT_DIR` lays it out with this card as its hub repository):", ""]
    lines += [
        "```python",
        "from sentence_transformers import SentenceTransformer",
        "",
        f'model = SentenceTransformer("{where}"' + (", trust_remote_code=True" if remote else "") + ")"
        + ("  # aoe.model.interop.AoETransformer: pip install the aoe-repro package" if remote else ""),
        'embeddings = model.encode(["A man is playing a guitar.", "Someone plays an instrument."])',
        "print(model.similarity(embeddings, embeddings))",
        "```",
        "",
        "### aoe embed (this project's command line)",
        "",
        "```bash",
        f"python -m aoe embed {model_dir} --in texts.txt --out embeddings.npy",
        "```",
        "",
        f"One text per line in, an (N, H) float32 array out, embedded with the pooling (`{record.get('pooling')}`) "
        + ("and prompt " if prompt else "") + "recorded in the folder's aoe_config.json.",
        "",
    ]
    return lines


def render_card(plan: dict, *, root: str | Path = ".", allow_missing: bool = False, numbers_file: str | Path | None = None):
    """The card of ``plan`` (:meth:`CardPlanner.plan`) as a :class:`huggingface_hub.ModelCard`.

    Reads ``<root>/<model_dir>/aoe_config.json`` and the result files; a missing result file is
    an error (:class:`CardError` naming them) unless ``allow_missing``: the card then lists them.
    ``numbers_file`` replaces the packaged paper_numbers.yaml.
    """
    from huggingface_hub import ModelCard

    root = Path(root)
    c = plan["cell"]
    record = _model_record(root / plan["model_dir"])
    read, missing = _read_results(plan, allow_missing, root)
    model_name = plan["repo_id"] or f"aoe-{c['backbone']}-{c['objective']}-{c['trainset']}-seed{c['run']}"
    data = _card_data(plan, read, model_name)
    summary = record.get("summary") or {}
    backbone = record.get("backbone")
    if isinstance(backbone, dict):
        source = backbone.get("hf_id") or backbone.get("package") or backbone.get("from")
        source += f" @ {backbone['commit']}" if backbone.get("commit") else ""
        source += f" {backbone['package_version']}" if backbone.get("package_version") else ""
        if plan["base_model"] and plan["base_model"] != backbone.get("hf_id"):
            source = f"{plan['base_model']} (as {backbone.get('source', 'copied')} {source})"
    else:
        source = str(backbone)
    start = next((r["value"] for r in plan["recipe"]["rows"] if r["key"] == "init" and str(r["value"]).startswith("results/models/")), None)
    body = [
        f"# {model_name}",
        "",
        f"`{c['backbone']}` fine-tuned with the **{c['objective']}** objective on the **{c['trainset']}** train set "
        f"(dataset `{plan['trainset']['dataset']}`, split `{plan['trainset']['split']}`), seed {c['run']}, by the reproduction "
        "pipeline of *AoE: Angle-Optimized Embeddings for Semantic Textual Similarity* (Li & Li, ACL 2024) and "
        "*AnglE-optimized Text Embeddings* (arXiv 2309.12871).",
        "",
        f"- Model folder: `{plan['model_dir']}` ({plan['finetune']} fine-tuning, pooling `{record.get('pooling')}`"
        + (f", prompt `{record['prompt']}`" if record.get("prompt") else "") + ")",
        f"- Backbone `{c['backbone']}`: {source}",
    ]
    if start:
        body.append(f"- Started from the trained model `{start}` (a two-stage run), not from the backbone's weights")
    if summary:
        body.append(f"- Trained {summary.get('steps', '?')} optimizer steps, {summary.get('examples_seen', '?')} examples, "
                    f"{_fmt(summary.get('train_seconds'), 0)} s of training loop on {summary.get('num_processes', 1)} process(es)")
    if record.get("selection"):
        sel = record["selection"]
        chosen = f"epoch {sel['epoch']}, Spearman {_fmt(sel.get('score'))}" if sel.get("epoch") is not None else "none above 0: the last step's"
        body.append(f"- Weights: select_checkpoint best on {json.dumps(sel.get('split'))} ({chosen})")
    body.append("")
    body += _results_md(plan, read, missing, numbers_file)
    body += _recipe_md(plan)
    body.append("")
    body += _usage_md(plan, record)
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(body))


def write_card(plan: dict, out: str | Path, **kwargs) -> Path:
    """Render and write the card to ``out`` (written complete or not at all)."""
    from aoe.util.fsutil import atomic_file

    card = render_card(plan, **kwargs)
    out = Path(out)
    with atomic_file(out) as f:
        f.write(str(card))
    return out


# ---------------------------------------------------------------------------
# Command line: aoe card MODEL_DIR


def cell_of_model_dir(model_dir: str | Path) -> Cell:
    """The cell of ``.../<backbone>/<objective>/<trainset>/seed<run>``."""
    parts = Path(model_dir).resolve().parts
    if len(parts) < 4 or not re.fullmatch(r"seed\d+(-rerun[1-9]\d*)?", parts[-1]):
        raise CardError(f"{model_dir}: not a model folder path .../<backbone>/<objective>/<trainset>/seed<N>")
    return Cell(parts[-4], parts[-3], parts[-2], *parse_run(parts[-1].removeprefix("seed")))


def plan_for(model_dir: str | Path, configfiles: list[str], workflow_dir: str | Path = ".") -> tuple[dict, dict]:
    """(config, plan) of a model folder of the configuration ``config.yaml`` + ``configfiles``."""
    from aoe.config.workflow import suite_results
    from aoe.plan.check import load_config

    workflow_dir = Path(workflow_dir)
    config = load_config(workflow_dir, configfiles)
    check_card_config(config)
    cell = cell_of_model_dir(model_dir)
    if cell not in run_cells(config):
        raise CardError(f"{model_dir}: cell {cell.path} is not trained by this configuration "
                        f"(config.yaml{''.join(' + ' + str(f) for f in configfiles)}); pass its preset with --configfile")
    files = [str(workflow_dir / "config.yaml"), *map(str, configfiles)]
    plan = CardPlanner(config, files, suite_results(config)).plan(cell)
    return config, plan


def main(argv: list[str] | None = None, prog: str = "python -m aoe.publish.modelcard") -> int:
    parser = argparse.ArgumentParser(prog=prog, description="Write the model card (README.md) of a trained model folder.")
    parser.add_argument("model_dir", help="results/.../models/<backbone>/<objective>/<trainset>/seed<N>")
    parser.add_argument("--configfile", nargs="*", default=[], help="the preset(s) the model was trained with, as given to snakemake")
    parser.add_argument("--out", default="-", help="where to write the card (default: standard output)")
    parser.add_argument("--allow-missing", action="store_true", help="write the card without the evaluations not made yet (listed in it)")
    args = parser.parse_args(argv)
    try:
        _, plan = plan_for(args.model_dir, args.configfile)
        if Path(plan["model_dir"]).resolve() != Path(args.model_dir).resolve():
            raise CardError(f"{args.model_dir}: this configuration's folder of that cell is {plan['model_dir']}")
        if args.out == "-":
            sys.stdout.write(str(render_card(plan, allow_missing=args.allow_missing)))
        else:
            write_card(plan, args.out, allow_missing=args.allow_missing)
            print(f"{args.out}: model card of {plan['cell']['path']}", file=sys.stderr)
    except (CardError, ConfigError) as exc:
        parser.exit(2, f"{parser.prog}: {exc}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
