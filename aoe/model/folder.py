"""A model folder read from its files alone, before torch or a model loads: whether it is an adapter,
its ``aoe_config.json`` record and base model, its text config, and how many tokens it takes.

The encoder, the sentence-transformers files, the token cache and ``aoe embed`` all ask these
questions of a folder; they import the answers from here, downward.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["InputError", "REFETCH", "is_adapter_dir", "aoe_record", "base_model_dir", "model_text_config",
           "MAX_LENGTH_CAP", "default_max_length", "read_json_object", "position_limit"]


class InputError(ValueError):
    """A file, folder or option given on the command line that cannot be used; the message names it and the fix."""


REFETCH = "copy or download the model again, or point MODEL_DIR at a complete model folder"


def is_adapter_dir(model_dir: str | Path) -> bool:
    """A LoRA/QLoRA training output: a peft adapter over a base model folder."""
    return (Path(model_dir) / "adapter_config.json").is_file()


def aoe_record(model_dir: Path) -> dict | None:
    path = model_dir / "aoe_config.json"
    return json.loads(path.read_text()) if path.is_file() else None


def base_model_dir(model_dir: Path, record: dict | None) -> Path:
    """The folder holding the transformer's config.json: the model folder, or an adapter's recorded base."""
    if not is_adapter_dir(model_dir):
        return model_dir
    if record is None or "base_model" not in record:
        raise ValueError(f"{model_dir}: a LoRA adapter without aoe_config.json naming its base_model")
    base = (model_dir / record["base_model"]).resolve()
    if not (base / "config.json").is_file():
        raise FileNotFoundError(f"{model_dir}: its base model folder {base} (aoe_config.json base_model) is missing")
    return base


def model_text_config(base_dir: Path):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(base_dir)
    return config.get_text_config() if hasattr(config, "get_text_config") else config

# The evaluation protocol embeds untruncated texts up to 512 tokens (config.yaml evaluation.sts.max_length)
MAX_LENGTH_CAP = 512


def default_max_length(model_dir: str | os.PathLike) -> int:
    """Truncation length for a folder: the model's maximum (max_position_embeddings), at most 512 tokens."""
    model_dir = Path(model_dir)
    config = model_text_config(base_model_dir(model_dir, aoe_record(model_dir)))
    positions = getattr(config, "max_position_embeddings", None)
    return min(MAX_LENGTH_CAP, positions) if positions and positions > 0 else MAX_LENGTH_CAP


def read_json_object(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc}); check its permissions") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason}); {REFETCH}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg}); {REFETCH}") from exc
    if not isinstance(value, dict):
        raise InputError(f"{path}: not a JSON object (a {type(value).__name__}); {REFETCH}")
    return value


def position_limit(model_dir: Path) -> tuple[int, str] | None:
    """The most tokens the model takes per text, and what says so; None where nothing does.

    config.json's max_position_embeddings (the base's, for an adapter), lowered by the
    tokenizer's model_max_length where that is smaller: RoBERTa has 514 positions for 512
    tokens. A longer input fails inside the model ("The expanded size of the tensor ...").
    """
    # the same config reading as default_max_length, so the limit and the default agree
    config = model_text_config(base_model_dir(model_dir, aoe_record(model_dir)))
    positions = getattr(config, "max_position_embeddings", None)
    limit = (positions, f"max_position_embeddings {positions} in its config.json") if positions and positions > 0 else None
    tokenizer_config = model_dir / "tokenizer_config.json"
    declared = read_json_object(tokenizer_config).get("model_max_length") if tokenizer_config.is_file() else None
    # transformers writes 1e30 (VERY_LARGE_INTEGER) for "no limit"
    if isinstance(declared, int) and 0 < declared < 10**9 and (limit is None or declared < limit[0]):
        limit = (declared, f"model_max_length {declared} in its tokenizer_config.json")
    return limit
