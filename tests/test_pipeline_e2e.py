"""End to end: the CI preset through the real workflow and real data, a tiny random BERT in MiniLM-L6's place.

The run itself is the session fixture ``ci_run`` (tests/conftest.py); every test that reads it is here (the
pipeline's tables and ledger, its figures, training curves and model card), so that under pytest-xdist one
worker takes them all, after its other files. What only real weights show (a trained model beats its
backbone, probes above chance) is checked on MiniLM-L6 itself in tests/test_real_model.py.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from aoe.config.hparams import read_yaml
from aoe.evaluate.sts import TASKS
from aoe.training.curves import CURVES_DIR
from tests.forkserver import forked_snakemake
from tests.test_curves import _assert_mirrors, _metrics
from tests.workflow_utils import CI_CONFIGFILES, REPO, TINY_OVERLAY, edited, job_counts, needs_mirror

# Each Snakemake run a process of its own, forked from one that imported Snakemake once (tests/forkserver.py)
snakemake, _, _snakemake_forks = forked_snakemake()


# the CI preset's one trained model and its card
MODEL = "results/ci/models/minilm-l6/aoe/stsb/seed1"
CARD = "results/ci/cards/minilm-l6/aoe/stsb/seed1/README.md"

pytestmark = [
    pytest.mark.slow,
    needs_mirror,
]


def test_results_tree(ci_run):
    work, _ = ci_run
    res = work / "results/ci"
    for dataset, rows in {"sts12": 3108, "sts13": 1500, "sts14": 3750, "sts15": 3000, "sts16": 1186, "stsb": 1379, "sickr": 4927}.items():
        manifest = json.loads((res / "data" / dataset / "test.manifest.json").read_text())
        assert manifest["rows"] == rows == len(pd.read_parquet(res / "data" / dataset / "test.parquet"))
    model = res / "models" / "minilm-l6" / "aoe" / "stsb" / "seed1"
    for name in ("config.json", "model.safetensors", "aoe_config.json", "versions.json", "metrics.jsonl"):
        assert (model / name).is_file(), name
    recorded = json.loads((model / "aoe_config.json").read_text())
    assert recorded["pooling"] == "cls" and recorded["train"]["max_steps"] == 60
    assert recorded["objective"]["weights"] == {"angle": 1.0, "contrastive": 1.0}
    assert recorded["provenance"]["max_steps"] == "trainsets.stsb.train.max_steps"
    assert recorded["provenance"]["loss.weights"] == "code:aoe.config.recipes.OBJECTIVES.aoe.weights"
    assert (res / "tokens" / "minilm-l6-64" / "stsb" / "train" / "cache.json").is_file()
    # select_checkpoint best (presets/ci.yaml): STS-B dev prepared, scored at the one epoch end, recorded
    assert (res / "data" / "stsb" / "dev.parquet").is_file()
    sel = recorded["selection"]
    assert (sel["rule"], sel["split"], sel["split_is_test"], sel["step"]) == ("best", {"dataset": "stsb", "split": "dev"}, False, 60)
    assert recorded["provenance"]["select_split"] == "trainsets.stsb.train.select_split"
    scored = [json.loads(line) for line in (model / "metrics.jsonl").read_text().splitlines() if "select_split" in line]
    assert [(x["select_split"], x["select_spearman"]) for x in scored] == [("stsb/dev", sel["score"])]


def test_recipe_ledger_and_report_links(ci_run):
    """results/ci/RECIPE.md lists the trained cell's values with their files; REPORT.md's row links land on it."""
    work, _ = ci_run
    res = work / "results/ci"
    recipe = json.loads((res / "recipe.json").read_text())
    assert [c["cell"] for c in recipe["cells"]] == ["minilm-l6/aoe/stsb/seed1"]
    rows = {r["key"]: r for r in recipe["cells"][0]["rows"]}
    assert rows["max_steps"]["value"] == 60 and rows["max_steps"]["file"] == "presets/ci.yaml"
    assert rows["learning_rate"]["file"] == "presets/ci.yaml" and rows["learning_rate"]["source"]
    assert all(r["source"] for r in rows.values()), [k for k, r in rows.items() if not r["source"]]
    md = (res / "RECIPE.md").read_text()
    report = (res / "REPORT.md").read_text()
    links = set(re.findall(r"RECIPE\.md#([a-z0-9-]+)", report))
    assert links and all(f'<a id="{a}"></a>' in md for a in links), links
    # the preset's saturation analysis (MiniLM-L6 on SNLI dev) beside the paper's quoted 33% / 66%, without a Δ: §4 names
    # no model, pooling or similarity (aoe.publish.quoted, issue 69)
    sat = json.loads((res / "analysis" / "saturation" / "minilm-l6" / "snli-dev.json").read_text())
    ours = 100 * sat["all"]["share_above"]["0.95"]
    assert f"| NLI pairs with cosine > 0.95 (%) | `saturation/minilm-l6/snli-dev.json` | {ours:.2f} | 33.00 | n/c | otherwise: " in report
    # the new tables of the preset, with the AnglE paper's rows
    assert "AnglE-BERT (paper: AnglE arXiv, results image in the official repository)" in (res / "tables" / "angle_transfer_sts.md").read_text()


def test_trained_and_pretrained_models_are_scored_on_the_same_pairs(ci_run):
    work, _ = ci_run
    ev = work / "results/ci" / "eval" / "minilm-l6"
    trained = json.loads((ev / "aoe" / "stsb" / "seed1" / "sts.json").read_text())
    pretrained = json.loads((ev / "pretrained" / "none" / "seed0" / "sts.json").read_text())
    for result in (trained, pretrained):
        assert set(result["tasks"]) == set(TASKS)
        # presets/ci.yaml: 250 seeded pairs of each task but STS-B, the same pairs for both models
        assert result["tasks"]["STS12"]["n"] == 250 and len(result["tasks"]["STS12"]["subsets"]) == 5
        assert result["tasks"]["STSB"]["n"] == 1379 and result["protocol"]["subsample"]["uncapped_tasks"] == ["STSB"]
        assert result["protocol"]["name"] == "senteval-sts-all" and result["protocol"]["pooling"] == "cls"
    assert trained["protocol"]["subsample"]["pairs"] == pretrained["protocol"]["subsample"]["pairs"]
    # that training helped: tests/test_real_model.py::test_trained_model_beats_pretrained_backbone (real weights)
    assert trained["tasks"]["STSB"]["spearman"] != pretrained["tasks"]["STSB"]["spearman"]


def test_pretrained_variant_embeds_the_backbone_another_way(ci_run):
    # presets/ci.yaml's angle_transfer_sts row {objective: pretrained, variant: no_prompt_avg}: the same
    # weights under average pooling (that it scores above CLS on MiniLM-L6: tests/test_real_model.py)
    work, _ = ci_run
    ev = work / "results/ci" / "eval" / "minilm-l6" / "pretrained"
    cls = json.loads((ev / "none" / "seed0" / "sts.json").read_text())
    avg = json.loads((ev / "no_prompt_avg" / "seed0" / "sts.json").read_text())
    assert (cls["protocol"]["pooling"], avg["protocol"]["pooling"]) == ("cls", "avg")
    assert avg["protocol"]["prompt"] is None and avg["model"]["cell"]["trainset"] == "no_prompt_avg"
    assert avg["protocol"]["subsample"]["pairs"] == cls["protocol"]["subsample"]["pairs"]
    assert avg["avg"] != cls["avg"] and avg["tasks"]["STSB"]["spearman"] != cls["tasks"]["STSB"]["spearman"]
    table = (work / "results/ci" / "tables" / "angle_transfer_sts.md").read_text()
    assert f"{avg['avg']:.2f}" in table and "as downloaded, average pooling" in table


def test_tables_written_with_measured_numbers(ci_run):
    work, _ = ci_run
    tables = work / "results/ci" / "tables"
    trained = json.loads((work / "results/ci/eval/minilm-l6/aoe/stsb/seed1/sts.json").read_text())
    indomain = json.loads((work / "results/ci/eval/minilm-l6/aoe/stsb/seed1/indomain_stsb.json").read_text())
    # the in-domain rule scores STS-B test as the SentEval protocol does against the float gold; it embeds STS-B's
    # texts in other batches than the 7-task set, so only the last float bits may differ
    assert indomain["by_gold"]["float"]["spearman"] == pytest.approx(trained["tasks"]["STSB"]["spearman"], abs=0.02)
    # its headline is the cell's eval_gold: int(score), as the STS-B example's AnglE.evaluate scored (issue 61)
    assert indomain["gold"] == "int" and indomain["spearman"] == indomain["by_gold"]["int"]["spearman"]
    assert indomain["spearman"] != indomain["by_gold"]["float"]["spearman"] and 0.95 < indomain["gold_int_vs_float_spearman"] < 1
    tex = (tables / "table2_indomain.tex").read_text()
    assert "\\toprule" in tex and "\\bottomrule" in tex
    # the cell's row and its float-gold variant row, read from the same file
    assert f"{indomain['spearman']:.2f}" in tex and f"{indomain['by_gold']['float']['spearman']:.2f}" in tex
    csv = pd.read_csv(tables / "table1_sts.csv")
    ours = csv[(csv.objective == "aoe")].iloc[0]
    assert ours["avg_mean"] == pytest.approx(trained["avg"]) and ours["n"] == 1
    # the evaluation-only variant: the same model under 0.1.1's cls_avg over SentEval's padded batches of 16
    pooled = json.loads((work / "results/ci/eval/minilm-l6/aoe/stsb/seed1/sts.pool-cls_avg_padded.json").read_text())
    assert (pooled["protocol"]["pooling"], pooled["protocol"]["trained_pooling"], pooled["protocol"]["batch_size"]) == ("cls_avg_padded", "cls", 16)
    variant = csv[csv.label == "AoE (evaluated cls_avg_padded)"].iloc[0]
    assert variant["STSB_mean"] == pytest.approx(pooled["tasks"]["STSB"]["spearman"]) != pytest.approx(ours["STSB_mean"])
    # a preset's rows trained otherwise than the paper's table: one note names each difference (issue 54)
    md = (tables / "table1_sts.md").read_text()
    assert ("- Not the paper's protocol, so a Δ measures the protocol too: trained on stsb (paper: nli); backbone minilm-l6 "
            "(paper: bert-base-uncased, llama-2-13b, llama-2-7b); 60 steps of 32 pairs (paper: 10 epochs of 2048 pairs).") in md


def test_every_table_of_the_run_compiles_within_the_page(ci_run, tmp_path):
    """Every .tex table the run wrote, set by pdflatex in one run (issue 62: the demo's Table 1 ran 97pt off the
    page): no error, no line wider than the page, a page at least per table."""
    import os
    import shutil

    from tests.workflow_utils import compile_latex_tables

    work, _ = ci_run
    if shutil.which("pdflatex") is None:
        if os.environ.get("CI"):
            pytest.fail("pdflatex not found: .ci/run installs texlive-latex-base and texlive-latex-recommended")
        pytest.skip("pdflatex not installed")
    texts = [p.read_text() for p in sorted((work / "results/ci/tables").glob("*.tex"))]
    assert len(texts) >= 9
    out, log, pages = compile_latex_tables(texts, tmp_path)
    assert out.returncode == 0, log[-3000:]
    assert not re.findall(r"Overfull \\hbox.*", log), re.findall(r"Overfull \\hbox.*", log)
    assert pages >= len(texts)


def test_saturation_statistics(ci_run):
    work, _ = ci_run
    result = json.loads((work / "results/ci/analysis/saturation/minilm-l6/snli-dev.json").read_text())
    # the preset's seeded 2,000 of SNLI dev's 6,607 entailment and contradiction pairs
    assert result["all"]["pairs"] == 2000 and result["data"]["max_pairs"] == 2000 and set(result["by_label"]) == {"0", "1"}
    shares = result["all"]["share_above"]
    assert 0 <= shares["0.95"] <= shares["0.9"] <= shares["0.8"] <= 1
    # entailment closer than contradiction under a real encoder: tests/test_real_model.py
    assert all(-1 <= result["by_label"][label]["mean"] <= 1 for label in ("0", "1"))


def test_transfer_tasks(ci_run):
    work, _ = ci_run
    for cell in ("minilm-l6/aoe/stsb/seed1", "minilm-l6/pretrained/none/seed0"):
        result = json.loads((work / f"results/ci/eval/{cell}/transfer.json").read_text())
        assert set(result["tasks"]) == {"MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC"}
        assert result["tasks"]["MR"] is None and result["avg"] is None  # not requested: null, not 0
        # the preset's seeded 1,000 of each split: TREC's 500 test questions whole, 1,000 of MRPC's 1,725 test pairs
        assert result["protocol"]["subsample"]["rows"] == {"TREC": {"train": 1000, "test": 500}, "MRPC": {"train": 1000, "test": 1000}}
        assert result["tasks"]["TREC"]["ntest"] == 500 and result["tasks"]["MRPC"]["ntest"] == 1000
        # the floors real weights reach: tests/test_real_model.py::test_transfer_tasks_above_their_floors
        assert all(0 <= result["tasks"][t]["acc"] <= 100 for t in ("TREC", "MRPC"))
        assert result["protocol"]["mode"] == "fasttest"


def test_nli_probe(ci_run):
    work, _ = ci_run
    result = json.loads((work / "results/ci/eval/minilm-l6/pretrained/none/seed0/nli_probe.json").read_text())
    assert set(result["sets"]) == {"SNLI", "MNLI-m", "MNLI-mm"}
    assert result["protocol"]["max_rows"] == 1000 and sum(s["ntest"] for s in result["sets"].values()) < 750
    assert result["protocol"]["split_protocol"] == "heldout" and result["protocol"]["text"] == "premise [SEP] hypothesis"
    # above chance with real weights: tests/test_real_model.py::test_nli_probe_above_chance
    assert all(0 <= result["summary"][s] <= 100 for s in ("SNLI", "MultiNLI"))


def test_html_report_is_built(ci_run, ci_report):
    """`snakemake --report`: one self-contained HTML page with every table and figure and its caption."""
    work, _ = ci_run
    html = ci_report.read_text(errors="replace")
    # tables as rendered HTML pages, REPORT.md and RECIPE.md rendered, every job's runtime (issue 39 item 6)
    for table in ("table1_sts", "table2_indomain", "table3_transfer", "table5_nli"):
        assert f"{table}.html" in html, table
    for category in ("1. Summary", "2. Tables", "3. Figures", "4. Training curves", "5. Runtimes"):
        assert category in html, category
    assert "REPORT.html" in html and "RECIPE.html" in html and "RUNTIMES.html" in html
    runtimes = pd.read_csv(work / "results/ci/RUNTIMES.tsv", sep="\t")
    assert {"train", "evaluate_sts", "tokenize"} <= set(runtimes["rule"]) and (runtimes["seconds"] > 0).all()
    assert len(html) > 100_000  # Snakemake's page embeds its scripts and the results: no external files


def test_rerun_has_nothing_to_do(ci_run):
    work, env = ci_run
    out = snakemake(work, "-n", "--configfile", *CI_CONFIGFILES, env=env)
    assert out.returncode == 0 and "Nothing to be done" in out.stdout, out.stdout[-3000:]
    # every trained model records the settings the config gives (aoe.config.cell_settings.settings_changed)
    assert "record other settings" not in out.stdout, out.stdout[-3000:]
    # every trained model records the tree's code (aoe.plan.code_changes)
    assert "other code than this tree's" not in out.stdout and "no code fingerprint" not in out.stdout, out.stdout[-3000:]


def test_the_paper_grid_writes_into_its_own_tree(ci_run):
    """Issue 38 item 2: a bare `snakemake recipe` after the demo overwrote its RECIPE.md with the grid's
    ledger (REPORT.md's links then pointed nowhere): each configuration has its own results tree."""
    work, env = ci_run
    ours = work / "results/ci/RECIPE.md"
    before = ours.read_bytes()
    out = snakemake(work, "--cores", "1", "recipe", env=env)
    assert out.returncode == 0, out.stdout[-3000:]
    grid = (work / "results/RECIPE.md").read_text()
    assert "bert-base-uncased" in grid and ours.read_bytes() == before
    # issue 62: each tree records the file that names it (the Snakefile's onstart), overlays and all
    record = json.loads((work / "results/ci/configuration.json").read_text())
    assert (record["file"], record["configfiles"]) == ("presets/ci.yaml", ["config.yaml", *CI_CONFIGFILES]), record
    assert record["settings"]["results"] == "results/ci"
    assert json.loads((work / "results/configuration.json").read_text())["file"] == "config.yaml"
    # the CI report links only to its own ledger, and every anchor it links to is there
    report = (work / "results/ci/REPORT.md").read_text()
    anchors = set(re.findall(r"\]\(RECIPE\.md#([^)]+)\)", report))
    assert anchors and all(f'id="{a}"' in before.decode() for a in anchors), anchors
    out = snakemake(work, "-n", "--configfile", *CI_CONFIGFILES, env=env)
    assert out.returncode == 0 and "Nothing to be done" in out.stdout, out.stdout[-3000:]


def test_changing_table_code_reruns_only_tables(ci_run):
    """Snakemake's code and params rerun triggers: rendering changes never retrain or re-embed."""
    work, env = ci_run
    with edited(work / "workflow_scripts" / "make_table.py", "\n# a rendering change\n"):
        out = snakemake(work, "-n", "--configfile", *CI_CONFIGFILES, env=env)
    assert out.returncode == 0, out.stdout[-3000:]
    assert set(job_counts(out.stdout)) == {"table", "table_html", "report_md", "report_page", "runtimes", "all"}, out.stdout[-3000:]
    assert "Code has changed since last execution" in out.stdout
    # the package's table code is an input of the table jobs: an edit of it, the same
    with edited(work / "aoe" / "results" / "tables.py", "\n# a rendering change\n"):
        out = snakemake(work, "-n", "--configfile", *CI_CONFIGFILES, env=env)
    assert out.returncode == 0, out.stdout[-3000:]
    assert set(job_counts(out.stdout)) == {"table", "table_html", "report_md", "report_page", "runtimes", "all"}, out.stdout[-3000:]
    # a caption is a table parameter: the same, and only tables (an edit of the tree's own files: another list of
    # files would be another tree's, aoe.plan.trees; the recipe ledger, which reads the files, is redone too)
    with edited(work / TINY_OVERLAY, "tables:\n  table2_indomain:\n    caption: another caption\n"):
        out = snakemake(work, "-n", "--configfile", *CI_CONFIGFILES, env=env)
    assert out.returncode == 0, out.stdout[-3000:]
    assert set(job_counts(out.stdout)) == {"table", "table_html", "report_md", "report_page", "recipe", "runtimes", "all"}, out.stdout[-3000:]
    # every edit undone: nothing to rerun
    out = snakemake(work, "-n", "--configfile", *CI_CONFIGFILES, env=env)
    assert out.returncode == 0 and "Nothing to be done" in out.stdout, out.stdout[-3000:]


def test_a_code_default_reruns_what_it_changes_and_a_run_only_setting_nothing(ci_run):
    """Every resolved value reaches a train job's params (Snakemake's params trigger): a built-in loss
    default changed in aoe/config/recipes.py retrains; how often a run logs or checkpoints reruns nothing."""
    work, env = ci_run
    tau = 'angle_tau: float = field(default=20.0,'
    with edited(work / "aoe" / "config" / "recipes.py", tau.replace("20.0", "10.0"), replace=tau):
        out = snakemake(work, "-n", "--configfile", *CI_CONFIGFILES, env=env)
    assert out.returncode == 0, out.stdout[-3000:]
    assert job_counts(out.stdout).get("train_model") == 1, out.stdout[-3000:]
    assert "Params have changed since last execution" in out.stdout
    with edited(work / TINY_OVERLAY, "trainsets: {stsb: {train: {log_every: 3, checkpoint_every: 7}}}\n"):
        out = snakemake(work, "-n", "--configfile", *CI_CONFIGFILES, env=env)
    assert out.returncode == 0, out.stdout[-3000:]
    assert "train_model" not in job_counts(out.stdout), out.stdout[-3000:]


def test_an_edited_loss_is_named_with_the_command_that_retrains_it(ci_run):
    """Issue 70: Snakemake does not see package code; planning names the models the edit makes stale and the
    command that retrains them, and a comment alone names nothing."""
    work, env = ci_run
    angle = work / "aoe" / "losses" / "angle.py"
    with edited(angle, "\n# a comment only: the code is the same\n"):
        out = snakemake(work, "-n", "--configfile", *CI_CONFIGFILES, env=env)
    assert out.returncode == 0 and "Nothing to be done" in out.stdout and "other code" not in out.stdout, out.stdout[-3000:]
    with edited(angle, "\n\ndef _a_new_helper():\n    return 1\n"):
        out = snakemake(work, "-n", "--configfile", *CI_CONFIGFILES, env=env)
    assert out.returncode == 0, out.stdout[-3000:]
    said = " ".join(out.stdout.split())  # Snakemake's logger may wrap the line
    assert "1 trained model(s) were trained by other code than this tree's (aoe/losses/angle.py changed since" in said, out.stdout[-3000:]
    assert f"snakemake --forcerun results/ci/models/minilm-l6/aoe/stsb/seed1 --configfile {' '.join(CI_CONFIGFILES)}" in said


# ---- the figures, training curves and model card of the run ----------------------------------------------


def test_figure_rules_end_to_end(ci_run):
    """Every figure of the CI preset's shared run (a tiny random BERT in MiniLM-L6's place, trained and as
    downloaded), STS-B test."""
    work, env = ci_run
    figs = work / "results/ci" / "figures"
    for stem in ("fig3_saturation_geometry", "fig10_all_pairs_geometry", "fig4_similarity_density", "fig5_gold_density", "fig_gradient_magnitude"):
        for ext in ("pdf", "png"):
            assert (figs / f"{stem}.{ext}").stat().st_size > 1000, stem
    fig3 = json.loads((figs / "fig3_saturation_geometry.json").read_text())
    fig10 = json.loads((figs / "fig10_all_pairs_geometry.json").read_text())
    # presets/ci.yaml: t-SNE on a 300-pair sample, plus the highlighted Ukraine pair when the draw missed it;
    # the distances over every STS-B test pair
    assert fig10["tsne"]["pairs"] in (300, 301) and "ukraine" in fig10["highlighted_pairs"]
    assert fig10["pairs"] == fig10["pairs_total"] == 1379 and fig10["AVG_re"] > 0 and fig10["AVG_im"] > 0
    threshold = read_yaml(REPO / "config.yaml")["figures"]["sts_geometry"]["saturation_threshold"]
    # the tiny random BERT of the run puts most pairs, or all, in the zone; that real trained weights leave some
    # out: tests/test_real_model.py::test_the_trained_models_saturation_zone_holds_some_pairs_not_all
    assert fig3["zone"] == "saturation" and 0 < fig3["pairs"] <= 1379 and fig3["cos"]["min"] > threshold
    # the paper's §5.3 pair is drawn first and measured, in the zone or not
    ukraine = fig3["highlighted_pairs"]["ukraine"]
    assert ukraine["sentence1"].lower() == "ukraine to implement unilateral ceasefire" and ukraine["gold"] == 4.8
    assert fig3["sample_pairs"][0]["sentence2"] == ukraine["sentence2"] and ukraine["tsne_re"] > 0 and ukraine["euclidean_im"] > 0
    assert "Fig. 3 Ukraine pair: imaginary ÷ real distance, length of the pair's line in the t-SNE plots" in (work / "results/ci" / "REPORT.md").read_text()
    fig4 = json.loads((figs / "fig4_similarity_density.json").read_text())
    assert len(fig4["models"]) == 2 and all(m["distance_to_gold"] > 0 for m in fig4["models"].values())
    grads = json.loads((figs / "fig_gradient_magnitude.json").read_text())
    assert grads["pairs"] == 1379 and len(grads["objectives"]["angle"]["bins"]) == 20
    # the figure job read the embeddings an evaluation of the same model had cached
    log = (work / "results/ci/logs/figures/pairs/minilm-l6/aoe/stsb/seed1/stsb.log").read_text()
    assert "'hit': True" in log
    # a plotting change reruns only that figure
    with edited(work / "workflow_scripts" / "figure_gradients.py", "\n# a plotting change\n"):
        out = snakemake(work, "figures", "-n", "--configfile", *CI_CONFIGFILES, env=env)
    assert out.returncode == 0 and "fig_gradients" in out.stdout and "figure_pairs" not in out.stdout, out.stdout[-3000:]


def test_the_ci_run_draws_its_curves_and_reports_them(ci_run, ci_report):
    work, _ = ci_run
    model = work / MODEL
    metrics = _metrics(model)
    _assert_mirrors(model / CURVES_DIR, metrics)
    assert not (model.parent / "seed1.ckpt" / CURVES_DIR).exists()
    figs = work / "results/ci/figures/training_curves"
    assert (figs / "table1_sts.png").stat().st_size > 1000 and (figs / "table1_sts.pdf").stat().st_size > 1000
    saved = json.loads((figs / "table1_sts.json").read_text())
    (run,) = saved["panels"][0]["runs"]
    assert run["loss"]["step"] == [m["step"] for m in metrics if "select_split" not in m]
    assert run["select_spearman"]["value"] == [m["select_spearman"] for m in metrics if m.get("select_spearman") is not None]
    html = ci_report.read_text(errors="replace")
    assert "Training curves" in html and "table1_sts.png" in html


def test_the_ci_runs_card_is_its_model_and_results(ci_run):
    """The CI preset's run (tests/conftest.py): its card parses, names its folder, and holds its STS numbers."""
    from huggingface_hub import ModelCard

    from aoe.data.sts import STS_TASKS

    work, _ = ci_run
    card = ModelCard.load(work / CARD)
    assert card.data.pipeline_tag == "sentence-similarity" and card.data.base_model == "sentence-transformers/all-MiniLM-L6-v2"
    sts = json.loads((work / "results/ci/eval/minilm-l6/aoe/stsb/seed1/sts.json").read_text())
    got = {e.dataset_name: e.metric_value for e in card.data.eval_results if e.task_name == "Semantic Textual Similarity"}
    assert got and got == {t: v for t in STS_TASKS if (v := (sts["tasks"].get(t) or {}).get("spearman")) is not None}
    assert f"python -m aoe embed {MODEL} --in" in card.text and (work / MODEL / "modules.json").is_file()
    assert not (work / MODEL / "README.md").exists()  # the card is beside the folder, never in it


def test_the_reports_front_page_and_every_link_inside_it_resolve(ci_report):
    """Issue 54: the report opened on the rule graph, and REPORT's links to RECIPE.html#... led nowhere (each page
    is a data: URL). The front page names where to start; REPORT's page holds the recipe, so its links are anchors
    of the same page (bench/studies/report_links.py follows them in headless Chromium)."""
    import re

    html = ci_report.read_text(errors="replace")
    assert "Start here:" in html and "REPORT.html" in html
    from aoe.publish.pages import embedded_pages

    pages = embedded_pages(ci_report)
    summary = pages["REPORT.md and RECIPE.md"]
    links = re.findall(r'href="([^"]+)"', summary)
    inside = [h for h in links if h.startswith("#")]
    assert len(inside) >= 2, links
    ids = set(re.findall(r'id="([^"]+)"', summary))
    assert {h[1:] for h in inside} <= ids, sorted({h[1:] for h in inside} - ids)
    assert not [h for h in links if not h.startswith(("#", "http://", "https://"))], links
