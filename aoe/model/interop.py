"""sentence-transformers files for our model folders: ``SentenceTransformer(str(model_dir))`` embeds as our Encoder.

:func:`write_sentence_transformers_files` adds ``modules.json``,
``sentence_bert_config.json``, ``config_sentence_transformers.json`` and the pooling
modules' subfolders to a trained model folder (``results/models/...``) or a backbone
folder (``results/backbones/...``, pooling given by the caller). The weights are not
touched or copied.

Two layouts, chosen from the folder:

* an encoder that sentence-transformers' own ``Transformer`` module reads exactly as
  :class:`aoe.model.encoder.Encoder` does (no prompt, no adapter, a tokenizer with a pad
  token that pads on the right, e.g. every BERT): built-in modules only, so the folder
  loads with a plain ``SentenceTransformer(str(model_dir))``, without this package;
* an LLM folder (a prompt template, a LoRA/QLoRA adapter, a tokenizer without pad
  token or padding on the left): the first module is :class:`AoETransformer`, which
  loads the model through :class:`aoe.model.encoder.Encoder` (adapter applied on the base
  recorded in ``aoe_config.json``, quantized as in training) and tokenizes through
  :func:`aoe.model.tokens.tokenize_texts` (the template wraps the text on both sides; a long
  text is cut, never the template). sentence-transformers >= 6.0 imports a module
  class from outside its own package only when asked to:
  ``SentenceTransformer(str(model_dir), trust_remote_code=True)``, with ``aoe``
  installed.

Pooling. ``cls``, ``avg``, ``max`` and ``last`` are sentence-transformers' ``Pooling``
modes (``cls``, ``mean``, ``max``, ``lasttoken``). The averaged poolings are built
from built-in modules as well, so they need no custom code: ``cls_avg`` and
``cls_last_avg`` are two concatenated ``Pooling`` modes followed by a bias-free
``Dense`` whose weight is ``[I/2, I/2]`` (identity activation); ``first_last_avg`` is a
``WeightedLayerPooling`` from layer 1 with weights 1 on the first and the last block
and 0 between (the hidden states of the first and the top layer, averaged), then the
``mean`` mode. Each multiplies by 0, 1 or 0.5, so the results equal
:func:`aoe.model.pooling.pool`'s to the last bit on the same hidden states. ``cls_mlp`` (BERT's
pooler, SimCSE's MLP) is the ``cls`` mode followed by a ``Dense`` with tanh holding the trained
pooler's weight and bias (the same arithmetic in another module: equal to rounding).

One difference is by design: for ``cls`` on a left-padded batch sentence-transformers
reads the first real token, :func:`aoe.model.pooling.pool` position 0 (a pad token for all but
the longest text). Both agree on right-padded batches, the only ones our ``cls``
models see.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from aoe.model.backbones import TOKENIZER_FILES
from aoe.model.encoder import pad_ids
from aoe.model.folder import MAX_LENGTH_CAP, aoe_record, base_model_dir, default_max_length, is_adapter_dir, model_text_config
from aoe.model.pooling import BATCH_DEPENDENT_POOLINGS, POOLINGS
from aoe.model.prompts import check_prompt
from aoe.model.tokens import tokenize_texts

try:
    from sentence_transformers.base.modules import InputModule
except ImportError as exc:  # pragma: no cover - sentence-transformers ships with mteb, a dependency
    raise ImportError("aoe.model.interop needs sentence-transformers >= 6 (pip install sentence-transformers)") from exc

__all__ = ["AoETransformer", "write_sentence_transformers_files", "ST_POOLING_MODES"]

# our pooling -> sentence-transformers Pooling mode(s); cls_avg / cls_last_avg are followed by the
# averaging Dense, first_last_avg is preceded by the first/last-layer WeightedLayerPooling
ST_POOLING_MODES: dict[str, str | tuple[str, str]] = {
    "cls": "cls",
    "avg": "mean",
    "max": "max",
    "last": "lasttoken",
    "cls_avg": ("cls", "mean"),
    "cls_last_avg": ("cls", "lasttoken"),
    "first_last_avg": "mean",
    "cls_mlp": "cls",
}

_CONFIG = "sentence_bert_config.json"

class AoETransformer(InputModule):
    """sentence-transformers input module over :class:`aoe.model.encoder.Encoder`'s model and tokenization.

    Outputs ``token_embeddings`` (and ``all_layer_embeddings`` when
    ``output_hidden_states``) for the pooling modules after it. ``prompt`` is the
    template around each text (``{text}`` placeholder), as in ``aoe_config.json``; a
    sentence-transformers prompt given to ``encode`` is prefixed to the text inside it.
    ``pooling`` is the pooling of the modules that follow: :class:`aoe.model.encoder.Encoder`
    checks it (and the prompt) against the folder's ``aoe_config.json``.
    """

    config_file_name = _CONFIG
    config_keys = ["max_seq_length", "prompt", "pooling", "output_hidden_states"]
    save_in_root = True

    def __init__(
        self,
        model_dir: str | os.PathLike,
        max_seq_length: int = MAX_LENGTH_CAP,
        prompt: str | None = None,
        pooling: str = "last",
        output_hidden_states: bool = False,
        device: str | None = None,
    ):
        super().__init__()
        from aoe.model.encoder import Encoder

        self.model_dir = Path(model_dir)
        self.max_seq_length = int(max_seq_length)
        self.pooling = pooling
        self.output_hidden_states = bool(output_hidden_states)
        # The Encoder is the one loader of our folders (adapter over its base, 4-bit as in training,
        # pad token); this module keeps its model and tokenizer.
        encoder = Encoder(self.model_dir, pooling=pooling, device=device, prompt=check_prompt(prompt))
        self.prompt = encoder.prompt
        self.model = encoder.model
        self.tokenizer = encoder.tokenizer

    @property
    def processor(self):
        return self.tokenizer

    def preprocess(self, inputs, prompt: str | None = None, **kwargs) -> dict[str, Any]:
        texts = list(inputs)
        bad = [type(t).__name__ for t in texts if not isinstance(t, str)]
        if bad:
            raise ValueError(f"AoETransformer embeds single texts, got {sorted(set(bad))}")
        if prompt:
            texts = [prompt + t for t in texts]
        max_length = kwargs.get("max_length") or self.max_seq_length
        ids = tokenize_texts(self.tokenizer, texts, max_length, self.prompt)
        return pad_ids(ids, self.tokenizer)

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        input_ids, mask = features["input_ids"], features["attention_mask"]
        extra = {}
        if bool((mask[:, 0] == 0).any()):
            # the position ids of aoe.model.encoder.embed: a left-padded text counts from its first real token
            extra["position_ids"] = (mask.long().cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            input_ids=input_ids, attention_mask=mask, output_hidden_states=self.output_hidden_states, **extra
        )
        features["token_embeddings"] = out.last_hidden_state
        if self.output_hidden_states:
            features["all_layer_embeddings"] = out.hidden_states
        return features

    def get_embedding_dimension(self) -> int:
        return self.model.config.get_text_config().hidden_size

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", **kwargs) -> "AoETransformer":
        model_dir = Path(model_name_or_path) / subfolder
        if not model_dir.is_dir():
            raise ValueError(f"AoETransformer loads local model folders only; {model_dir} is not one")
        return cls(model_dir, **cls.load_config(str(model_dir)))

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        out = Path(output_path)
        out.mkdir(parents=True, exist_ok=True)
        if out.resolve() != self.model_dir.resolve():
            # PeftModel writes the adapter only; its base stays where aoe_config.json points
            self.model.save_pretrained(out, safe_serialization=safe_serialization)
            # the folder's tokenizer files as they are (the pad token set for batching is not saved)
            for name in TOKENIZER_FILES:
                if (self.model_dir / name).is_file():
                    shutil.copy2(self.model_dir / name, out / name)
            record = aoe_record(self.model_dir)
            if record is not None:
                if "base_model" in record:
                    base = (self.model_dir / record["base_model"]).resolve()
                    record["base_model"] = os.path.relpath(base, out.resolve())
                (out / "aoe_config.json").write_text(json.dumps(record, indent=2) + "\n")
        self.save_config(str(out))


def _needs_aoe_module(model_dir: Path, prompt: str | None) -> bool:
    """Whether sentence-transformers' own Transformer module would embed the folder differently from our Encoder."""
    if prompt is not None or is_adapter_dir(model_dir):
        return True
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # no pad token: its Transformer cannot batch; left padding: it passes no position ids
    return tokenizer.pad_token is None or tokenizer.padding_side != "right"


def _pooler_weights(model_dir: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """The trained pooler's dense weight and bias (``cls_mlp``), read from the folder's safetensors."""
    from safetensors import safe_open

    if is_adapter_dir(model_dir):
        raise ValueError(f"{model_dir}: pooling 'cls_mlp' reads the backbone's trained pooler, which a LoRA adapter does not hold")
    found = {}
    for file in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as f:
            for key in f.keys():
                for part in ("weight", "bias"):
                    if key.endswith(f"pooler.dense.{part}"):
                        found[part] = f.get_tensor(key).float()
    if set(found) != {"weight", "bias"}:
        raise ValueError(f"{model_dir}: pooling 'cls_mlp' needs the model's pooler.dense weight and bias, and its "
                         f"safetensors hold {sorted(found) or 'neither'}")
    return found["weight"], found["bias"]


def _pooling_modules(pooling: str, hidden: int, num_layers: int, pooler: tuple | None = None) -> list:
    from torch import nn
    from sentence_transformers.base.modules import Dense
    from sentence_transformers.sentence_transformer.modules import Pooling, WeightedLayerPooling

    modules = []
    if pooling == "first_last_avg":
        # hidden_states[1] is the first block's output (aoe.model.encoder.embed); layer_start=1 keeps
        # blocks 1..num_layers, weighted 1 (first), 0 ..., 1 (top): (first + top) / 2
        weights = torch.zeros(num_layers)
        weights[0] += 1.0
        weights[-1] += 1.0
        modules.append(
            WeightedLayerPooling(
                hidden, num_hidden_layers=num_layers, layer_start=1, layer_weights=nn.Parameter(weights)
            )
        )
    modules.append(Pooling(hidden, pooling_mode=ST_POOLING_MODES[pooling]))
    if pooling == "cls_mlp":
        # BERT's pooler as sentence-transformers' Dense: tanh(W h_cls + b), the trained weights
        weight, bias = pooler
        modules.append(Dense(hidden, hidden, bias=True, activation_function=nn.Tanh(), init_weight=weight, init_bias=bias))
    if isinstance(ST_POOLING_MODES[pooling], tuple):
        eye = torch.eye(hidden)
        modules.append(
            Dense(
                2 * hidden,
                hidden,
                bias=False,
                activation_function=nn.Identity(),
                init_weight=torch.cat([eye, eye], dim=1) / 2,
            )
        )
    return modules


def _class_ref(cls: type) -> str:
    return f"{cls.__module__}.{cls.__name__}"


def write_sentence_transformers_files(
    model_dir: str | os.PathLike,
    pooling: str | None = None,
    prompt: str | None = None,
    max_seq_length: int | None = None,
) -> list[dict]:
    """Make ``model_dir`` load with sentence-transformers, embedding as ``aoe.model.encoder.Encoder(model_dir)``.

    ``pooling`` and ``prompt`` come from the folder's ``aoe_config.json`` when it has
    one (passing different ones is an error, as for the Encoder); a backbone folder
    takes them from the caller. ``max_seq_length``: the truncation length (default:
    :func:`default_max_length`, the model's maximum, at most 512). Rewriting a folder
    replaces the files of the previous call. Returns the ``modules.json`` entries.
    """
    from sentence_transformers import __version__ as st_version
    from sentence_transformers.base.modules import Transformer
    import transformers

    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise FileNotFoundError(f"{model_dir}: no such model folder")
    if not ((model_dir / "config.json").is_file() or is_adapter_dir(model_dir)):
        raise ValueError(f"{model_dir} is not a model folder (no config.json or adapter_config.json)")
    record = aoe_record(model_dir)
    if record is not None:
        if pooling is not None and pooling != record["pooling"]:
            raise ValueError(f"{model_dir} was trained with pooling {record['pooling']!r}, asked for {pooling!r}")
        pooling = record["pooling"]
        if prompt is not None and prompt != record.get("prompt"):
            raise ValueError(f"{model_dir} was trained with prompt {record.get('prompt')!r}, asked for {prompt!r}")
        prompt = record.get("prompt")
    if pooling is None:
        raise ValueError(f"{model_dir}: no aoe_config.json and no pooling given")
    if pooling in BATCH_DEPENDENT_POOLINGS:
        raise ValueError(f"{model_dir}: pooling {pooling!r} is the official arithmetic over a padded batch, so its embedding "
                         "of a text depends on the texts batched with it; sentence-transformers pools each text alone "
                         "and has no such mode (the cell's masked variant, objectives.<name>_masked, exports)")
    if pooling not in POOLINGS:
        raise ValueError(f"unknown pooling {pooling!r}; known: {sorted(POOLINGS)}")
    check_prompt(prompt)
    config = model_text_config(base_model_dir(model_dir, record))
    if max_seq_length is None:
        max_seq_length = default_max_length(model_dir)
    needs_layers = pooling == "first_last_avg"

    if _needs_aoe_module(model_dir, prompt):
        first_type = _class_ref(AoETransformer)
        first_config = {
            "max_seq_length": int(max_seq_length),
            "prompt": prompt,
            "pooling": pooling,
            "output_hidden_states": needs_layers,
        }
    else:
        first_type = _class_ref(Transformer)
        first_config = {"max_seq_length": int(max_seq_length), "do_lower_case": False}
        if needs_layers:
            first_config["config_kwargs"] = {"output_hidden_states": True}

    # the subfolders of an earlier call, which may have used another pooling
    modules_json = model_dir / "modules.json"
    if modules_json.is_file():
        for entry in json.loads(modules_json.read_text()):
            old = model_dir / entry.get("path", "")
            if entry.get("path") and old.resolve().parent == model_dir.resolve() and old.is_dir():
                shutil.rmtree(old)

    entries = [{"idx": 0, "name": "0", "path": "", "type": first_type}]
    pooler = _pooler_weights(model_dir) if pooling == "cls_mlp" else None
    for idx, module in enumerate(_pooling_modules(pooling, config.hidden_size, config.num_hidden_layers, pooler), start=1):
        path = f"{idx}_{type(module).__name__}"
        (model_dir / path).mkdir(exist_ok=True)
        module.save(str(model_dir / path))
        entries.append({"idx": idx, "name": str(idx), "path": path, "type": _class_ref(type(module))})

    (model_dir / _CONFIG).write_text(json.dumps(first_config, indent=2) + "\n")
    st_config = {
        "model_type": "SentenceTransformer",
        "__version__": {
            "sentence_transformers": st_version,
            "transformers": transformers.__version__,
            "pytorch": torch.__version__,
        },
        # sentence-transformers prompts are prefixes; our template (prefix and suffix) is applied by
        # AoETransformer, so none is registered here (it would be applied twice)
        "prompts": {},
        "default_prompt_name": None,
        "similarity_fn_name": "cosine",  # every evaluation of this project compares by cosine
    }
    (model_dir / "config_sentence_transformers.json").write_text(json.dumps(st_config, indent=2) + "\n")
    modules_json.write_text(json.dumps(entries, indent=2) + "\n")
    return entries
