"""Batched, seeded generation with a local causal LM, cached per text.

Determinism. Sampling draws its noise per output, not per batch: each (prompt, text)
gets its own seed, derived from its cache key, and every generation step adds Gumbel
noise drawn from that seed to the (temperature, top-k, top-p processed) scores; the
argmax is then a sample from the processed distribution (the Gumbel-max trick). A
text's output therefore does not depend on which texts share its batch, on the batch
size or on which texts were already cached -- which is what makes a per-text cache
and a partial rerun give the same outputs as one full run (up to float rounding of
left-padded attention, which only matters at exact ties).

Cache. One JSONL file per generator identity under ``cache_dir``, a record per
output, keyed by sha256 of (cache version, the model's identity = its backbone.json,
the full prompt, the settings that shape the output distribution, the text). Batch
size and device are not part of the key (see above). Records are appended after each
batch, so a killed job keeps what it generated; when every output is cached the model
is not even loaded.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

from aoe.llm_supervised import KINDS
from aoe.llm_supervised.prompts import completed_items, render_prompt
from aoe.util.fsutil import atomic_file

__all__ = [
    "CACHE_VERSION",
    "GenerationSettings",
    "GenerationCache",
    "model_identity",
    "load_generator",
    "generate_all",
]

# bump when a change of this module changes what a cached key would generate
CACHE_VERSION = 2
_LIMIT_SLACK = 8


@dataclass(frozen=True)
class GenerationSettings:
    """How completions are drawn (config ``llm_supervised.generation``).

    do_sample false: greedy decoding. A completion gets at most ``length_ratio`` x its
    text's token count + 8 new tokens (the 8: a leading label or list number, and the line
    end), and never more than ``max_new_tokens``; 0 leaves only ``max_new_tokens``. ``dtype``
    auto: the checkpoint's dtype on a GPU, float32 on the CPU (half-precision matmuls are slow
    or missing there).
    """

    def token_limit(self, text_tokens: int) -> int:
        if self.length_ratio <= 0:
            return self.max_new_tokens
        return min(self.max_new_tokens, math.ceil(self.length_ratio * text_tokens) + _LIMIT_SLACK)

    seed: int = 42
    do_sample: bool = True
    temperature: float = 0.7
    top_k: int = 0
    top_p: float = 0.9
    repetition_penalty: float = 1.0
    max_new_tokens: int = 64
    length_ratio: float = 2.0
    batch_size: int = 16
    dtype: str = "auto"
    chat_template: bool = False

    def key_fields(self, resolved_dtype: str) -> dict:
        """What shapes the output distribution (the cache key): everything but the batch size."""
        d = asdict(self)
        d.pop("batch_size")
        d["dtype"] = resolved_dtype
        if not self.do_sample:  # greedy: the sampling knobs and the seed change nothing
            for k in ("seed", "temperature", "top_k", "top_p"):
                d.pop(k)
        return d


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def model_identity(model_dir: str | os.PathLike) -> dict:
    """The generator's identity: the backbone.json fetch_backbone wrote (source, revision or package version, tokenizer sha256)."""
    path = Path(model_dir) / "backbone.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: missing; a generator folder comes from the fetch_backbone rule, which records what the model is"
        )
    return json.loads(path.read_text())


def _checkpoint_dtype(model_dir: Path) -> str | None:
    try:
        cfg = json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError):
        return None
    text_cfg = cfg.get("text_config") or {}
    return cfg.get("torch_dtype") or cfg.get("dtype") or text_cfg.get("torch_dtype") or text_cfg.get("dtype")


def resolve_dtype(setting: str, model_dir: Path, device: str) -> str:
    if setting != "auto":
        return setting
    if device == "cpu":
        return "float32"
    return _checkpoint_dtype(model_dir) or "float32"


class GenerationCache:
    """Append-only JSONL of generated outputs; ``path`` None keeps nothing between runs."""

    def __init__(self, path: str | os.PathLike | None):
        self.path = Path(path) if path else None
        self.records: dict[str, dict] = {}
        self.skipped_lines = 0  # a killed job's half-written last line
        if self.path and self.path.is_file():
            with self.path.open(encoding="utf-8") as fh:
                for line in fh:
                    try:
                        rec = json.loads(line)
                        self.records[rec["key"]] = rec
                    except (ValueError, KeyError, TypeError):
                        self.skipped_lines += 1

    def get(self, key: str) -> dict | None:
        return self.records.get(key)

    def add(self, records: Iterable[dict]) -> None:
        records = list(records)
        for rec in records:
            self.records[rec["key"]] = rec
        if self.path is None or not records:
            return
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.is_file() and self.path.stat().st_size:
                with self.path.open("rb") as fh:
                    fh.seek(-1, os.SEEK_END)
                    if fh.read(1) != b"\n":  # a killed job's torn last line must not swallow the next record
                        text = "\n" + text
            # one write per batch, flushed to disk: a killed job loses at most the batch in flight
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as e:
            # a cache another group shares read-only, or a read-only mount: the job's own output holds what it
            # generates, so generation goes on (uncached) rather than fail at its first batch; a full disk still fails
            if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            print(f"generation cache {self.path} is not writable ({e.strerror}); generating without storing the outputs "
                  "(set llm_supervised.cache to a file you can write to keep them)", file=sys.stderr, flush=True)
            self.path = None


def _remote_code(model_dir: Path) -> dict:
    """trust_remote_code for a generator whose backbone entry set it (recorded in backbone.json)."""
    try:
        trusted = bool(json.loads((model_dir / "backbone.json").read_text()).get("trust_remote_code"))
    except (OSError, ValueError):
        trusted = False
    return {"trust_remote_code": True} if trusted else {}


def _auto_map(model_dir: Path) -> dict:
    """config.json's auto_map: the auto classes a model's remote code registers ({} for none, or no config.json)."""
    try:
        return json.loads((model_dir / "config.json").read_text()).get("auto_map") or {}
    except (OSError, ValueError):
        return {}


def _check_remote_code(model_dir: Path, identity: dict) -> None:
    """A model whose classes are remote code (config.json auto_map) runs only when its backbone says so."""
    auto_map = _auto_map(model_dir)
    if auto_map and not _remote_code(model_dir):
        name = identity.get("name", model_dir.name)
        raise ValueError(
            f"{model_dir}: its classes are remote code (config.json auto_map: {sorted(auto_map)}), which runs only when "
            f"trusted: set backbones.{name}.trust_remote_code: true (and extra_files: ['*.py', ...]) and fetch it again"
        )


def _transformers_at_least(version: str) -> bool:
    import transformers
    from packaging.version import Version

    return Version(transformers.__version__) >= Version(version)


def load_tokenizer(model_dir: str | os.PathLike):
    from transformers import AutoTokenizer

    model_dir = Path(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, **_gguf_kwargs(model_dir), **_remote_code(model_dir))
    tokenizer.padding_side = "left"  # generation appends on the right: prompts must end at the same column
    if tokenizer.pad_token is None:  # LLaMA-2 has none; padded positions are masked out anyway
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _gguf_kwargs(model_dir: Path) -> dict:
    """A folder holding only a GGUF file (no config.json) loads through transformers' GGUF reader."""
    if (model_dir / "config.json").is_file():
        return {}
    ggufs = sorted(model_dir.glob("*.gguf"))
    if len(ggufs) != 1:
        raise FileNotFoundError(f"{model_dir}: no config.json and {len(ggufs)} .gguf files; not a model folder")
    return {"gguf_file": ggufs[0].name}


def generator_class(model_dir: str | os.PathLike) -> str:
    """The auto class a generator loads with: AutoModelForCausalLM, unless the model's remote code
    registers its generating class only as AutoModel (ChatGLM-6B's ChatGLMForConditionalGeneration)."""
    model_dir = Path(model_dir)
    if _remote_code(model_dir):
        auto_map = _auto_map(model_dir)
        if "AutoModelForCausalLM" not in auto_map and "AutoModel" in auto_map:
            return "AutoModel"
    return "AutoModelForCausalLM"


def load_generator(model_dir: str | os.PathLike, dtype: str, device: str):
    import torch
    import transformers

    model_dir = Path(model_dir)
    auto = getattr(transformers, generator_class(model_dir))
    # transformers 4.56 renamed torch_dtype to dtype; a remote-code generator may run under an older one
    dtype_kw = "dtype" if _transformers_at_least("4.56") else "torch_dtype"
    model = auto.from_pretrained(
        model_dir, **{dtype_kw: getattr(torch, dtype)}, **_gguf_kwargs(model_dir), **_remote_code(model_dir)
    )
    if not model.can_generate():
        raise ValueError(f"{model_dir}: {type(model).__name__} (loaded with {auto.__name__}) cannot generate; not a generator")
    return model.to(device).eval()


def _row_seed(key: str) -> int:
    return int(key[:15], 16)


class _RowGumbel:
    """Logits processor: Gumbel noise from each row's own seed and the step, so the argmax samples per row."""

    def __init__(self, row_seeds: list[int], prompt_len: int):
        self.row_seeds, self.prompt_len = row_seeds, prompt_len

    def __call__(self, input_ids, scores):
        import torch

        step = input_ids.shape[1] - self.prompt_len
        out = scores.clone()
        allowed = torch.isfinite(scores).cpu()
        for b, seed in enumerate(self.row_seeds):
            g = torch.Generator().manual_seed((seed * 1_000_003 + step) % (2**63 - 1))
            # one uniform per vocabulary entry, always the same draw whatever top-k/top-p left; the
            # logarithms only where a token can still win (top-p leaves a handful of 262k)
            idx = allowed[b].nonzero().squeeze(1)
            u = torch.rand(scores.shape[1], generator=g, dtype=torch.float64)[idx].clamp_(min=1e-300)
            out[b, idx.to(scores.device)] += (-torch.log(-torch.log(u))).to(device=scores.device, dtype=scores.dtype)
        return out


class _RowsDone:
    """Stopping criterion: a row is done once it holds ``size`` finished sentences (a base model
    goes on otherwise) or reaches its own token limit (so its output does not depend on its batch).

    transformers before 4.39 stops a batch only as a whole (one bool): there the batch runs until
    every row is done, and :func:`_first_done` cuts each row where it would have stopped."""

    def __init__(self, tokenizer, prompt_len: int, size: int, limits: list[int]):
        self.tokenizer, self.prompt_len, self.size, self.limits = tokenizer, prompt_len, size, limits
        self.per_row = _transformers_at_least("4.39")

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        new = input_ids.shape[1] - self.prompt_len
        texts = self.tokenizer.batch_decode(input_ids[:, self.prompt_len :], skip_special_tokens=True)
        done = [new >= limit or completed_items(t, self.size) for t, limit in zip(texts, self.limits)]
        if not self.per_row:
            return all(done)
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


def _first_done(tokenizer, tokens: list[int], size: int) -> int | None:
    """The length of the shortest prefix of ``tokens`` that holds ``size`` finished sentences: where
    :class:`_RowsDone` stops the row (None: it never does)."""
    for n in range(1, len(tokens) + 1):
        if completed_items(tokenizer.decode(tokens[:n], skip_special_tokens=True), size):
            return n
    return None


def _eos_ids(model, tokenizer) -> list[int]:
    ids = model.generation_config.eos_token_id
    ids = [ids] if isinstance(ids, int) else list(ids or [])
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    return ids


def _generation_config(model, tokenizer, settings: GenerationSettings, max_new_tokens: int):
    """Every value that selects a logits processor is set here, so the checkpoint's own
    generation_config.json (which fills unset values) cannot change the decoding."""
    from transformers import GenerationConfig

    return GenerationConfig(
        do_sample=False,  # sampling is the argmax over Gumbel-perturbed scores (_RowGumbel)
        num_beams=1,
        num_return_sequences=1,
        max_new_tokens=max_new_tokens,
        min_new_tokens=0,
        repetition_penalty=settings.repetition_penalty,
        no_repeat_ngram_size=0,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=_eos_ids(model, tokenizer),
    )


def _processors(settings: GenerationSettings, row_seeds: list[int], prompt_len: int):
    from transformers import LogitsProcessorList
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    procs = LogitsProcessorList()
    if settings.do_sample:
        if settings.temperature != 1.0:
            procs.append(TemperatureLogitsWarper(settings.temperature))
        if settings.top_k > 0:
            procs.append(TopKLogitsWarper(settings.top_k))
        if settings.top_p < 1.0:
            procs.append(TopPLogitsWarper(settings.top_p))
        procs.append(_RowGumbel(row_seeds, prompt_len))
    return procs


def _generate_batch(
    model, tokenizer, prompts: list[str], keys: list[str], limits: list[int], settings: GenerationSettings, size: int,
    add_special_tokens: bool,
) -> list[dict]:
    import torch
    from transformers import StoppingCriteriaList

    enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=add_special_tokens).to(model.device)
    # a decoder has no segments; older transformers refuse the fast tokenizers' token_type_ids in generate
    enc.pop("token_type_ids", None)
    prompt_len = enc["input_ids"].shape[1]
    with torch.inference_mode():
        out = model.generate(
            **enc,
            generation_config=_generation_config(model, tokenizer, settings, max(limits)),
            logits_processor=_processors(settings, [_row_seed(k) for k in keys], prompt_len),
            stopping_criteria=StoppingCriteriaList([_RowsDone(tokenizer, prompt_len, size, limits)]),
        )
    eos = set(_eos_ids(model, tokenizer))
    results = []
    for row, limit in zip(out[:, prompt_len:].tolist(), limits):
        row = row[:limit]  # past its limit a row holds padding (the EOS id, for tokenizers without a pad token)
        cut = next((i for i, t in enumerate(row) if t in eos), None)
        tokens = row if cut is None else row[:cut]
        stop = _first_done(tokenizer, tokens, size)
        if stop is not None:  # the tokens a batch mate kept generating after this row was done
            tokens = tokens[:stop]
        completion = tokenizer.decode(tokens, skip_special_tokens=True)
        if stop is not None:
            finish = "stop"
        elif cut is not None:
            finish = "eos"
        else:
            finish = "length"
        results.append({"completion": completion, "finish": finish, "new_tokens": len(tokens)})
    return results


def generate_all(
    texts: list[str],
    model_dir: str | os.PathLike,
    templates: dict[str, str],
    size: int,
    settings: GenerationSettings,
    cache_dir: str | os.PathLike | None,
    device: str | None = None,
    progress: bool = True,
) -> tuple[list[dict], dict]:
    """One record per (text, kind) in text order (kinds: :data:`aoe.llm_supervised.KINDS`), and a summary.

    A record: text, kind, prompt, completion, finish (``stop``: the sentences ended; ``eos``;
    ``length``: the token limit), new_tokens, limit, key, cached (true: read from the cache).
    """
    import torch

    model_dir = Path(model_dir)
    missing = [k for k in KINDS if k not in templates]
    if missing:
        raise ValueError(f"llm_supervised.prompts: missing the {missing} template(s)")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    identity = model_identity(model_dir)
    _check_remote_code(model_dir, identity)
    dtype = resolve_dtype(settings.dtype, model_dir, device)
    key_settings = {**settings.key_fields(dtype), "size": size}
    tokenizer = load_tokenizer(model_dir)
    if settings.chat_template and not tokenizer.chat_template:
        raise ValueError(f"{model_dir}: llm_supervised.generation.chat_template is true, but the tokenizer has no chat template")

    def full_prompt(template: str, text: str) -> str:
        prompt = render_prompt(template, text, size)
        if settings.chat_template:
            prompt = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
        return prompt

    text_tokens = tokenizer(list(texts), add_special_tokens=False)["input_ids"] if texts else []
    requests = []
    for text, ids in zip(texts, text_tokens):
        for kind in KINDS:
            prompt = full_prompt(templates[kind], text)
            key = _digest({"v": CACHE_VERSION, "model": identity, "prompt": prompt, "settings": key_settings, "text": text})
            requests.append({"text": text, "kind": kind, "prompt": prompt, "key": key, "limit": settings.token_limit(len(ids))})
    cache = GenerationCache(Path(cache_dir) / f"{_digest(identity)[:16]}.jsonl" if cache_dir else None)
    pending = [r for r in requests if cache.get(r["key"]) is None]
    summary = {
        "device": device,
        "dtype": dtype,
        "requests": len(requests),
        "cached": len(requests) - len(pending),
        "generated": len(pending),
        "cache_file": str(cache.path) if cache.path else None,
        "cache_unreadable_lines": cache.skipped_lines,
        "key_settings": key_settings,
        "model_load_seconds": None,
        "generation_seconds": 0.0,
        "new_tokens": 0,
    }
    if pending:
        t0 = time.perf_counter()
        model = load_generator(model_dir, dtype, device)
        summary["model_load_seconds"] = round(time.perf_counter() - t0, 2)
        summary["model_class"] = f"{type(model).__module__}.{type(model).__name__}"
        # max_new_tokens there is the cap; each batch asks for its rows' largest limit
        summary["generation_config"] = _generation_config(model, tokenizer, settings, settings.max_new_tokens).to_diff_dict()
        summary["model_generation_defaults"] = model.generation_config.to_diff_dict()
        # longest prompts first, batched by length: less padding; outputs do not depend on the grouping
        lengths = [len(ids) for ids in tokenizer([r["prompt"] for r in pending], add_special_tokens=not settings.chat_template)["input_ids"]]
        order = sorted(range(len(pending)), key=lambda i: (-lengths[i], i))
        from aoe.util.progress import progress as progress_bar

        # a log line per interval with an ETA (aoe.util.progress), counted in prompts
        bar = progress_bar(total=len(pending), desc="generate", unit="prompt", disable=not progress)
        t0 = time.perf_counter()
        for start in range(0, len(order), settings.batch_size):
            batch = [pending[i] for i in order[start : start + settings.batch_size]]
            tb = time.perf_counter()
            outs = _generate_batch(
                model, tokenizer, [r["prompt"] for r in batch], [r["key"] for r in batch], [r["limit"] for r in batch],
                settings, size,
                add_special_tokens=not settings.chat_template,
            )
            seconds = time.perf_counter() - tb
            cache.add(
                {**r, **o, "model_digest": _digest(identity)[:16], "device": device, "batch_seconds": round(seconds, 3)}
                for r, o in zip(batch, outs)
            )
            summary["new_tokens"] += sum(o["new_tokens"] for o in outs)
            bar.set_postfix(new_tokens=summary["new_tokens"])
            bar.update(len(batch))
        bar.close()
        summary["generation_seconds"] = round(time.perf_counter() - t0, 2)
    pending_keys = {r["key"] for r in pending}
    records = []
    for r in requests:
        rec = cache.get(r["key"])
        records.append(
            {
                "text": r["text"],
                "kind": r["kind"],
                "prompt": r["prompt"],
                "completion": rec["completion"],
                "finish": rec["finish"],
                "new_tokens": rec["new_tokens"],
                "limit": r["limit"],
                "key": r["key"],
                "cached": r["key"] not in pending_keys,
            }
        )
    return records, summary


def run_generation(
    texts_path: str | os.PathLike,
    model_dir: str | os.PathLike,
    generator: str,
    templates: dict[str, str],
    size: int,
    settings: dict,
    cache_dir: str | os.PathLike | None,
    out_records: str | os.PathLike,
    out_summary: str | os.PathLike,
    threads: int | None = None,
) -> dict:
    """Rule llm_generate: every completion as JSONL (``out_records``) and what produced them (``out_summary``)."""
    import torch

    from aoe.llm_supervised.pairs import read_texts
    from aoe.util.jsonio import write_json_atomic
    from aoe.util.provenance import library_versions

    if threads:
        torch.set_num_threads(int(threads))
    gen_settings = GenerationSettings(**settings)
    records, summary = generate_all(read_texts(texts_path), model_dir, templates, size, gen_settings, cache_dir)
    with atomic_file(out_records) as fh:
        fh.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    result = {
        "generator": generator,
        "identity": model_identity(model_dir),
        "prompts": dict(templates),
        "size": size,
        "settings": asdict(gen_settings),
        **summary,
        "new_tokens_per_second": round(summary["new_tokens"] / summary["generation_seconds"], 2)
        if summary["generation_seconds"]
        else None,
        "versions": library_versions(),
    }
    write_json_atomic(result, out_summary)
    return result
