"""Loss parity with the official angle-emb releases the paper cells follow, on real batches.

    .venv/bin/python bench/parity/official_parity.py [--cases nli-aoe-bert,...] [--batches 3] [--out PATH]

Each case takes one paper cell's objective as the pipeline resolves it (``config.yaml``, a
preset merged over it, ``aoe.config.cell_settings.train_params``) and the official release and loss
settings of the command that cell follows, written here from the official sources (not from
our config), so a wrong weight, scale or switch on our side shows as a difference:

========================  ============================  ========  =========================================
case                      our cell (backbone/obj/set)   official  official loss (AngleLoss) and collator
========================  ============================  ========  =========================================
nli-aoe-bert              bert-base-uncased/aoe/nli     0.4.6     cosine_w 0, ibn_w 30, angle_w 1, angle_tau 20,
                                                                  ibn_tau 20; filter_duplicate=True
                                                                  (1c5515b examples/NLI/README.md:50-69)
nli-angle-bert            bert-base-uncased/            0.1.1     w1 1, w2 1, w3 1, angle_tau 1.0 (defaults);
                          angle_arxiv/nli                         similar_matrix (compute_similar_matrix=True)
stsb-angle-bert           bert-base-uncased/            0.1.1     as above, labels the raw STS-B 0-5 scores
                          angle_arxiv/stsb                        (int(label) in AngleDataTokenizer)
nli-aoe-llama             llama-2-7b/aoe/nli            0.1.1     --w2 35 + train_angle.py defaults w1 1, w3 1,
                                                                  angle_tau 1.0; similar_matrix (v0.1.1
                                                                  README.md:56-60, train_angle.py:25-30,47)
nli-aoe-llama-2024        the same cell with            0.2.0     the same loss (70cbd01 examples/NLI/README.md:
                          presets/paper-llm-2024.yaml             32-37); its pool 120, max_length 50
========================  ============================  ========  =========================================

Data: SNLI dev pairs from the mirror (the pipeline's reader, entailment 1 / contradiction 0,
neutral dropped) or STS-B train (``_common.stsb_table``), tokenized into the pipeline's token
cache (``aoe.model.tokens.build_token_cache``: MiniLM-L6's tokenizer; the LLaMA cases wrap each text
in the cell's prompt). Batches of the cell's in-batch pool (batch / accumulation / GPUs under
``in_batch_pool: process``; 128, 32, 160, 120): the first ``--batches`` of the engine's epoch
order (``aoe.training.train.epoch_batches``, seed 42), the table's first rows in file order (SNLI: each
premise twice in a row) and a crafted batch that puts repeated texts where the official
duplicate handling differs most (an example whose second text repeats an earlier one, then an
example with its first text, as the 0.4.6 collator still counts a dropped example's first text;
a text three times; pairs of two identical texts).

Embeddings: one per distinct token sequence of those batches, float64, from the real MiniLM-L6
(CLS) or, for the LLaMA cases, a tiny random LLaMA (hidden 64, 2 layers, seed 0, MiniLM's
tokenizer; last-token pooling), so identical texts have identical embeddings on both sides.

Ours: ``objective((u, v), objective.train_labels(scores, score_range), text_ids)`` with the
cache's text ids, as the training loop calls it. Official: in its own venv
(``_common.ensure_angle_venv``), a worker process reads the batches from a .pt file, runs each
row through the release's ``AngleDataTokenizer`` (its labels are ``int(label)``; the token ids it
makes are compared with ours and the count of differences recorded), builds the batch with the
release's ``AngleDataCollator`` on our token ids (where the duplicate handling lives: 0.1.x/0.2.0
``similar_matrix``, 0.4.6 ``filter_duplicate``), looks each collated row's embedding up by its
token ids, and evaluates ``AngleLoss`` and its three functions. Criterion: |ours - official|
<= 1e-6 for every component and the total, in float64 on both sides. The JSON
(bench/parity/results/official_parity.json) has every batch's values, the examples each side kept,
the official target counts and the venvs' package versions.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench/, after the group folders: _common (bench/_moved.py)
import _common as C  # noqa: E402

RESULT = C.committed(__file__, "official_parity.json")
RESULT_STEPS = C.committed(__file__, "official_parity_steps.json")
STEP_TOLERANCE = 1e-5  # max |weight difference| after the steps, fp32 on CPU
TOLERANCE = 1e-6
SEED = 42
COMPONENTS = ("cosine", "contrastive", "angle")

# Official loss settings per release family, from the official sources (see the module docstring).
_PAPER_ERA_LOSS = {"w1": 1.0, "w2": 1.0, "w3": 1.0, "cosine_tau": 20.0, "ibn_tau": 20.0, "angle_tau": 1.0}  # AngleLoss defaults, 0.1.1/0.2.0
CASES: dict[str, dict] = {
    "nli-aoe-bert": {
        "cell": ("bert-base-uncased", "aoe", "nli"), "configfiles": (), "data": "snli-dev", "model": "minilm",
        "official": "0.4.6",
        "loss": {"cosine_w": 0.0, "ibn_w": 30.0, "angle_w": 1.0, "cosine_tau": 20.0, "ibn_tau": 20.0, "angle_tau": 20.0,
                 "angle_pooling_strategy": "sum"},
        "collator": {"filter_duplicate": True},
        "source": "1c5515b examples/NLI/README.md:50-69 (--ibn_w 30 --cosine_w 0 --angle_w 1, angle_tau default 20); "
                  "fit's filter_duplicate default True (1c5515b angle_emb/angle.py:1428)",
    },
    "nli-angle-bert": {
        "cell": ("bert-base-uncased", "angle_arxiv", "nli"), "configfiles": (), "data": "snli-dev", "model": "minilm",
        "official": "0.1.1", "loss": _PAPER_ERA_LOSS, "collator": {"compute_similar_matrix": True},
        "source": "v0.1.1 AngleLoss defaults (angle_emb/angle.py:148-162); fit's compute_similar_matrix default True",
    },
    "stsb-angle-bert": {
        "cell": ("bert-base-uncased", "angle_arxiv", "stsb"), "configfiles": (), "data": "stsb-train", "model": "minilm",
        "official": "0.1.1", "loss": _PAPER_ERA_LOSS, "collator": {"compute_similar_matrix": True},
        "source": "v0.1.1 AngleLoss defaults; STS-B labels float(score) (00a78ed README custom train), int() in AngleDataTokenizer",
    },
    "nli-aoe-llama": {
        "cell": ("llama-2-7b", "aoe", "nli"), "configfiles": (), "data": "snli-dev", "model": "tiny-llama",
        "official": "0.1.1", "loss": {**_PAPER_ERA_LOSS, "w2": 35.0}, "collator": {"compute_similar_matrix": True},
        "source": "v0.1.1 README.md:56-60 --w2 35 --maxlen 45 --batch_size 160; train_angle.py:25-30 (w1 1, w3 1, "
                  "angle_tau 1.0), :47 compute_similar_matrix 1",
    },
    "nli-aoe-llama-2024": {
        "cell": ("llama-2-7b", "aoe", "nli"), "configfiles": ("presets/paper-llm-2024.yaml",), "data": "snli-dev",
        "model": "tiny-llama", "official": "0.2.0", "loss": {**_PAPER_ERA_LOSS, "w2": 35.0},
        "collator": {"compute_similar_matrix": True},
        "source": "70cbd01 examples/NLI/README.md:32-37 (--w2 35 --maxlen 50 --batch_size 120), train_nli.py defaults",
    },
}


# --------------------------------------------------------------------------- our side (this venv)


def resolve_case(name: str) -> dict:
    """The cell's resolved training parameters, objective and in-batch pool (pairs one loss sees)."""
    from aoe.config.cell_settings import in_batch_pool_size, train_params
    from aoe.losses import get_objective
    from aoe.plan.check import load_config

    case = CASES[name]
    config = load_config(C.REPO, [C.REPO / f for f in case["configfiles"]])
    backbone, objective_name, trainset = case["cell"]
    params = train_params(config, backbone, objective_name, trainset, SEED)
    pool, gpus = in_batch_pool_size(config, backbone, params)
    objective = get_objective(params["objective"], params["objective_overrides"], format=params["format"])
    return {"params": params, "objective": objective, "pool": pool, "gpus": gpus}


def _table(data: str, mirror: str) -> Path:
    """The case's pair table (sentence1, sentence2, score) under bench/out/work/."""
    if data == "stsb-train":
        return C.stsb_table("train", mirror)
    from aoe.data.io import write_parquet_atomic
    from aoe.data.nli import NLI_MIRROR_FILES, nli_formats, read_nli_csv

    out = C.WORK_DIR / "snli-dev-pairs.parquet"
    if not out.is_file():
        rel, rows = NLI_MIRROR_FILES["snli"]["dev"]
        out.parent.mkdir(parents=True, exist_ok=True)
        write_parquet_atomic(nli_formats(read_nli_csv(Path(mirror) / rel, rows))["pairs"], out)
    return out


def tiny_llama_dir() -> Path:
    """A tiny random LLaMA (hidden 64, 2 layers, seed 0) with MiniLM-L6's tokenizer, built once."""
    import shutil

    import torch
    from transformers import LlamaConfig, LlamaModel

    from aoe.util.fsutil import atomic_dir

    out = C.WORK_DIR / "tiny-llama"
    if (out / "config.json").is_file():
        return out
    bb = C.backbone_dir()
    with atomic_dir(out) as tmp:
        for f in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            if (bb / f).is_file():
                shutil.copy2(bb / f, tmp / f)
        vocab = sum(1 for _ in (bb / "vocab.txt").open(encoding="utf-8"))
        config = LlamaConfig(vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                             num_key_value_heads=2, intermediate_size=128, max_position_embeddings=128, pad_token_id=0)
        torch.manual_seed(0)
        LlamaModel(config).save_pretrained(tmp, safe_serialization=True)
    return out


def _cache(name: str, table: Path, model_dir: Path, max_length: int, prompt: str | None) -> Path:
    from aoe.model.tokens import StaleCacheError, build_token_cache, load_token_cache

    out = C.WORK_DIR / "tokens" / f"parity-{name}-{table.stem}-{max_length}"
    try:
        load_token_cache(out, table, model_dir, max_length, prompt)
    except StaleCacheError:  # missing, or built by another cache format, table or tokenizer
        build_token_cache(table, model_dir, max_length, out, prompt=prompt)
    return out


def _crafted(tid1: list[int], tid2: list[int], pool: int, filler: list[int]) -> list[int]:
    """Rows that put repeated texts where the official duplicate handlings differ, topped up from ``filler``.

    i, j, k: j's second text repeats i's second text (j's first is new), k has j's first text
    (0.4.6 drops j, and k because j's first text entered its seen set); three rows sharing one
    first text; every pair of two identical texts.
    """
    first_rows: dict[int, list[int]] = {}
    for r, t in enumerate(tid1):
        first_rows.setdefault(t, []).append(r)
    second_rows: dict[int, list[int]] = {}
    for r, t in enumerate(tid2):
        second_rows.setdefault(t, []).append(r)
    picked: list[int] = []
    found = 0
    for t, rows in second_rows.items():
        if found >= 2 or len(picked) > pool // 2:
            break
        for i in rows:
            j = next((r for r in rows if r != i and tid1[r] != tid1[i] and len(first_rows[tid1[r]]) > 1), None)
            if j is None:
                continue
            k = next(r for r in first_rows[tid1[j]] if r != j)
            picked += [x for x in (i, j, k) if x not in picked]
            found += 1
            break
    triple = next((rows for rows in first_rows.values() if len(rows) >= 3), [])
    picked += [r for r in triple[:3] if r not in picked]
    picked += [r for r in range(len(tid1)) if tid1[r] == tid2[r] and r not in picked][:4]
    picked = picked[:pool]
    return picked + [r for r in filler if r not in picked][: pool - len(picked)]


def build_batches(name: str, resolved: dict, n_engine: int, mirror: str, only: set[str] | None = None) -> dict:
    """The case's batches (row indices, token ids, text ids, scores) and one embedding per distinct token sequence.

    ``only``: the batch labels to keep (engine-0.., file-order, crafted, case-variants); default all.
    """
    import pandas as pd
    import torch
    from transformers import AutoModel, AutoTokenizer

    from aoe.model.encoder import embed, pad_ids
    from aoe.model.tokens import ensure_pad_token
    from aoe.model.tokens import load_token_cache
    from aoe.training.train import epoch_batches

    case, params, pool = CASES[name], resolved["params"], resolved["pool"]
    table = _table(case["data"], mirror)
    model_dir = tiny_llama_dir() if case["model"] == "tiny-llama" else C.backbone_dir()
    prompt, max_length = params.get("prompt"), params["max_length"]
    cache = _cache(case["model"], table, model_dir, max_length, prompt)
    data = load_token_cache(cache, table, model_dir, max_length, prompt)
    n = len(data)
    tid1, tid2 = list(data["text_id_1"]), list(data["text_id_2"])
    engine = epoch_batches(n, pool, SEED, 0)
    batches = {f"engine-{i}": b for i, b in enumerate(engine[:n_engine])}
    batches["file-order"] = list(range(pool))
    filler = engine[n_engine] if len(engine) > n_engine else list(range(n))
    batches["crafted"] = _crafted(tid1, tid2, pool, filler)
    # texts that differ as strings but not as token ids (an uncased tokenizer: "A man ..." / "a man ..."): one
    # text to the official collators and to the cache's text ids; this batch puts both spellings together
    df = pd.read_parquet(table)
    spellings: dict[int, set] = {}
    for k in (1, 2):
        for text, t in zip(df[f"sentence{k}"], data[f"text_id_{k}"]):
            spellings.setdefault(int(t), set()).add(text)
    variants = {t for t, group in spellings.items() if len(group) > 1}
    if variants:
        picked, seen = [], set()
        for r in range(n):  # one row per spelling, so each group's spellings meet in the batch
            for k, t in ((1, tid1[r]), (2, tid2[r])):
                key = (t, df[f"sentence{k}"].iat[r])
                if t in variants and key not in seen:
                    seen.add(key)
                    picked.append(r)
                    break
        picked = picked[:pool]
        batches["case-variants"] = picked + [r for r in filler if r not in picked][: pool - len(picked)]
    if only is not None:
        batches = {k: v for k, v in batches.items() if k in only}
    out = {}
    seqs: dict[tuple, int] = {}
    for label, rows in batches.items():
        r = data[rows]
        ids = [list(map(int, x)) for x in r["input_ids_1"]], [list(map(int, x)) for x in r["input_ids_2"]]
        for s in ids[0] + ids[1]:
            seqs.setdefault(tuple(s), len(seqs))
        out[label] = {"rows": rows, "ids1": ids[0], "ids2": ids[1],
                      "text_ids": [[int(a), int(b)] for a, b in zip(r["text_id_1"], r["text_id_2"])],
                      "scores": [float(x) for x in r["score"]],
                      "texts": [[str(df["sentence1"].iat[i]), str(df["sentence2"].iat[i])] for i in rows]}
    # one embedding per distinct token sequence, float64, eval mode (no dropout)
    tokenizer = ensure_pad_token(AutoTokenizer.from_pretrained(model_dir))
    model = AutoModel.from_pretrained(model_dir, dtype=torch.float64).eval()
    keys = list(seqs)
    embs = []
    with torch.no_grad():
        for s in range(0, len(keys), 64):
            enc = pad_ids([list(k) for k in keys[s : s + 64]], tokenizer)
            embs.append(embed(model, params["pooling"], enc["input_ids"], enc["attention_mask"]).double())
    return {"table": str(table), "cache": str(cache), "model_dir": str(model_dir), "batches": out,
            "seqs": keys, "emb": torch.cat(embs), "tokenizer_dir": str(model_dir)}


def ours(resolved: dict, built: dict) -> dict:
    """Our objective on each batch: per-component values, total, the examples the filter keeps."""
    import torch

    from aoe.losses import filter_duplicates

    objective, params = resolved["objective"], resolved["params"]
    index = {k: i for i, k in enumerate(built["seqs"])}
    res = {}
    for label, b in built["batches"].items():
        u = built["emb"][[index[tuple(s)] for s in b["ids1"]]]
        v = built["emb"][[index[tuple(s)] for s in b["ids2"]]]
        labels = objective.train_labels(torch.tensor(b["scores"], dtype=torch.float32), tuple(params["score_range"]))
        text_ids = torch.tensor(b["text_ids"])
        total, parts = objective((u, v), labels, text_ids)
        kept = filter_duplicates(text_ids).nonzero().flatten().tolist() if objective.identical_texts == "filter" \
            else list(range(len(b["rows"])))
        # pairs of texts in the batch that are one text by token ids (the losses' identity) and by string
        token_same = string_same = 0
        flat_tid = [t for pair in b["text_ids"] for t in pair]
        flat_str = [t for pair in b["texts"] for t in pair]
        for i in range(len(flat_tid)):
            for j in range(i + 1, len(flat_tid)):
                token_same += flat_tid[i] == flat_tid[j]
                string_same += flat_str[i] == flat_str[j]
        # examples dropped only because a dropped example's texts entered the seen set (the 0.4.6 quirk)
        seen, naive = set(), 0
        for pair in b["text_ids"]:
            if not seen & set(pair) and pair[0] != pair[1]:
                naive += 1
                seen |= set(pair)
        res[label] = {"parts": {k: float(x) for k, x in parts.items()}, "total": float(total), "kept": kept,
                      "kept_if_dropped_texts_did_not_count": naive,
                      "labels": labels.tolist(), "identical_text_pairs": token_same, "identical_string_pairs": string_same}
    return res


# --------------------------------------------------------------------------- official side (its venv)


def _official_features(data_tok, b: dict) -> tuple[list[dict], int]:
    """Each example through the release's AngleDataTokenizer (its labels: [int(label)]), on our token ids.

    The collator then runs on our ids, the identity the comparison needs; the count of examples
    whose official token ids differ from ours is returned beside.
    """
    features, tok_diff = [], 0
    for (t1, t2), score, ids1, ids2 in zip(b["texts"], b["scores"], b["ids1"], b["ids2"]):
        f = data_tok({"text1": t1, "text2": t2, "label": score})
        tok_diff += f["input_ids"] != ids1 + ids2
        f["input_ids"] = ids1 + ids2
        f["attention_mask"] = [1] * len(f["input_ids"])
        if "token_type_ids" in f:
            f["token_type_ids"] = [0] * len(f["input_ids"])
        f["seperate_ids"] = [0] * len(ids1) + [1] * len(ids2)
        features.append(f)
    return features, tok_diff


def worker_official(payload_path: str, out_path: str) -> None:
    """Run in angle-emb's venv: AngleDataTokenizer -> AngleDataCollator -> AngleLoss on each batch of the payload."""
    import inspect

    import torch
    import transformers
    from transformers import AutoTokenizer

    import angle_emb
    import angle_emb.angle as A

    p = torch.load(payload_path, weights_only=False)
    version = angle_emb.__version__
    tokenizer = AutoTokenizer.from_pretrained(p["tokenizer_dir"])
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.unk_token
    data_tok = A.AngleDataTokenizer(tokenizer, p["max_length"], prompt_template=p["prompt"])
    collator = A.AngleDataCollator(tokenizer, padding="longest", max_length=p["max_length"], **p["collator"])
    index = {tuple(k): i for i, k in enumerate(p["seqs"])}
    loss_kwargs = dict(p["loss"])
    new_api = "cosine_w" in inspect.signature(A.AngleLoss.__init__).parameters
    if new_api:
        loss_fn = A.AngleLoss(dataset_format=A.DatasetFormats.A, **loss_kwargs)  # "text1,text2,label"
        w = {"cosine": loss_kwargs["cosine_w"], "contrastive": loss_kwargs["ibn_w"], "angle": loss_kwargs["angle_w"]}
    else:
        loss_fn = A.AngleLoss(**loss_kwargs)
        w = {"cosine": loss_kwargs["w1"], "contrastive": loss_kwargs["w2"], "angle": loss_kwargs["w3"]}
    results = {}
    for label, b in p["batches"].items():
        features, tok_diff = _official_features(data_tok, b)
        batch = collator(features)
        ids, mask = batch["input_ids"], batch["attention_mask"]
        rows = [tuple(ids[r][mask[r].bool()].tolist()) for r in range(ids.shape[0])]
        emb = p["emb"][[index[r] for r in rows]]  # zigzag: t1_0, t2_0, t1_1, ...
        # which examples survived (the collated rows are the kept examples' texts, in order)
        kept, e = [], 0
        for i in range(0, len(rows), 2):
            while e < len(b["ids1"]) and (tuple(b["ids1"][e]), tuple(b["ids2"][e])) != (rows[i], rows[i + 1]):
                e += 1
            if e == len(b["ids1"]):
                raise RuntimeError(f"{label}: collated rows {i}, {i + 1} are no example of the batch")
            kept.append(e)
            e += 1
        labels = batch["labels"]
        sm = batch.get("similar_matrix")
        if new_api:
            parts = {"cosine": A.cosine_loss(labels, emb, loss_kwargs["cosine_tau"]),
                     "contrastive": A.in_batch_negative_loss(labels, emb, loss_kwargs["ibn_tau"]),
                     "angle": A.angle_loss(labels, emb, loss_kwargs["angle_tau"],
                                           pooling_strategy=loss_kwargs["angle_pooling_strategy"])}
            total = loss_fn(labels, emb)
        else:
            parts = {"cosine": A.cosine_loss(labels, emb, loss_kwargs["cosine_tau"]),
                     "contrastive": A.in_batch_negative_loss(labels, emb, loss_kwargs["ibn_tau"], similar_matrix=sm),
                     "angle": A.angle_loss(labels, emb, loss_kwargs["angle_tau"])}
            total = loss_fn(labels, emb, similar_matrix=sm)
        partners, extra = C.official_target_counts(labels)
        results[label] = {
            "parts": {k: float(v) for k, v in parts.items() if w[k] > 0},
            "total": float(total), "dtype": str(emb.dtype), "kept": kept, "rows": len(rows),
            "labels": labels[::2, 0].tolist(), "tokenizer_ids_differ": int(tok_diff),
            "similar_matrix_entries": int((sm > 0).sum()) if sm is not None else None,
            "ibn_partner_targets": partners, "ibn_extra_targets": extra,
        }
    versions = {"angle_emb": version, "torch": torch.__version__, "transformers": transformers.__version__,
                "python": sys.version.split()[0]}
    Path(out_path).write_text(json.dumps({"versions": versions, "batches": results}))


def official(name: str, resolved: dict, built: dict) -> dict:
    """The case's official values: its venv, a payload .pt, the worker."""
    import torch

    case = CASES[name]
    py = C.ensure_angle_venv(case["official"])
    work = C.WORK_DIR / "official-parity"
    work.mkdir(parents=True, exist_ok=True)
    payload, out = work / f"{name}.pt", work / f"{name}.json"
    torch.save({"tokenizer_dir": built["tokenizer_dir"], "max_length": resolved["params"]["max_length"],
                "prompt": resolved["params"].get("prompt"), "collator": case["collator"], "loss": case["loss"],
                "seqs": [list(s) for s in built["seqs"]], "emb": built["emb"],
                "batches": {k: {x: b[x] for x in ("texts", "scores", "ids1", "ids2")} for k, b in built["batches"].items()}},
               payload)
    env = {**os.environ, "OMP_NUM_THREADS": "2", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([str(py), str(Path(__file__).resolve()), "--worker", str(payload), str(out)],
                          capture_output=True, text=True, env=env, cwd=C.REPO)
    if proc.returncode != 0:
        raise SystemExit(f"official worker ({case['official']}) failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return json.loads(out.read_text())


# --------------------------------------------------------------------------- comparison


def run_case(name: str, n_engine: int, mirror: str, only: set[str] | None = None) -> dict:
    """One case end to end: our objective and the official release on the same batches, compared."""
    start = time.perf_counter()
    resolved = resolve_case(name)
    built = build_batches(name, resolved, n_engine, mirror, only)
    mine = ours(resolved, built)
    theirs = official(name, resolved, built)
    obj, params, case = resolved["objective"], resolved["params"], CASES[name]
    batches = {}
    for label, b in built["batches"].items():
        o, t = mine[label], theirs["batches"][label]
        # a component one side computes and the other does not (a weight 0 on one side only) is a failure
        diff = {k: abs(o["parts"][k] - t["parts"][k]) if k in o["parts"] and k in t["parts"] else float("inf")
                for k in set(o["parts"]) | set(t["parts"])}
        diff["total"] = abs(o["total"] - t["total"])
        n_ex = len(b["rows"])
        batches[label] = {
            "examples": n_ex, "abs_diff": diff,
            "kept_same": o["kept"] == t["kept"],
            "labels_same": [o["labels"][i] for i in t["kept"]] == t["labels"],  # the labels of the examples both keep
            "label_counts": {str(x): t["labels"].count(x) for x in sorted(set(t["labels"]))},
            # the lists compared above, as the examples each side dropped (positions in the batch)
            "ours": {**{k: v for k, v in o.items() if k not in ("kept", "labels")},
                     "dropped": sorted(set(range(n_ex)) - set(o["kept"]))},
            "official": {**{k: v for k, v in t.items() if k not in ("kept", "labels")},
                         "dropped": sorted(set(range(n_ex)) - set(t["kept"]))},
        }
    worst = {k: max((bt["abs_diff"][k] for bt in batches.values() if k in bt["abs_diff"]), default=None)
             for k in (*COMPONENTS, "total")}
    ok = all(v is None or v <= TOLERANCE for v in worst.values()) and all(
        bt["kept_same"] and bt["labels_same"] for bt in batches.values())
    return {
        "cell": "/".join(case["cell"]), "configfiles": list(case["configfiles"]),
        "ours": {"objective": params["objective"], "objective_overrides": params["objective_overrides"],
                 "resolved": {k: getattr(obj, k) for k in ("weights", "cosine_tau", "contrastive_tau", "angle_tau",
                                                          "graded_labels", "contrastive_reduction", "identical_texts")},
                 "score_range": params["score_range"], "pool": resolved["pool"], "gpus": resolved["gpus"],
                 "max_length": params["max_length"], "prompt": params.get("prompt"), "pooling": params["pooling"]},
        "official": {"release": case["official"], "loss": case["loss"], "collator": case["collator"], "source": case["source"],
                     "versions": theirs["versions"]},
        "data": {"table": built["table"], "token_cache": built["cache"], "model": built["model_dir"],
                 "distinct_texts": len(built["seqs"]), "embedding_dtype": str(built["emb"].dtype)},
        "batches": batches, "max_abs_diff": worst, "pass": ok, "seconds": round(time.perf_counter() - start, 1),
    }


# --------------------------------------------------------------------------- step parity (--steps N)

STEP_CASES = ("stsb-angle-bert", "nli-aoe-bert")


def nodropout_backbone() -> Path:
    """MiniLM-L6 with hidden and attention dropout 0 (a copy under bench/out/work/): both trainers deterministic."""
    import shutil

    from aoe.util.fsutil import atomic_dir

    out = C.WORK_DIR / "minilm-l6-nodropout"
    if (out / "config.json").is_file():
        return out
    src = C.backbone_dir()
    with atomic_dir(out) as tmp:
        for f in ("model.safetensors", "vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            shutil.copy2(src / f, tmp / f)
        config = json.loads((src / "config.json").read_text())
        config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return out


def _load_weights(path: Path) -> dict:
    import torch
    from safetensors.torch import load_file

    state = load_file(str(path)) if path.suffix == ".safetensors" else torch.load(path, weights_only=True)
    return {k.removeprefix("bert."): v.float() for k, v in state.items()}


def _key_bias_gradients(backbone: Path, data, rows: list[int], objective, score_range) -> dict:
    """Max |gradient| of the attention key biases and of the query biases on one batch, fp32 and fp64.

    A key bias adds the same amount to every score of a query row, which softmax ignores: its
    exact gradient is 0, so what a trainer computes is rounding noise (smaller in fp64).
    """
    import torch
    from transformers import AutoModel, AutoTokenizer

    from aoe.model.encoder import embed, pad_ids

    tokenizer = AutoTokenizer.from_pretrained(backbone)
    r = data[rows]
    seqs = [list(map(int, x)) for pair in zip(r["input_ids_1"], r["input_ids_2"]) for x in pair]  # zigzag
    enc = pad_ids(seqs, tokenizer)
    labels = objective.train_labels(torch.tensor(list(r["score"]), dtype=torch.float32), tuple(score_range))
    text_ids = torch.tensor([[int(a), int(b)] for a, b in zip(r["text_id_1"], r["text_id_2"])])
    out = {}
    for dtype in (torch.float32, torch.float64):
        model = AutoModel.from_pretrained(backbone, dtype=dtype)
        emb = embed(model, "cls", enc["input_ids"], enc["attention_mask"]).view(len(rows), 2, -1)
        total, _ = objective((emb[:, 0], emb[:, 1]), labels.to(dtype), text_ids)
        total.backward()
        grads = dict(model.named_parameters())
        key = max(float(p.grad.abs().max()) for n, p in grads.items() if n.endswith("attention.self.key.bias"))
        query = max(float(p.grad.abs().max()) for n, p in grads.items() if n.endswith("attention.self.query.bias"))
        out[str(dtype).removeprefix("torch.")] = {"key_bias_max_abs_grad": key, "query_bias_max_abs_grad": query}
    return out


def step_case(name: str, steps: int, mirror: str) -> dict:
    """``steps`` optimizer steps of aoe.training.train.train and of the official trainer from the same weights on the same batches."""
    import shutil

    import torch

    from aoe.model.tokens import load_token_cache
    from aoe.training.train import TrainConfig, epoch_batches, num_warmup_steps, train

    start = time.perf_counter()
    case, resolved = CASES[name], resolve_case(name)
    params, pool = resolved["params"], resolved["pool"]
    backbone = nodropout_backbone()
    table = _table(case["data"], mirror)
    max_length = params["max_length"]
    cache = _cache("minilm-nodropout", table, backbone, max_length, None)
    # the cell's settings, on one process: the in-batch pool as the batch, no accumulation, fp32,
    # one padded forward pass per batch (as the official collator pads), no earlier stage, every step logged
    cfg = TrainConfig(**{**params, "batch_size": pool, "gradient_accumulation_steps": 1, "max_steps": steps, "epochs": 1,
                         "init": None, "length_buckets": 1, "length_grouped": False, "mixed_precision": "no",
                         "gradient_checkpointing": False, "log_every": 1, "checkpoint_every": 0})
    # ours caps the warm-up at the run's length (num_warmup_steps), the HF Trainer does not: a run
    # shorter than the cell's warm-up (the NLI cell's 50 steps) gets the capped value on both sides
    warmup = num_warmup_steps(cfg, steps)
    out = C.WORK_DIR / "step-parity" / name
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(out.with_name(out.name + ".ckpt"), ignore_errors=True)
    train(cache, table, backbone, out / "ours", cfg)
    # the noise floor: ours again with the same arithmetic in exact terms (texts embedded in two
    # length buckets, each padded to its own longest), only the rounding differs
    train(cache, table, backbone, out / "ours-buckets2", dataclasses.replace(cfg, length_buckets=2))
    ours_losses = [json.loads(x)["loss"] for x in (out / "ours" / "metrics.jsonl").read_text().splitlines() if x]

    # the official side: the same rows in the engine's order, sequentially sampled
    data = load_token_cache(cache, table, backbone, max_length)
    order = epoch_batches(len(data), pool, cfg.seed, 0)[:steps]
    rows = [i for b in order for i in b]
    import pandas as pd

    df = pd.read_parquet(table)
    r = data[rows]
    payload = out / "official.pt"
    torch.save({"backbone": str(backbone), "max_length": max_length, "batch_size": pool, "steps": steps,
                "learning_rate": cfg.learning_rate, "warmup_steps": warmup, "seed": cfg.seed,
                "loss": case["loss"], "fit": case["collator"],
                "rows": {"texts": [[str(df["sentence1"].iat[i]), str(df["sentence2"].iat[i])] for i in rows],
                         "scores": [float(x) for x in r["score"]],
                         "ids1": [list(map(int, x)) for x in r["input_ids_1"]],
                         "ids2": [list(map(int, x)) for x in r["input_ids_2"]]}}, payload)
    env = {**os.environ, "OMP_NUM_THREADS": "2", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    py = C.ensure_angle_venv(case["official"])
    proc = subprocess.run([str(py), str(Path(__file__).resolve()), "--steps-worker", str(payload), str(out / "official")],
                          capture_output=True, text=True, env=env, cwd=C.REPO)
    if proc.returncode != 0:
        raise SystemExit(f"official trainer ({case['official']}) failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    theirs = json.loads((out / "official" / "result.json").read_text())

    w0 = _load_weights(backbone / "model.safetensors")
    w_ours = _load_weights(out / "ours" / "model.safetensors")
    w_off = _load_weights(out / "official" / "state_dict.pt")
    w_floor = _load_weights(out / "ours-buckets2" / "model.safetensors")
    common = sorted(set(w_ours) & set(w_off))
    delta = {k: float((w_ours[k] - w_off[k]).abs().max()) for k in common}
    moved = {k: float((w_ours[k] - w0[k]).abs().max()) for k in common if k in w0}
    worst = max(delta, key=delta.get)
    # attention key biases get no gradient in exact arithmetic (softmax ignores a constant added to
    # a query's scores): theirs is rounding noise, which Adam scales to full-size steps
    key_bias = [k for k in common if k.endswith("attention.self.key.bias")]
    rest = {k: v for k, v in delta.items() if k not in key_bias}
    floor = {k: float((w_ours[k] - w_floor[k]).abs().max()) for k in common}
    loss_diff = [abs(a - b) for a, b in zip(ours_losses, theirs["losses"])]
    grads = _key_bias_gradients(backbone, data, order[0], resolved["objective"], params["score_range"])
    return {
        "cell": "/".join(case["cell"]), "official_release": case["official"], "steps": steps, "batch": pool,
        "settings": {"learning_rate": cfg.learning_rate, "warmup_steps_cell": cfg.warmup_steps, "warmup_steps_run": warmup,
                     "max_length": max_length,
                     "weight_decay": cfg.weight_decay, "max_grad_norm": cfg.max_grad_norm, "precision": "fp32",
                     "dropout": 0.0, "backbone": str(backbone), "loss": case["loss"], "fit": case["collator"],
                     "ours": "aoe.training.train.train (length_buckets 1, fused AdamW, foreach clipping)",
                     "official": "AnglE.fit, HF Trainer with a SequentialSampler (the engine's batch order)"},
        "official_training_args": theirs["training_args"], "official_versions": theirs["versions"],
        "losses": {"ours": ours_losses, "official": theirs["losses"], "max_abs_diff": max(loss_diff)},
        "official_rows_per_step": theirs["rows_per_step"],
        "parameters_compared": len(common), "parameters_only_one_side": sorted(set(w_ours) ^ set(w_off)),
        "max_abs_weight_diff": delta[worst], "max_abs_weight_diff_param": worst,
        "max_abs_weight_change_ours": max(moved.values()),
        "max_abs_weight_diff_without_key_biases": max(rest.values()),
        "key_bias_max_abs_diff": max(delta[k] for k in key_bias), "key_bias_max_abs_change_ours": max(moved[k] for k in key_bias),
        "first_batch_gradients": grads,
        "noise_floor": {"ours_vs": "ours with length_buckets 2 (equal in exact arithmetic)",
                        "max_abs_weight_diff_without_key_biases": max(v for k, v in floor.items() if k not in key_bias),
                        "key_bias_max_abs_diff": max(floor[k] for k in key_bias)},
        "weight_diff_per_param_top5": dict(sorted(delta.items(), key=lambda kv: -kv[1])[:5]),
        "seconds": round(time.perf_counter() - start, 1),
    }


def worker_steps(payload_path: str, out_dir: str) -> None:
    """Run in angle-emb's venv: AnglE(...).fit(...) on the payload's rows, in order; save the weights and per-step losses."""
    import inspect

    import torch
    import transformers
    from torch.utils.data import SequentialSampler

    import angle_emb
    import angle_emb.angle as A
    import datasets

    p = torch.load(payload_path, weights_only=False)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    losses, rows_per_step, info = [], [], {}

    class InOrderTrainer(A.AngleTrainer):
        """The release's trainer with the given row order (a SequentialSampler) and each step's loss recorded."""

        def _get_train_sampler(self, *args, **kwargs):
            return SequentialSampler(self.train_dataset)

        def compute_loss(self, model, inputs, return_outputs=False):
            rows_per_step.append(int(inputs["input_ids"].shape[0]))
            loss = super().compute_loss(model, inputs, return_outputs)
            losses.append(float(loss[0] if return_outputs else loss))
            if not info:
                info.update({k: str(getattr(self.args, k)) for k in (
                    "optim", "lr_scheduler_type", "learning_rate", "warmup_steps", "max_steps", "weight_decay",
                    "max_grad_norm", "adam_beta1", "adam_beta2", "adam_epsilon", "per_device_train_batch_size",
                    "gradient_accumulation_steps", "fp16", "seed")})
                info["optimizer_class"] = type(self.optimizer).__name__
            return loss

    A.AngleTrainer = InOrderTrainer  # fit() looks the class up in its module when called
    angle = A.AnglE(p["backbone"], max_length=p["max_length"], pooling_strategy="cls", train_mode=True)
    data_tok = A.AngleDataTokenizer(angle.tokenizer, p["max_length"])
    features, _ = _official_features(data_tok, p["rows"])
    ds = datasets.Dataset.from_list(features)
    fit_kwargs = {k: v for k, v in p["fit"].items() if k in inspect.signature(angle.fit).parameters}
    angle.fit(train_ds=ds, batch_size=p["batch_size"], output_dir=str(out / "fit"), epochs=1,
              learning_rate=p["learning_rate"], warmup_steps=p["warmup_steps"], logging_steps=1, save_strategy="no",
              loss_kwargs=dict(p["loss"]), argument_kwargs={"max_steps": p["steps"], "seed": p["seed"], "report_to": "none"},
              **fit_kwargs)
    model = getattr(angle.backbone, "_orig_mod", angle.backbone)  # fit() wraps it in torch.compile after training setup
    torch.save(model.state_dict(), out / "state_dict.pt")
    versions = {"angle_emb": angle_emb.__version__, "torch": torch.__version__, "transformers": transformers.__version__}
    (out / "result.json").write_text(json.dumps({"losses": losses, "rows_per_step": rows_per_step,
                                                 "training_args": info, "versions": versions}))


def main_steps(names: list[str], args) -> None:
    cases = {name: step_case(name, args.steps, args.mirror) for name in names}
    for c in cases.values():
        c["pass_all_parameters"] = c["max_abs_weight_diff"] <= STEP_TOLERANCE
        # the key biases' updates follow rounding noise (their exact gradient is 0, first_batch_gradients)
        c["pass"] = c["max_abs_weight_diff_without_key_biases"] <= STEP_TOLERANCE
    record = {"command": "python bench/parity/official_parity.py " + " ".join(sys.argv[1:]), "tolerance": STEP_TOLERANCE,
              "criterion": "max |w_ours - w_official| after the steps, fp32 on CPU, over every parameter but the attention "
                           "key biases (their exact gradient is 0: their updates follow rounding noise; given beside)",
              "pass": all(c["pass"] for c in cases.values()), "cases": cases}
    path = C.write_json("official_parity_steps", record, args.out or str(RESULT_STEPS))
    rows = [[name, c["official_release"], c["steps"], c["batch"], f"{c['losses']['max_abs_diff']:.1e}",
             f"{c['max_abs_weight_diff_without_key_biases']:.1e}", f"{c['key_bias_max_abs_diff']:.1e}",
             f"{c['first_batch_gradients']['float32']['key_bias_max_abs_grad']:.0e}",
             f"{c['first_batch_gradients']['float32']['query_bias_max_abs_grad']:.0e}",
             f"{c['noise_floor']['max_abs_weight_diff_without_key_biases']:.1e} / {c['noise_floor']['key_bias_max_abs_diff']:.1e}",
             f"{c['max_abs_weight_change_ours']:.1e}", "yes" if c["pass"] else "NO"] for name, c in cases.items()]
    C.print_table(f"Step parity with the official trainers (MiniLM-L6 without dropout, fp32, {args.steps} steps; tolerance "
                  f"{STEP_TOLERANCE:g})", ["case", "release", "steps", "batch", "max |loss diff|", "max |w diff| (no key bias)",
                                          "key biases", "key-bias grad", "query-bias grad",
                                          "ours vs ours, 2 buckets (rest / key biases)", "max |w change|", "pass"], rows)
    print(f"wrote {path}")
    if not record["pass"]:
        raise SystemExit(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=None, help=f"comma-separated, from {', '.join(CASES)} (default: all; with --steps "
                    f"{', '.join(STEP_CASES)})")
    ap.add_argument("--batches", type=int, default=3, help="batches of the engine's epoch order per case (plus file-order and crafted)")
    ap.add_argument("--mirror", default=C.default_mirror())
    ap.add_argument("--out", default=None, help=f"JSON path (default {RESULT.relative_to(C.REPO)}, with --steps "
                    f"{RESULT_STEPS.relative_to(C.REPO)})")
    ap.add_argument("--steps", type=int, default=0,
                    help="step parity instead: N optimizer steps of both trainers on the cases in STEP_CASES, max |weight difference|")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--steps-worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker_official(*args.worker)
        return
    if args.steps_worker:
        worker_steps(*args.steps_worker)
        return

    import torch

    torch.set_num_threads(2)
    names = [c for c in args.cases.split(",") if c] if args.cases else list(STEP_CASES if args.steps else CASES)
    unknown = set(names) - set(CASES)
    if unknown:
        raise SystemExit(f"unknown case(s) {sorted(unknown)}; known: {list(CASES)}")
    if args.steps:
        main_steps(names, args)
        return
    cases = {name: run_case(name, args.batches, args.mirror) for name in names}
    venvs = {v: {k: r[k] for k in ("requirements", "built_with", "build_seconds", "console_scripts_dropped", "freeze")}
             for v in sorted({CASES[n]["official"] for n in names}) for r in [C.angle_venv_record(v)]}
    record = {"command": "python bench/parity/official_parity.py " + " ".join(sys.argv[1:]), "tolerance": TOLERANCE,
              "criterion": "|ours - official| <= tolerance per component and total, float64 embeddings on both sides; "
                           "the same examples kept and the same labels",
              "pass": all(c["pass"] for c in cases.values()), "cases": cases, "venvs": venvs}
    path = C.write_json("official_parity", record, args.out or str(RESULT))
    rows = []
    for name, c in cases.items():
        d = c["max_abs_diff"]
        judged = list(c["batches"].values())
        dups = sum(b["ours"]["identical_text_pairs"] for b in judged)
        extra = sum(b["official"]["ibn_extra_targets"] for b in judged)
        dropped = sum(len(b["official"]["dropped"]) for b in judged)
        rows.append([name, c["official"]["release"], len(judged), c["ours"]["pool"],
                     *["-" if d[k] is None else f"{d[k]:.1e}" for k in COMPONENTS], f"{d['total']:.1e}", dups, extra, dropped,
                     "yes" if c["pass"] else "NO"])
    C.print_table(f"Loss parity with the official releases (max |ours - official| over the batches, float64; tolerance {TOLERANCE:g})",
                  ["case", "release", "batches", "pool", "cosine", "in-batch", "angle", "total", "identical pairs",
                   "extra ibn targets", "dropped", "pass"], rows)
    for name, c in cases.items():
        b = c["batches"].get("case-variants")
        if b:
            print(f"  {name} case-variants: identical pairs by token ids {b['ours']['identical_text_pairs']}, by string "
                  f"{b['ours']['identical_string_pairs']}; max |ours - official| {max(b['abs_diff'].values()):.1e}")
    print(f"wrote {path}")
    if not record["pass"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
