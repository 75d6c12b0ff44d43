"""sentence-transformers files for our model folders (aoe.model.interop) and the `aoe embed` command (aoe.model.embed).

Every check compares sentence-transformers' embeddings with our Encoder's (and, for the
LLM adapter, with a reference computed here step by step) on tiny random models: a
BERT for the seven poolings, a LLaMA with a perturbed LoRA adapter and AoE's prompt
for the LLM layout (LoRA, QLoRA, left padding).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from importlib import import_module
from pathlib import Path

import numpy as np
import pytest
import torch
from bitsandbytes.functional import has_avx512bf16

from aoe.model.encoder import Encoder
from aoe.model.folder import default_max_length
from aoe.model.interop import ST_POOLING_MODES, AoETransformer, write_sentence_transformers_files
from aoe.model.pooling import POOLINGS, pool
from tests.workflow_utils import REPO

AOE_PROMPT = 'Summarize sentence "{text}" in one word:"'
TOL = 1e-5
# short and long texts (the last is cut at the tiny models' 128 positions), a blank one, non-ASCII
TEXTS = [
    "A man is playing a guitar.",
    "short",
    "Two dogs run across a snowy field while a child watches them from the porch.",
    "",
    "Café prices rose 3% in Zürich; the committee met again on Tuesday.",
    " ".join(f"word{i}" for i in range(300)),
]


def _max_diff(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape and a.dtype == b.dtype == np.float32
    return float(np.abs(a - b).max())


def _st(path: Path, **kwargs):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(path), device="cpu", **kwargs)


@pytest.fixture
def bert_copy(tmp_path: Path, tiny_bert: Path) -> Path:
    return Path(shutil.copytree(tiny_bert, tmp_path / "model"))


def test_every_pooling_has_a_sentence_transformers_form():
    assert set(ST_POOLING_MODES) == set(POOLINGS)


@pytest.mark.parametrize("pooling", sorted(POOLINGS))
def test_trained_encoder_folder_loads_in_sentence_transformers(bert_copy: Path, pooling: str):
    (bert_copy / "aoe_config.json").write_text(json.dumps({"pooling": pooling, "prompt": None, "finetune": "full"}))
    entries = write_sentence_transformers_files(bert_copy)
    # built-in modules only: loads without trust_remote_code and without this package
    assert all(e["type"].startswith("sentence_transformers.") for e in entries)
    assert json.loads((bert_copy / "sentence_bert_config.json").read_text())["max_seq_length"] == 128
    model = _st(bert_copy)
    assert model.max_seq_length == 128 and model.similarity_fn_name == "cosine"
    ours = Encoder(bert_copy, device="cpu").encode(TEXTS, batch_size=4, max_length=128)
    theirs = model.encode(TEXTS, batch_size=3)
    assert _max_diff(theirs, ours) < TOL, pooling


def test_backbone_folder_takes_the_pooling_and_a_rewrite_replaces_the_modules(bert_copy: Path):
    with pytest.raises(ValueError, match="no aoe_config.json and no pooling"):
        write_sentence_transformers_files(bert_copy)
    write_sentence_transformers_files(bert_copy, pooling="cls_avg", max_seq_length=16)
    assert (bert_copy / "2_Dense").is_dir()
    first = _st(bert_copy).encode(TEXTS)
    ours = Encoder(bert_copy, pooling="cls_avg", device="cpu").encode(TEXTS, max_length=16)
    assert _max_diff(first, ours) < TOL

    entries = write_sentence_transformers_files(bert_copy, pooling="max")
    assert [e["path"] for e in entries] == ["", "1_Pooling"]
    assert not (bert_copy / "2_Dense").exists()
    ours = Encoder(bert_copy, pooling="max", device="cpu").encode(TEXTS, max_length=128)
    assert _max_diff(_st(bert_copy).encode(TEXTS), ours) < TOL


def test_contradicting_or_unknown_settings_and_non_model_folders_are_refused(bert_copy: Path, tmp_path: Path):
    (bert_copy / "aoe_config.json").write_text(json.dumps({"pooling": "cls"}))
    with pytest.raises(ValueError, match="trained with pooling 'cls', asked for 'avg'"):
        write_sentence_transformers_files(bert_copy, pooling="avg")
    with pytest.raises(ValueError, match="trained with prompt None"):
        write_sentence_transformers_files(bert_copy, prompt=AOE_PROMPT)
    (bert_copy / "aoe_config.json").unlink()
    with pytest.raises(ValueError, match="unknown pooling 'mean'"):
        write_sentence_transformers_files(bert_copy, pooling="mean")
    with pytest.raises(ValueError, match=r"has no \{text\} placeholder"):
        write_sentence_transformers_files(bert_copy, pooling="last", prompt="no placeholder")
    empty = tmp_path / "not_a_model"
    empty.mkdir()
    with pytest.raises(ValueError, match=f"{empty} is not a model folder"):
        write_sentence_transformers_files(empty, pooling="cls")
    assert not (bert_copy / "modules.json").exists() and not any(empty.iterdir())


# ---------------------------------------------------------------------------
# LLM folders: peft adapter + tokenizer + aoe_config.json naming the base (aoe.model.lora's layout)

QLORA = {
    "load_in_4bit": True,
    "bnb_4bit_quant_type": "nf4",
    "bnb_4bit_use_double_quant": True,
    "bnb_4bit_compute_dtype": "float32",
}


@pytest.fixture(scope="module")
def llm_root(tmp_path_factory: pytest.TempPathFactory, tiny_llama: Path) -> Path:
    """results/-like tree: a base LLaMA folder and adapter folders over it (lora, qlora)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoTokenizer, LlamaModel

    root = tmp_path_factory.mktemp("llm")
    base = Path(shutil.copytree(tiny_llama, root / "backbones" / "tiny-llama"))
    for name, finetune, quantization in [("lora", "lora", None), ("qlora", "qlora", QLORA)]:
        out = root / "models" / "tiny-llama" / name / "stsb" / "seed1"
        model = get_peft_model(LlamaModel.from_pretrained(base), LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
        # peft initialises lora_B to zero (the adapter starts as a no-op): random values make it count
        gen = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for n, p in model.named_parameters():
                if "lora_" in n:
                    p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
        model.save_pretrained(out)
        AutoTokenizer.from_pretrained(base).save_pretrained(out)
        record = {
            "pooling": "last",
            "prompt": AOE_PROMPT,
            "finetune": finetune,
            "base_model": os.path.relpath(base, out),
            "quantization": quantization,
        }
        (out / "aoe_config.json").write_text(json.dumps(record, indent=2))
        write_sentence_transformers_files(out)
    return root


def _llm(root: Path, name: str) -> Path:
    return root / "models" / "tiny-llama" / name / "stsb" / "seed1"


def _reference(model_dir: Path, texts: list[str]) -> np.ndarray:
    """The adapter's embeddings step by step: template, tokenizer, PeftModel over the base, last-token pooling."""
    from peft import PeftModel
    from transformers import AutoTokenizer, LlamaModel

    record = json.loads((model_dir / "aoe_config.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = PeftModel.from_pretrained(LlamaModel.from_pretrained(model_dir / record["base_model"]), model_dir).eval()
    rows = []
    with torch.no_grad():
        for text in texts:  # one text per forward: no padding at all
            enc = tokenizer(AOE_PROMPT.replace("{text}", text), return_tensors="pt")
            rows.append(pool("last", model(**enc).last_hidden_state, enc["attention_mask"])[0].numpy())
    return np.stack(rows)


def test_llm_adapter_folder_embeds_as_the_encoder_and_the_reference(llm_root: Path):
    model_dir = _llm(llm_root, "lora")
    entries = json.loads((model_dir / "modules.json").read_text())
    assert [e["type"] for e in entries] == [
        "aoe.model.interop.AoETransformer",
        "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
    ]
    assert json.loads((model_dir / "1_Pooling" / "config.json").read_text())["pooling_mode"] == "lasttoken"
    assert json.loads((model_dir / "sentence_bert_config.json").read_text())["prompt"] == AOE_PROMPT

    theirs = _st(model_dir, trust_remote_code=True).encode(TEXTS, batch_size=4)
    ours = Encoder(model_dir, device="cpu").encode(TEXTS, batch_size=3, max_length=128)
    assert _max_diff(theirs, ours) < TOL
    short = TEXTS[:5]  # the reference does not truncate
    reference = _reference(model_dir, short)
    assert _max_diff(theirs[:5], reference) < TOL
    # the adapter matters: the bare base embeds the same prompted texts differently
    from transformers import AutoTokenizer, LlamaModel

    base = LlamaModel.from_pretrained(llm_root / "backbones" / "tiny-llama").eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    enc = tokenizer(AOE_PROMPT.replace("{text}", short[0]), return_tensors="pt")
    with torch.no_grad():
        bare = pool("last", base(**enc).last_hidden_state, enc["attention_mask"])[0].numpy()
    assert np.abs(bare - reference[0]).max() > 1e-2


def test_a_long_text_is_cut_inside_the_prompt(llm_root: Path):
    model = _st(_llm(llm_root, "lora"), trust_remote_code=True)
    features = model.preprocess([TEXTS[-1]])
    ids = features["input_ids"][0].tolist()
    assert len(ids) == 128
    closing = model[0].tokenizer('in one word:"', add_special_tokens=False)["input_ids"]
    assert ids[-1 - len(closing) : -1] == closing  # the template's end survives, before [SEP]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine where CUDA cannot be used: the module's Encoder quantizes the "
                    "4-bit base on the GPU there (its default device) and sentence-transformers then moves it to the CPU, "
                    "so the two sides' NF4 weights come from different kernels (1.5e-4 apart on an H100)")
def test_4bit_base_embeds_as_the_encoder(llm_root: Path):
    from bitsandbytes.nn import Linear4bit

    model_dir = _llm(llm_root, "qlora")
    model = _st(model_dir, trust_remote_code=True)
    layers = [m for m in model[0].model.modules() if isinstance(m, Linear4bit)]
    assert layers and not any(m.support_avx512bf16_for_cpu for m in layers)  # pinned on every CPU
    theirs = model.encode(TEXTS, batch_size=4)
    ours = Encoder(model_dir, device="cpu").encode(TEXTS, batch_size=3, max_length=128)
    assert _max_diff(theirs, ours) < TOL


# bitsandbytes' CPU 4-bit kernels (aoe.model.encoder.pin_4bit_cpu_path). Measured on the qlora fixture
# (hidden 64, 2 layers), relative to the embedding's largest entry: the packed kernel's bf16
# activations and block scales moved embeddings by 4.9e-3 (bound 2e-2); the dequantizing kernel in eval
# and in training mode are the same computation (float32 rounding only).
PACKED_RTOL = 2e-2


def _qlora_embeddings(llm_root: Path, packed: bool | None = None, training: bool = False) -> tuple[np.ndarray, list]:
    """Embeddings of TEXTS[:5] by the qlora fixture, one text per forward, and its 4-bit layers."""
    from bitsandbytes.nn import Linear4bit

    from aoe.model.encoder import embed, pin_4bit_cpu_path
    from aoe.model.tokens import tokenize_texts

    encoder = Encoder(_llm(llm_root, "qlora"), device="cpu")
    layers = [m for m in encoder.model.modules() if isinstance(m, Linear4bit)]
    if packed is not None:
        pin_4bit_cpu_path(encoder.model, packed=packed)
    encoder.model.train(training)
    rows = []
    with torch.set_grad_enabled(training):
        for ids in tokenize_texts(encoder.tokenizer, TEXTS[:5], 128, encoder.prompt):
            x = torch.tensor([ids])
            rows.append(embed(encoder.model, "last", x, torch.ones_like(x))[0].detach().numpy())
    return np.stack(rows), layers


def test_4bit_eval_and_training_forwards_run_the_same_kernel(llm_root: Path):
    inference, layers = _qlora_embeddings(llm_root)
    assert layers and not any(m.support_avx512bf16_for_cpu for m in layers)
    assert not any(getattr(m.weight.quant_state, "packing_format_for_cpu", False) for m in layers)
    training, _ = _qlora_embeddings(llm_root, training=True)
    assert _max_diff(inference, training) < TOL


@pytest.mark.skipif(
    not has_avx512bf16(),
    reason="the packed bf16 4-bit CPU kernel needs AVX512-BF16, which this CPU lacks",
)
def test_forced_packed_4bit_kernel_agrees_within_bf16(llm_root: Path):
    dequantized, _ = _qlora_embeddings(llm_root, packed=False)
    packed, layers = _qlora_embeddings(llm_root, packed=True)
    assert all(m.weight.quant_state.packing_format_for_cpu for m in layers)  # the packed kernel really ran
    err = np.abs(packed - dequantized).max() / np.abs(dequantized).max()
    assert 0 < err < PACKED_RTOL, err


def test_packed_4bit_kernel_is_refused_without_avx512bf16(llm_root: Path, monkeypatch):
    import bitsandbytes.functional

    from aoe.model.encoder import pin_4bit_cpu_path

    encoder = Encoder(_llm(llm_root, "qlora"), device="cpu")
    monkeypatch.setattr(bitsandbytes.functional, "has_avx512bf16", lambda: False)
    with pytest.raises(RuntimeError, match="needs a CPU with AVX512-BF16"):
        pin_4bit_cpu_path(encoder.model, packed=True)
    assert pin_4bit_cpu_path(encoder.model, packed=False) == 14  # 7 linear layers x 2 blocks


def test_left_padding_decoder_gets_the_encoders_positions(tmp_path: Path, minilm_dir: Path):
    """Absolute position embeddings (GPT-2) make a left-padded text's positions visible in its embedding."""
    from transformers import AutoTokenizer, GPT2Config, GPT2Model

    folder = tmp_path / "gpt2"
    tokenizer = AutoTokenizer.from_pretrained(minilm_dir)
    tokenizer.padding_side = "left"
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=tokenizer.vocab_size, n_embd=32, n_layer=2, n_head=2, n_positions=128)
    GPT2Model(config).save_pretrained(folder)
    entries = write_sentence_transformers_files(folder, pooling="last")
    # sentence-transformers' Transformer passes no position ids: our module does
    assert entries[0]["type"] == "aoe.model.interop.AoETransformer"
    model = _st(folder, trust_remote_code=True)
    mask = model.preprocess(TEXTS[:2])["attention_mask"]
    assert mask[1, 0] == 0 and mask[1, -1] == 1  # "short" is padded on the left
    theirs = model.encode(TEXTS, batch_size=4)
    ours = Encoder(folder, pooling="last", device="cpu").encode(TEXTS, batch_size=3, max_length=128)
    assert _max_diff(theirs, ours) < TOL


def test_llm_folder_needs_trust_remote_code_and_survives_a_save(llm_root: Path, tmp_path: Path):
    model_dir = _llm(llm_root, "lora")
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        _st(model_dir)
    model = _st(model_dir, trust_remote_code=True)
    saved = tmp_path / "elsewhere" / "copy"
    model.save(str(saved))
    # the adapter only, its base named again relative to the new place
    assert (saved / "adapter_model.safetensors").is_file() and not (saved / "model.safetensors").exists()
    record = json.loads((saved / "aoe_config.json").read_text())
    assert (saved / record["base_model"]).resolve() == (llm_root / "backbones" / "tiny-llama").resolve()
    assert _max_diff(_st(saved, trust_remote_code=True).encode(TEXTS), model.encode(TEXTS)) < TOL


def test_prompted_backbone_takes_the_prompt_as_argument(llm_root: Path, tmp_path: Path):
    backbone = Path(shutil.copytree(llm_root / "backbones" / "tiny-llama", tmp_path / "backbone"))
    write_sentence_transformers_files(backbone, pooling="last", prompt=AOE_PROMPT, max_seq_length=64)
    module = _st(backbone, trust_remote_code=True)[0]
    assert isinstance(module, AoETransformer) and module.prompt == AOE_PROMPT and module.max_seq_length == 64
    ours = Encoder(backbone, pooling="last", prompt=AOE_PROMPT, device="cpu").encode(TEXTS, max_length=64)
    assert _max_diff(_st(backbone, trust_remote_code=True).encode(TEXTS), ours) < TOL


_OFFLINE_LOAD = """
import socket, sys
import numpy as np

def refuse(*args, **kwargs):
    raise OSError("network access during an offline load")

socket.socket.connect = socket.socket.connect_ex = refuse
socket.getaddrinfo = socket.create_connection = refuse
from sentence_transformers import SentenceTransformer

for path, out in zip(sys.argv[1::2], sys.argv[2::2]):
    model = SentenceTransformer(path, device="cpu", trust_remote_code=True)
    np.save(out, model.encode({texts!r}))
"""


@pytest.mark.slow
def test_loading_needs_no_network(llm_root: Path, bert_copy: Path, tmp_path: Path):
    (bert_copy / "aoe_config.json").write_text(json.dumps({"pooling": "first_last_avg"}))
    write_sentence_transformers_files(bert_copy)
    llm = _llm(llm_root, "lora")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    args = [str(bert_copy), str(tmp_path / "bert.npy"), str(llm), str(tmp_path / "llm.npy")]
    proc = subprocess.run(
        [sys.executable, "-c", _OFFLINE_LOAD.format(texts=TEXTS), *args], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for folder, npy in [(bert_copy, "bert.npy"), (llm, "llm.npy")]:
        ours = Encoder(folder, device="cpu").encode(TEXTS, max_length=128)
        assert _max_diff(np.load(tmp_path / npy), ours) < TOL


# ---------------------------------------------------------------------------
# aoe embed


@pytest.mark.slow
def test_embed_cli_end_to_end_equals_the_encoder(bert_copy: Path, tmp_path: Path):
    (bert_copy / "aoe_config.json").write_text(json.dumps({"pooling": "cls"}))
    texts = tmp_path / "texts.txt"
    # a blank line is an empty text: row i stays line i
    texts.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    out = tmp_path / "emb.npy"
    proc = subprocess.run(
        [sys.executable, "-m", "aoe.model.embed", str(bert_copy), "--in", str(texts), "--out", str(out), "--batch-size", "2",
         "--device", "cpu"],
        capture_output=True, text=True, cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "encode" in proc.stderr  # the progress bar
    emb = np.load(out)
    assert emb.shape == (len(TEXTS), 32)
    ours = Encoder(bert_copy, device="cpu").encode(TEXTS, max_length=default_max_length(bert_copy))
    assert _max_diff(emb, ours) < TOL


def test_aoe_console_script_runs_embed(bert_copy: Path, tmp_path: Path):
    target = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["aoe"]
    module, func = target.split(":")
    main = getattr(import_module(module), func)
    texts = tmp_path / "texts.txt"
    texts.write_text("one text\r\nanother text\r\n", encoding="utf-8")  # CRLF line ends are not part of a text
    out = tmp_path / "emb.npy"
    args = ["embed", str(bert_copy), "--in", str(texts), "--out", str(out), "--pooling", "avg", "--max-length", "16"]
    assert main([*args, "--device", "cpu"]) == 0
    ours = Encoder(bert_copy, pooling="avg", device="cpu").encode(["one text", "another text"], max_length=16)
    assert _max_diff(np.load(out), ours) < TOL
    assert main(["nope"]) == 2


def _cli_error(capsys, argv: list[str]) -> str:
    from aoe.model.embed import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_embed_cli_errors_name_the_file(bert_copy: Path, tmp_path: Path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("a text\n")
    out = tmp_path / "emb.npy"
    missing = tmp_path / "missing.txt"
    assert f"input file {missing} does not exist" in _cli_error(capsys, [str(bert_copy), "--in", str(missing), "--out", str(out)])
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n")
    assert f"input file {blank} has no text" in _cli_error(capsys, [str(bert_copy), "--in", str(blank), "--out", str(out)])
    not_model = tmp_path / "folder"
    not_model.mkdir()
    err = _cli_error(capsys, [str(not_model), "--in", str(texts), "--out", str(out)])
    assert f"{not_model} is not a model folder" in err
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    bad_out = a_file / "emb.npy"  # under a file: unwritable even for root
    err = _cli_error(capsys, [str(bert_copy), "--in", str(texts), "--out", str(bad_out), "--pooling", "cls"])
    assert f"cannot write output {bad_out}" in err
    err = _cli_error(capsys, [str(bert_copy), "--in", str(texts), "--out", str(out)])
    assert "no aoe_config.json and no pooling given" in err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "blank.txt", "folder", "model", "texts.txt"]


@pytest.mark.slow
def test_bitsandbytes_kernels_notice_is_not_printed():
    """`aoe embed` and every job import bitsandbytes (through peft): its notice about the optional
    `kernels` package concerns a kernel our loaders never run and is dropped (aoe/__init__.py)."""
    import logging

    import aoe  # noqa: F401  (installs the filter)

    logger = logging.getLogger("bitsandbytes.backends.cpu.ops")
    kept = []
    handler = logging.Handler()
    handler.emit = kept.append
    logger.addHandler(handler)
    try:
        logger.warning("Failed to load CPU gemm_4bit_forward from kernels-community: No module named 'kernels'.")
        logger.warning("another bitsandbytes warning")
    finally:
        logger.removeHandler(handler)
    assert [r.getMessage() for r in kept] == ["another bitsandbytes warning"]
    # for real: on a CPU with AVX512-BF16 the import itself logged it
    out = subprocess.run([sys.executable, "-c", "import aoe.model.interop, bitsandbytes"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "gemm_4bit_forward" not in out.stderr + out.stdout, out.stderr[-2000:]
