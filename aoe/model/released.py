"""Published checkpoints (AoE Appendix E, Table 8; the official repository's NLI README) as model folders.

A released checkpoint is evaluated exactly as a model this workflow trained: rule
``fetch_released`` lays it out under ``results/released/<key>`` with an
``aoe_config.json`` (pooling, prompt, and for a LoRA adapter its base folder and the
base's evaluation dtype), so :class:`aoe.model.encoder.Encoder` and every evaluation read it
unchanged. Comparing its scores with the published ones calibrates the evaluation
separately from the training: a gap there is ours, not the training's.

The files come from the Hugging Face hub at the configured revision, resolved to a
commit first (every file from one commit, the commit recorded), or from ``path``: a
local copy laid out as the hub serves the repository (what ``huggingface-cli download
<id> --revision <rev> --local-dir DIR`` writes), for clusters whose nodes cannot reach
the hub. A LoRA adapter's base is fetched the same way into ``base/``.
"""

from __future__ import annotations

import fnmatch
import json
import shutil
from pathlib import Path

from aoe.config.hparams import schema_default
from aoe.data.io import sha256_file
from aoe.model.backbones import TOKENIZER_FILES, BackboneError, materialize_backbone, tokenizer_fingerprint
from aoe.util.fsutil import atomic_dir

__all__ = ["ReleasedError", "RELEASED_FILE_PATTERNS", "released_files", "materialize_released", "causal_lm_adapter_to_base_model"]

# a full model's weights and config, an adapter's, and the tokenizer; the hub's older repositories
# hold pickled .bin weights only (taken only where no .safetensors twin exists)
RELEASED_FILE_PATTERNS = (
    "config.json",
    "model*.safetensors",
    "model.safetensors.index.json",
    "pytorch_model*.bin",
    "pytorch_model.bin.index.json",
    "adapter_config.json",
    "adapter_model.safetensors",
    "adapter_model.bin",
    *TOKENIZER_FILES,
)
BASE_DIR = "base"


class ReleasedError(ValueError):
    """A released checkpoint that cannot be fetched or laid out, named with its config key and the fix."""


def released_files(names: list[str]) -> list[str]:
    """The repository files to take: those of :data:`RELEASED_FILE_PATTERNS` at the top level,
    without a pickled .bin where the repository has the same weights as .safetensors."""
    top = [n for n in names if "/" not in n and any(fnmatch.fnmatch(n, p) for p in RELEASED_FILE_PATTERNS)]
    adapter_st = "adapter_model.safetensors" in top
    model_st = any(n.startswith("model") and n.endswith(".safetensors") for n in top)
    return sorted(
        n for n in top
        if not (n == "adapter_model.bin" and adapter_st) and not (n.startswith("pytorch_model") and model_st)
    )


def _from_hub(name: str, hf_id: str, revision: str, out: Path, setting: str) -> dict:
    from huggingface_hub import HfApi, hf_hub_download

    try:
        info = HfApi().repo_info(hf_id, revision=revision)
        commit = info.sha
        files = released_files([s.rfilename for s in info.siblings or []])
        for f in files:
            hf_hub_download(hf_id, f, revision=commit, local_dir=out)
    except Exception as exc:  # the hub's errors are many classes; all mean "cannot fetch"
        raise ReleasedError(
            f"released checkpoint {name!r}: cannot fetch {hf_id}@{revision} from the Hugging Face hub "
            f"({type(exc).__name__}: {exc}). Where the hub is unreachable, download it on a machine that reaches it "
            f"(huggingface-cli download {hf_id} --revision {revision} --local-dir DIR) and set {setting}: DIR"
        ) from exc
    shutil.rmtree(out / ".cache", ignore_errors=True)  # hub bookkeeping, not part of the model
    return {"source": "huggingface", "hf_id": hf_id, "revision": revision, "commit": commit}


def _from_path(name: str, path: str | Path, out: Path, setting: str, hf_id: str | None) -> dict:
    src = Path(path)
    if not src.is_dir():
        raise ReleasedError(f"released checkpoint {name!r}: {setting} {src} is not a folder")
    files = released_files([p.name for p in src.iterdir() if p.is_file()])
    for f in files:
        shutil.copy2(src / f, out / f)
    return {"source": "path", "from": str(src.resolve()), "copy_of": hf_id}


def materialize_released(name: str, spec: dict, out_dir: str | Path) -> dict:
    """Lay out checkpoint ``name`` (config ``released.checkpoints.<name>``) under ``out_dir``; return its record.

    The record (also in ``released.json`` and under ``released`` in ``aoe_config.json``)
    names the source, the commit or folder, and the sha256 of every file taken.
    """
    out_dir = Path(out_dir)
    where = f"released.checkpoints.{name}"
    with atomic_dir(out_dir) as tmp:
        if spec.get("path"):
            record = _from_path(name, spec["path"], tmp, f"{where}.path", spec.get("hf_id"))
        else:
            record = _from_hub(name, spec["hf_id"], spec.get("revision", schema_default("released", "checkpoints", "*", "revision")), tmp, f"{where}.path")
        if not (tmp / "config.json").is_file() and not (tmp / "adapter_config.json").is_file():
            raise ReleasedError(f"released checkpoint {name!r}: neither config.json nor adapter_config.json in {record.get('from') or record['hf_id']}")
        record["files"] = {p.name: sha256_file(p) for p in sorted(tmp.iterdir()) if p.is_file()}  # as published
        adapter = (tmp / "adapter_config.json").is_file()
        if adapter != bool(spec.get("adapter")):
            raise ReleasedError(
                f"{where}: the checkpoint {'is' if adapter else 'is not'} a LoRA adapter; set adapter: {str(adapter).lower()}"
                + (" and base (the model it was trained on)" if adapter else "")
            )
        config = {"pooling": spec["pooling"], "prompt": spec.get("prompt"), "train": {}}
        if adapter:
            record["base"] = _base(name, spec, tmp)
            record["adapter_conversion"] = causal_lm_adapter_to_base_model(tmp)
            config["base_model"] = BASE_DIR
            config["train"]["eval_base_dtype"] = spec.get("base_dtype")
            if not any((tmp / f).is_file() for f in TOKENIZER_FILES):
                # adapter repositories hold the adapter only; the tokenizer is the base's
                for f in TOKENIZER_FILES:
                    if (tmp / BASE_DIR / f).is_file():
                        shutil.copy2(tmp / BASE_DIR / f, tmp / f)
                record["tokenizer_from"] = BASE_DIR
        record.update({"name": name, "tokenizer_sha256": tokenizer_fingerprint(tmp)})
        config["released"] = record
        (tmp / "aoe_config.json").write_text(json.dumps(config, indent=2) + "\n")
        (tmp / "released.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


CAUSAL_PREFIX, BASE_PREFIX = "base_model.model.model.", "base_model.model."


def causal_lm_adapter_to_base_model(folder: Path) -> dict | None:
    """Rewrite a LoRA adapter trained over ``AutoModelForCausalLM`` as one over ``AutoModel`` (in place).

    The official code trains and evaluates LLMs as causal LMs and pools ``hidden_states[-1]``
    (angle-emb 0.1.1, angle_emb/angle.py:347, task_type CAUSAL_LM at l.476): the same tensor as
    the decoder's ``last_hidden_state``, which is what :class:`aoe.model.encoder.Encoder` pools. Only
    the adapter's key prefix differs (``base_model.model.model.`` vs ``base_model.model.``);
    adapters on the LM head change no hidden state and are dropped. Returns what was done
    (None: already an adapter over the decoder). Pickled weights are written as safetensors.
    """
    import torch
    from safetensors.torch import load_file, save_file

    st, pickled = folder / "adapter_model.safetensors", folder / "adapter_model.bin"
    weights = load_file(st) if st.is_file() else torch.load(pickled, map_location="cpu", weights_only=True)
    if not any(k.startswith(CAUSAL_PREFIX) for k in weights):
        return None
    renamed = {BASE_PREFIX + k[len(CAUSAL_PREFIX):]: v.contiguous() for k, v in weights.items() if k.startswith(CAUSAL_PREFIX)}
    dropped = sorted(k for k in weights if not k.startswith(CAUSAL_PREFIX))
    save_file(renamed, st)
    pickled.unlink(missing_ok=True)
    cfg_path = folder / "adapter_config.json"
    cfg = json.loads(cfg_path.read_text())
    before = {"task_type": cfg.get("task_type"), "target_modules": cfg.get("target_modules")}
    cfg["task_type"] = "FEATURE_EXTRACTION"
    if isinstance(cfg.get("target_modules"), list):
        cfg["target_modules"] = [m for m in cfg["target_modules"] if m != "lm_head"]
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")
    return {"from": "causal_lm", "renamed_tensors": len(renamed), "dropped_tensors": dropped, "adapter_config_before": before}


def _base(name: str, spec: dict, tmp: Path) -> dict:
    """Fetch an adapter's base into ``tmp/base``; it must be the model the adapter names."""
    base = spec["base"]
    named = json.loads((tmp / "adapter_config.json").read_text()).get("base_model_name_or_path")
    if base.get("hf_id") and named and base["hf_id"] != named:
        raise ReleasedError(
            f"released.checkpoints.{name}.base.hf_id is {base['hf_id']!r}, but the adapter was trained on {named!r} "
            "(its adapter_config.json base_model_name_or_path): evaluate it over that base"
        )
    setting = f"released.checkpoints.{name}.base.path"
    base_spec = {"path": base["path"]} if base.get("path") else {"hf_id": base["hf_id"], "revision": base.get("revision", schema_default("released", "checkpoints", "*", "base", "revision"))}
    try:
        record = materialize_backbone(f"{name} base", base_spec, tmp / BASE_DIR)
    except BackboneError as exc:
        hf_id, revision = base.get("hf_id"), base.get("revision", schema_default("released", "checkpoints", "*", "base", "revision"))
        hint = (f" Where the hub is unreachable, download it on a machine that reaches it (huggingface-cli download {hf_id} "
                f"--revision {revision} --local-dir DIR) and set {setting}: DIR") if not base.get("path") else ""
        raise ReleasedError(f"released checkpoint {name!r}: its base: {exc}.{hint}") from exc
    return {**record, "named_by_adapter": named}
