"""LLM-supervised data (AnglE §4.5 / Table 4): prompts, parsing, seeded batched generation, the per-text
cache, the pair tables, and the CPU preset's plan.

Generation runs a tiny random LlamaForCausalLM (hidden 32, 2 layers) with a byte-level BPE tokenizer
trained here on a few sentences, so every test takes seconds on a CPU.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from aoe.config.hparams import YAML_LOADER
from aoe.data.sts import COLUMNS
from aoe.llm_supervised import GENERATED_SPLITS, KINDS, LLM_DATASET, SELF_DATASET
from aoe.llm_supervised.generate import GenerationCache, GenerationSettings, generate_all
from aoe.llm_supervised.pairs import build_llm_pairs, build_self_pairs, label_generations, sample_texts, write_texts
from aoe.llm_supervised.prompts import PAPER_PROMPTS, completed_items, parse_completion, render_prompt
from tests.workflow_utils import MIRROR, REPO, copy_workflow, job_counts, needs_mirror, snakemake
from tests.tiny_generators import TEXTS, build_remote_code_lm, build_tiny_lm

@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory) -> Path:
    """A tiny random causal LLaMA with a byte-level BPE tokenizer (BOS, EOS, PAD), and a backbone.json."""
    return build_tiny_lm(tmp_path_factory.mktemp("tiny_lm"))


def _settings(**kw) -> GenerationSettings:
    return GenerationSettings(**{"max_new_tokens": 12, "batch_size": 4, "seed": 1, "temperature": 1.0, "top_p": 1.0, **kw})


def _completions(records: list[dict]) -> list[tuple[str, str, str]]:
    return [(r["text"], r["kind"], r["completion"]) for r in records]


# ---------------------------------------------------------------------------- prompts and parsing


def test_paper_prompt_is_figure_5():
    prompt = render_prompt(PAPER_PROMPTS["dissimilar"], "A man is smoking.", 1)
    assert prompt == (
        "You are a highly smart opposite-meaning sentence-generating system. Your job is to generate 1 antonym "
        "sentences of a given input sentence. Input sentence: A man is smoking.. Output:"
    )
    assert "same-meaning" in PAPER_PROMPTS["similar"] and "synonymous" in PAPER_PROMPTS["similar"]


@pytest.mark.parametrize(
    "completion, finish, expected",
    [
        (" A jet departs.\nYou are a highly smart", "stop", [("A jet departs.", "ok")]),
        ("1. \"A jet departs.\"\n", "stop", [("A jet departs.", "ok")]),
        (" Output: A jet departs. Input sentence: Two men", "length", [("A jet departs.", "ok")]),
        ("   \n\n ", "eos", [("", "empty")]),
        (" A plane is Taking off!\n", "stop", [("A plane is Taking off!", "copy")]),
        (" 1234 ...\n", "stop", [("1234 ...", "unparsable")]),
        (" Output:\n", "stop", [("", "unparsable")]),
        (" A jet departs from the runway while the", "length", [("A jet departs from the runway while the", "truncated")]),
        (" A jet departs from the runway while the", "eos", [("A jet departs from the runway while the", "ok")]),
        # a base model goes on with sentences of its own on the same line: the first one is the answer
        (" the jet departs. You are a highly intelligent system", "length", [("the jet departs.", "ok")]),
        (" 1. A jet departs. 2. A plane leaves", "length", [("A jet departs.", "ok")]),
        # no sentence end after a title, an initialism or before lowercase
        (" Mr. Smith flies to the U.S. Friday at 7 p.m. and lands. Then", "stop", [("Mr. Smith flies to the U.S. Friday at 7 p.m. and lands.", "ok")]),
        (" the dow eased 0.47 percent . to 9,543\n", "stop", [("the dow eased 0.47 percent . to 9,543", "ok")]),
    ],
)
def test_parse_completion(completion, finish, expected):
    parsed = parse_completion(completion, "A plane is taking off.", size=1, stopped_by_length=finish == "length")
    assert list(parsed.items) == expected


def test_parse_completion_size_two_and_duplicates():
    parsed = parse_completion("- A jet departs.\n- a jet departs\n- The plane leaves.\n", "A plane is taking off.", size=3)
    assert list(parsed.items) == [("A jet departs.", "ok"), ("a jet departs", "duplicate"), ("The plane leaves.", "ok")]
    assert parsed.ok == ["A jet departs.", "The plane leaves."]


def test_rows_stop_after_their_sentences():
    assert not completed_items(" A jet departs", 1)
    assert not completed_items(" A jet departs.", 1)  # the next token may be more of it ("departs.com")
    assert completed_items(" A jet departs. The", 1)
    assert completed_items(" A jet departs\n", 1)
    assert completed_items(" A jet departs. Input sentence:", 1)
    assert not completed_items("\n\n Output:\n A jet", 1)  # blank lines and a bare label are not sentences
    assert not completed_items(" A jet departs.\n The plane", 2)


def test_label_generations_counts_and_drops_malformed():
    def rec(text, kind, completion, finish="stop"):
        return {"text": text, "kind": kind, "completion": completion, "finish": finish, "new_tokens": 5, "key": "k", "cached": False}

    records = [
        rec("A plane is taking off.", "similar", " A jet departs.\n"),
        rec("A plane is taking off.", "dissimilar", " A plane is landing.\n"),
        rec("Some men are fighting.", "similar", " Some men are fighting.\n"),  # copy
        rec("Some men are fighting.", "dissimilar", "", "eos"),  # empty
        rec("A man is smoking.", "similar", " He smokes.\n"),
        rec("A man is smoking.", "dissimilar", " He smokes.\n"),  # conflict: dropped from both
        rec("Three men are playing chess.", "similar", " Three people play a board game and", "length"),  # truncated
        rec("Three men are playing chess.", "dissimilar", " ???\n"),  # unparsable
    ]
    df, annotated, counts = label_generations(records, size=1)
    assert df[["sentence1", "sentence2", "score", "subset"]].values.tolist() == [
        ["A plane is taking off.", "A jet departs.", 1.0, "similar"],
        ["A plane is taking off.", "A plane is landing.", 0.0, "dissimilar"],
    ]
    assert counts["similar"]["kept"] == 1 and counts["dissimilar"]["kept"] == 1
    assert counts["similar"]["dropped"] == {"empty": 0, "unparsable": 0, "truncated": 1, "copy": 1, "duplicate": 0, "conflict": 1}
    assert counts["dissimilar"]["dropped"] == {"empty": 1, "unparsable": 1, "truncated": 0, "copy": 0, "duplicate": 0, "conflict": 1}
    assert counts["dropped_total"]["conflict"] == 2 and counts["texts"] == 4 and counts["texts_with_both"] == 1
    assert counts["similar"]["finish"] == {"length": 1, "stop": 3}
    # every completion is kept in the annotated record, with the status of what was read from it
    assert len(annotated) == len(records)
    assert [s["status"] for a in annotated for s in a["sentences"]] == [
        "ok", "ok", "copy", "empty", "conflict", "conflict", "truncated", "unparsable",
    ]


# ---------------------------------------------------------------------------- generation


def test_token_limit_scales_with_the_text():
    settings = GenerationSettings(max_new_tokens=20, length_ratio=1.5)
    assert [settings.token_limit(n) for n in (2, 4, 10)] == [11, 14, 20]
    assert GenerationSettings(max_new_tokens=20, length_ratio=0).token_limit(2) == 20


def test_batching_does_not_change_outputs(tiny_lm):
    """Left padding, per-output noise and per-output limits: a text's completion is the same alone or in a padded batch."""
    mixed = {"max_new_tokens": 24, "length_ratio": 1.0}  # limits from 14 to 24 tokens in one batch
    alone, _ = generate_all(TEXTS, tiny_lm, PAPER_PROMPTS, 1, _settings(batch_size=1, **mixed), None, device="cpu", progress=False)
    batched, summary = generate_all(TEXTS, tiny_lm, PAPER_PROMPTS, 1, _settings(batch_size=4, **mixed), None, device="cpu", progress=False)
    assert _completions(alone) == _completions(batched)
    assert len({r["limit"] for r in batched}) > 2 and all(r["new_tokens"] <= r["limit"] for r in batched)
    assert summary["generated"] == 2 * len(TEXTS) and summary["cached"] == 0
    assert [(r["text"], r["kind"]) for r in batched] == [(t, k) for t in TEXTS for k in KINDS]
    assert len({r["completion"] for r in batched}) > 1  # the random model does write different things
    assert {r["finish"] for r in batched} <= {"stop", "eos", "length"}


def test_seed_reproduces_and_changes_samples(tiny_lm):
    run = lambda **kw: _completions(generate_all(TEXTS, tiny_lm, PAPER_PROMPTS, 1, _settings(**kw), None, device="cpu", progress=False)[0])
    first = run(seed=1)
    assert run(seed=1) == first
    assert run(seed=2) != first
    # greedy decoding ignores the seed (and so does its cache key)
    assert run(do_sample=False, seed=1) == run(do_sample=False, seed=2)


def test_cache_second_run_generates_nothing(tiny_lm, tmp_path, monkeypatch, capsys):
    import aoe.llm_supervised.generate as gen

    cache = tmp_path / "cache"
    first, s1 = generate_all(TEXTS, tiny_lm, PAPER_PROMPTS, 1, _settings(), cache, device="cpu", progress=False)
    assert s1["generated"] == 10 and not any(r["cached"] for r in first)
    (cache_file,) = cache.glob("*.jsonl")
    assert len(cache_file.read_text().splitlines()) == 10

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded although every output is cached")

    monkeypatch.setattr(gen, "load_generator", no_model)
    second, s2 = generate_all(TEXTS, tiny_lm, PAPER_PROMPTS, 1, _settings(batch_size=3), cache, device="cpu", progress=False)
    assert s2["generated"] == 0 and s2["cached"] == 10 and all(r["cached"] for r in second)
    assert _completions(second) == _completions(first)
    monkeypatch.undo()

    # a killed job: half the records and a torn last line; the rerun generates exactly what is missing,
    # and the same completions as the uninterrupted run (the noise belongs to the output, not the batch)
    lines = cache_file.read_text().splitlines()
    cache_file.write_text("\n".join(lines[:5]) + "\n" + lines[5][:20])
    capsys.readouterr()
    third, s3 = generate_all(TEXTS, tiny_lm, PAPER_PROMPTS, 1, _settings(), cache, device="cpu", progress=True)
    assert s3["generated"] == 5 and s3["cache_unreadable_lines"] == 1
    err = capsys.readouterr().err  # progress (aoe.util.progress): the prompts left to generate, with an ETA
    assert "generate: 0/5 prompt (0%), elapsed 00:00, ETA ?" in err and "generate: 5/5 prompt (100%)" in err
    assert _completions(third) == _completions(first)
    assert len(GenerationCache(cache_file).records) == 10  # the torn line swallowed nothing appended after it

    # another setting, prompt or model is another key
    _, s4 = generate_all(TEXTS[:2], tiny_lm, PAPER_PROMPTS, 1, _settings(temperature=0.5), cache, device="cpu", progress=False)
    assert s4["generated"] == 4
    other = {**PAPER_PROMPTS, "similar": PAPER_PROMPTS["similar"].replace("highly smart", "smart")}
    _, s5 = generate_all(TEXTS[:2], tiny_lm, other, 1, _settings(), cache, device="cpu", progress=False)
    assert s5["generated"] == 2 and s5["cached"] == 2
    moved = tmp_path / "other_model"
    shutil.copytree(tiny_lm, moved)
    (moved / "backbone.json").write_text(json.dumps({"source": "path", "from": "elsewhere", "name": "tiny-lm"}))
    _, s6 = generate_all(TEXTS[:1], moved, PAPER_PROMPTS, 1, _settings(), cache, device="cpu", progress=False)
    assert s6["generated"] == 2


def test_whole_batch_stopping_gives_the_same_outputs(tiny_lm, monkeypatch):
    """Under transformers < 4.39 (envs/chatglm.yaml's 4.33) a batch stops only as a whole: a row done
    early is cut where it would have stopped, so completions, finish and token counts are unchanged."""
    import aoe.llm_supervised.generate as gen

    # a criterion the random model meets at different steps per row: three words
    monkeypatch.setattr(gen, "completed_items", lambda text, size: len(text.split()) >= 3)
    settings = _settings(batch_size=5, max_new_tokens=24, length_ratio=1.0)
    real_at_least = gen._transformers_at_least
    per_row, _ = generate_all(TEXTS, tiny_lm, PAPER_PROMPTS, 1, settings, None, device="cpu", progress=False)
    # the pipeline's transformers stops rows one by one; envs/chatglm.yaml's 4.33 only whole batches
    assert gen._RowsDone(None, 0, 1, []).per_row == real_at_least("4.39")
    monkeypatch.setattr(gen, "_transformers_at_least", lambda v: False if v == "4.39" else real_at_least(v))
    assert not gen._RowsDone(None, 0, 1, []).per_row
    whole, _ = generate_all(TEXTS, tiny_lm, PAPER_PROMPTS, 1, settings, None, device="cpu", progress=False)
    keys = ("text", "kind", "completion", "finish", "new_tokens")
    assert [tuple(r[k] for k in keys) for r in whole] == [tuple(r[k] for k in keys) for r in per_row]
    assert {r["finish"] for r in whole} >= {"stop"} and len({r["new_tokens"] for r in whole}) > 1


def test_remote_code_generator_loads_as_chatglm_does(tmp_path):
    """A generator registered only as AutoModel in its own .py files (THUDM/chatglm-6b's layout) loads with
    trust_remote_code from its backbone record, and greedy-decodes what the same weights do as a LLaMA."""
    from aoe.llm_supervised.generate import generator_class

    plain = build_tiny_lm(tmp_path / "plain")
    remote = build_remote_code_lm(tmp_path / "remote")
    assert generator_class(plain) == "AutoModelForCausalLM" and generator_class(remote) == "AutoModel"
    greedy = _settings(do_sample=False)
    ours, summary = generate_all(TEXTS, remote, PAPER_PROMPTS, 1, greedy, None, device="cpu", progress=False)
    assert summary["model_class"].endswith("modeling_tinyglm.TinyGlmForConditionalGeneration")
    expected, plain_summary = generate_all(TEXTS, plain, PAPER_PROMPTS, 1, greedy, None, device="cpu", progress=False)
    assert plain_summary["model_class"].endswith("LlamaForCausalLM")
    assert _completions(ours) == _completions(expected)

    untrusted = build_remote_code_lm(tmp_path / "untrusted", trusted=False)
    with pytest.raises(ValueError, match=r"set backbones\.tiny-remote\.trust_remote_code: true"):
        generate_all(TEXTS[:1], untrusted, PAPER_PROMPTS, 1, greedy, None, device="cpu", progress=False)


def test_fetch_backbone_takes_remote_code_when_asked(tmp_path):
    from aoe.model.backbones import materialize_backbone

    src = build_remote_code_lm(tmp_path / "src")
    record = materialize_backbone("tiny-remote", {"path": str(src), "trust_remote_code": True, "extra_files": ["*.py"]}, tmp_path / "a")
    assert record["trust_remote_code"] is True
    assert {p.name for p in (tmp_path / "a").glob("*.py")} == {"configuration_tinyglm.py", "modeling_tinyglm.py"}
    record = materialize_backbone("plain", {"path": str(src)}, tmp_path / "b")
    assert "trust_remote_code" not in record and not list((tmp_path / "b").glob("*.py"))


def test_generator_tables_and_their_checks():
    from aoe.llm_supervised import generated_splits
    from aoe.config.errors import ConfigError
    from aoe.plan.training_checks import check_llm_supervised

    config = {
        "backbones": {"llama-2-7b": {}, "chatglm-6b": {}},
        "llm_supervised": {"generators": {"stsb_llm": {"backbone": "llama-2-7b", "env": "torch"}, "stsb_llm_chatglm": {"backbone": "chatglm-6b", "env": "chatglm"}}},
        "trainsets": {"a": {"dataset": "stsb_llm_chatglm"}, "b": {"dataset": "stsb_self"}},
    }
    assert generated_splits(config) == {"stsb_llm": ("train",), "stsb_llm_chatglm": ("train",), "stsb_self": ("train",)}
    check_llm_supervised(config)
    bad = {**config, "trainsets": {"a": {"dataset": "stsb_llm_mistral"}}}
    with pytest.raises(ConfigError, match=r"trainsets\.a\.dataset: 'stsb_llm_mistral' is written by no llm_supervised\.generators entry"):
        check_llm_supervised(bad)
    gens = config["llm_supervised"]["generators"]
    for entry, message in (
        ({"stsb_llm_chatglm": {**gens["stsb_llm_chatglm"], "env": "chatglm2"}}, r"generators\.stsb_llm_chatglm\.env: no envs/chatglm2\.yaml"),
        ({"llm_chatglm": gens["stsb_llm_chatglm"]}, r"generators\.llm_chatglm: a generator's table is named stsb_llm"),
    ):
        with pytest.raises(ConfigError, match=message):
            check_llm_supervised({**config, "llm_supervised": {"generators": entry}, "trainsets": {}})


def test_generator_needs_its_identity(tiny_lm, tmp_path):
    bare = tmp_path / "bare"
    shutil.copytree(tiny_lm, bare)
    (bare / "backbone.json").unlink()
    with pytest.raises(FileNotFoundError, match="backbone.json"):
        generate_all(TEXTS[:1], bare, PAPER_PROMPTS, 1, _settings(), None, device="cpu", progress=False)


def test_cache_file_is_append_only(tmp_path):
    cache = GenerationCache(tmp_path / "c.jsonl")
    cache.add([{"key": "a", "completion": "x"}])
    cache.add([{"key": "b", "completion": "y"}])
    again = GenerationCache(tmp_path / "c.jsonl")
    assert again.get("a")["completion"] == "x" and again.get("b")["completion"] == "y" and again.skipped_lines == 0


# ---------------------------------------------------------------------------- tables


@pytest.fixture
def source_table(tmp_path) -> Path:
    from aoe.data.io import write_parquet_atomic

    # the STS-B train table's layout (aoe.data.contracts), a text repeated with other spacing
    rows = [(t, f"other {i}", float(i % 5), "train", "stsb") for i, t in enumerate(TEXTS + [" A plane is taking off. "])]
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    return write_parquet_atomic(df, tmp_path / "stsb" / "train.parquet")


def test_sample_texts_unique_and_seeded(source_table):
    texts, info = sample_texts(source_table)
    assert texts == TEXTS and info["rows"] == 6 and info["unique_texts"] == 5
    a, _ = sample_texts(source_table, n=3, seed=4)
    b, _ = sample_texts(source_table, n=3, seed=4)
    c, _ = sample_texts(source_table, n=3, seed=5)
    assert a == b and len(a) == 3 and set(a) <= set(TEXTS)
    assert [t for t in TEXTS if t in a] == a  # the table's order
    assert c != a


def _check_prepared(table: Path, manifest: Path, dataset: str) -> tuple[pd.DataFrame, dict]:
    from aoe.data.io import sha256_file

    df = pd.read_parquet(table)
    meta = json.loads(manifest.read_text())
    assert list(df.columns) == list(COLUMNS)
    assert str(df["score"].dtype) == "float64" and set(df["score"]) <= {0.0, 1.0}
    assert set(df["split"]) == {"train"} and dataset in GENERATED_SPLITS
    assert meta["dataset"] == dataset and meta["split"] == "train" and meta["rows"] == len(df)
    assert meta["rows_per_subset"] == df["subset"].value_counts().to_dict()
    assert meta["table_sha256"] == sha256_file(table)
    return df, meta


def test_pair_tables_are_prepared_tables(tiny_lm, tmp_path, source_table, minilm_dir):
    from aoe.llm_supervised.generate import run_generation

    texts, info = sample_texts(source_table)
    write_texts(texts, info, tmp_path / "texts.parquet", tmp_path / "texts.manifest.json")
    summary = run_generation(
        tmp_path / "texts.parquet", tiny_lm, "tiny-lm", PAPER_PROMPTS, 1, {"max_new_tokens": 12, "seed": 3},
        tmp_path / "cache", tmp_path / "gen.jsonl", tmp_path / "gen.json",
    )
    assert summary["generated"] == 10 and summary["identity"]["name"] == "tiny-lm"
    assert summary["prompts"] == PAPER_PROMPTS and summary["settings"]["seed"] == 3
    # the random model's completions are mostly junk: count whatever survives, from the real records
    records = [json.loads(line) for line in (tmp_path / "gen.jsonl").read_text().splitlines()]
    # one output the random model cannot have written, so the table is never empty
    records[0]["completion"], records[0]["finish"] = " A jet departs.\n", "stop"
    (tmp_path / "gen.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    data = tmp_path / "data" / LLM_DATASET
    manifest = build_llm_pairs(
        tmp_path / "gen.jsonl", tmp_path / "gen.json", tmp_path / "texts.manifest.json",
        data / "train.parquet", data / "train.manifest.json", data / "train.generations.jsonl",
    )
    df, meta = _check_prepared(data / "train.parquet", data / "train.manifest.json", LLM_DATASET)
    counts = meta["counts"]
    for kind, label in KINDS.items():
        kept = counts[kind]["kept"]
        assert counts[kind]["completions"] == len(TEXTS)
        assert kept + sum(counts[kind]["dropped"].values()) >= len(TEXTS)  # every completion gives >= 1 status
        assert (df["subset"] == kind).sum() == kept and set(df.loc[df["subset"] == kind, "score"]) <= {label}
    assert ("A plane is taking off.", "A jet departs.", 1.0) in set(zip(df["sentence1"], df["sentence2"], df["score"]))
    assert meta["origin"]["generator"] == "tiny-lm" and meta["prompts"] == PAPER_PROMPTS
    assert meta["source"]["texts"] == 5 and meta["generation"]["generated"] == 10
    annotated = [json.loads(line) for line in (data / "train.generations.jsonl").read_text().splitlines()]
    assert len(annotated) == 10 and all(a["sentences"] for a in annotated) and manifest["rows"] == len(df)

    self_dir = tmp_path / "data" / SELF_DATASET
    build_self_pairs(tmp_path / "texts.parquet", tmp_path / "texts.manifest.json", self_dir / "train.parquet", self_dir / "train.manifest.json")
    sdf, _ = _check_prepared(self_dir / "train.parquet", self_dir / "train.manifest.json", SELF_DATASET)
    assert sdf["sentence1"].tolist() == TEXTS and (sdf["sentence1"] == sdf["sentence2"]).all() and (sdf["score"] == 1).all()

    # the training path reads them: one token id per distinct text, identical texts share it
    from aoe.model.tokens import build_token_cache

    identity = build_token_cache(self_dir / "train.parquet", minilm_dir, 32, tmp_path / "tokens")
    assert identity["n_examples"] == 5 and identity["n_texts"] == 5


# ---------------------------------------------------------------------------- workflow


@pytest.mark.slow
@needs_mirror
def test_cpu_preset_plans_the_chain(tmp_path):
    work = copy_workflow(tmp_path / "wf")
    out = snakemake(work, "-n", "--configfile", "presets/llm-supervised-cpu.yaml", env={"AOE_DATA_MIRROR": str(MIRROR)})
    assert out.returncode == 0, out.stdout[-3000:]
    counts = job_counts(out.stdout)
    assert counts == {
        "download_file": 2,  # STS-B train and test, from the mirror
        "fetch_backbone": 2,  # the generator and the trained encoder
        "prepare_sts": 2,  # STS-B train (the texts) and test (the evaluation)
        "llm_sample_texts": 1,
        "llm_generate": 1,
        "llm_pairs": 1,
        "llm_self_pairs": 1,
        "tokenize": 2,
        "train_model": 6,  # AoE + LLM and SimCSE-style, seeds 1-3
        "evaluate_sts": 8,  # those 6 and the backbone as downloaded, both ways (its own mean pooling, CLS: issue 70)
        "table": 1,
        "model_card": 6,  # one per trained cell (rules/cards.smk)
        "report_md": 1,
        "recipe": 1,
        "table_html": 1,  # the report's pages (rules/report.smk, rules/tables.smk)
        "report_page": 2,  # REPORT.html, RECIPE.html
        "runtimes": 1,
        "all": 1,
    }, out.stdout[-3000:]
    # the generation is a GPU job on one node, like every other (rules/common.smk gpu_placement)
    generate = out.stdout[out.stdout.index("rule llm_generate:"):]
    assert "nodes=1" in generate[:generate.index("\n\n")] and "gpu=1" in generate[:generate.index("\n\n")], generate[:2000]
    for path in ("results/llm-supervised-cpu/data/stsb_llm/train.parquet", "results/llm-supervised-cpu/data/stsb_self/train.parquet", "results/llm-supervised-cpu/backbones/gemma3-270m"):
        assert path in out.stdout


def test_generator_must_be_a_backbone(tmp_path):
    work = copy_workflow(tmp_path / "wf")
    (work / "bad.yaml").write_text("llm_supervised: {generators: {stsb_llm: {backbone: no-such-model}}}\n")
    out = snakemake(work, "-n", "--configfile", "presets/llm-supervised-cpu.yaml", "bad.yaml", env={"AOE_DATA_MIRROR": ""})
    assert out.returncode != 0 and "llm_supervised.generators.stsb_llm.backbone: unknown backbone 'no-such-model'" in out.stdout


def test_config_documents_the_block():
    import yaml

    config = yaml.load((REPO / "config.yaml").read_text(), Loader=YAML_LOADER)
    schema = yaml.load((REPO / "schemas" / "config.schema.yaml").read_text(), Loader=YAML_LOADER)
    props = schema["properties"]["llm_supervised"]["properties"]
    assert set(config["llm_supervised"]) <= set(props)
    assert config["llm_supervised"]["prompts"] == PAPER_PROMPTS
    assert {props["prompts"]["properties"][k]["default"] for k in KINDS} == set(PAPER_PROMPTS.values())
    assert set(GenerationSettings.__dataclass_fields__) == set(props["generation"]["properties"])
