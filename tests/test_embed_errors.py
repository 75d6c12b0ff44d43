"""`aoe embed` on a model folder or device it cannot use: exit status 2 and one line naming the file or option and the fix.

Each broken folder is a copy of the tiny random BERT (conftest.tiny_bert) damaged the
way downloads and copies go wrong: weights missing, config.json cut or hand-edited,
model.safetensors cut short. The refusals run the command's own entry point in this process
(``_embed_here``); what only a fresh process shows runs as a user runs it, in a subprocess (``_embed``):
the command's wiring (a complete folder embeds), and that nothing is printed before the message when it
comes before any loading (a subprocess is a fresh interpreter importing torch: seconds of CPU each, so
``--help`` and the printed max_length, which a process of their own does not change, run here too).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workflow_utils import REPO

REFETCH = "copy or download the model again, or point MODEL_DIR at a complete model folder"
POINT = ("point MODEL_DIR at a saved model folder: <tree>/models/<backbone>/<objective>/<trainset>/seed<N> or "
         "<tree>/backbones/<backbone>, the tree being results/ for the paper grid, results/<preset>/ for a preset "
         "(results/cpu-demo/models/minilm-l6/aoe/stsb/seed1 for the demo)")


@pytest.fixture
def model(tmp_path: Path, tiny_bert: Path) -> Path:
    return Path(shutil.copytree(tiny_bert, tmp_path / "model"))


@pytest.fixture
def texts(tmp_path: Path) -> Path:
    path = tmp_path / "texts.txt"
    path.write_text("a first text\nand a second one\n", encoding="utf-8")
    return path


def _embed(model_dir: Path, texts: Path, *options: str) -> subprocess.CompletedProcess:
    out = texts.parent / "emb.npy"
    return subprocess.run(
        [sys.executable, "-m", "aoe", "embed", str(model_dir), "--in", str(texts), "--out", str(out), "--pooling", "cls",
         *options],
        capture_output=True, text=True, cwd=REPO, env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=300,
    )


def _embed_here(capsys, model_dir: Path, texts: Path, *options: str) -> subprocess.CompletedProcess:
    """``_embed``'s command through ``aoe.__main__.main`` in this process, its output from ``capsys``."""
    import aoe.__main__

    argv = ["embed", str(model_dir), "--in", str(texts), "--out", str(texts.parent / "emb.npy"), "--pooling", "cls", *options]
    capsys.readouterr()
    try:
        rc = aoe.__main__.main(argv)
    except SystemExit as exc:
        rc = exc.code
    out = capsys.readouterr()
    return subprocess.CompletedProcess(argv, rc, out.out, out.err)


def _remove_weights(m: Path) -> None:
    (m / "model.safetensors").unlink()


def _empty(m: Path) -> None:
    shutil.rmtree(m)
    m.mkdir()


def _invalid_json(m: Path) -> None:
    (m / "config.json").write_text('{\n  "model_type": "bert",\n    hidden_size: 32\n}\n')


def _no_model_type(m: Path) -> None:
    config = json.loads((m / "config.json").read_text())
    del config["model_type"]
    (m / "config.json").write_text(json.dumps(config))


def _truncate(m: Path) -> None:
    weights = m / "model.safetensors"
    with weights.open("r+b") as f:
        f.truncate(weights.stat().st_size // 2)


# case -> (damage, the first stderr line with {m} for the model folder)
FOLDER_CASES = {
    "no weights": (
        _remove_weights,
        "aoe embed: {m}: no weights file (model.safetensors, model.safetensors.index.json, pytorch_model.bin "
        "or pytorch_model.bin.index.json); " + REFETCH,
    ),
    "empty folder": (_empty, "aoe embed: {m} is not a model folder (no config.json or adapter_config.json); " + POINT),
    "no such folder": (shutil.rmtree, "aoe embed: {m}: no such folder; " + POINT),
    "config.json not JSON": (
        _invalid_json,
        "aoe embed: {m}/config.json: not valid JSON (line 3 column 5: Expecting property name enclosed in double quotes); "
        + REFETCH,
    ),
    "config.json without model_type": (
        _no_model_type,
        'aoe embed: {m}/config.json: no "model_type" key, so transformers cannot tell which model it is; ' + REFETCH,
    ),
    "truncated safetensors": (_truncate, "aoe embed: {m}/model.safetensors: not a complete safetensors file ("),
}


@pytest.mark.parametrize("case", FOLDER_CASES)
def test_a_broken_model_folder_is_one_line_naming_the_file_and_the_fix(case: str, model: Path, texts: Path, capsys):
    damage, expected = FOLDER_CASES[case]
    damage(model)
    proc = _embed_here(capsys, model, texts, "--device", "cpu")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines()[0].startswith(expected.format(m=model)), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not (texts.parent / "emb.npy").exists()


def test_a_truncated_safetensors_file_says_how_short_it_is_and_the_fix(model: Path, texts: Path, capsys):
    _truncate(model)
    size = (model / "model.safetensors").stat().st_size
    first = _embed_here(capsys, model, texts, "--device", "cpu").stderr.splitlines()[0]
    assert f"({size} bytes; Error while deserializing header: " in first
    assert first.endswith("it was cut short or damaged, as by an interrupted copy or download: " + REFETCH)


def test_a_cuda_device_without_cuda_is_one_line_before_any_loading(model: Path, texts: Path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("needs a machine where CUDA cannot be used")
    proc = _embed(model, texts, "--device", "cuda:0")
    assert proc.returncode == 2, proc.stderr[-3000:]
    if torch.version.cuda is None:
        expected = (
            f"aoe embed: --device cuda:0: this torch ({torch.__version__}) is built without CUDA; "
            "use --device cpu (or leave --device out), or install a CUDA build of torch"
        )
    else:
        expected = "aoe embed: --device cuda:0: no CUDA GPU is visible to torch; "
    # the first line: nothing (no weight-loading progress bar) comes before it
    assert proc.stderr.splitlines()[0].startswith(expected), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout


def test_an_unknown_device_is_one_line(model: Path, texts: Path, capsys):
    proc = _embed_here(capsys, model, texts, "--device", "gpu")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "aoe embed: --device gpu: not a torch device; use cpu, cuda or cuda:N (or leave --device out)"
    ]


@pytest.mark.parametrize(
    "cuda_build, available, count, device, expected",
    [
        (None, False, 0, "cuda", "this torch ({version}) is built without CUDA; "),
        ("12.4", False, 0, "cuda:0", "no CUDA GPU is visible to torch; "),
        ("12.4", True, 2, "cuda:2", "only 2 CUDA device(s) visible; use cuda:0 to cuda:1"),
    ],
)
def test_the_device_check_on_cuda_builds(monkeypatch, cuda_build, available, count, device, expected):
    """The branches this CPU-only machine cannot reach for real: a CUDA torch without a GPU, a GPU index too high."""
    import torch

    from aoe.model.embed import _check_device
    from aoe.model.folder import InputError

    monkeypatch.setattr(torch.version, "cuda", cuda_build)
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    with pytest.raises(InputError) as exc:
        _check_device(device)
    assert str(exc.value).startswith(f"--device {device}: " + expected.format(version=torch.__version__))
    assert _check_device("cpu") == "cpu"


def test_a_weights_file_damaged_after_the_check_is_one_line(model: Path, texts: Path, monkeypatch, capsys):
    """The load itself translates safetensors' error, for a file that changes between the check and the load."""
    import aoe.model.embed

    _truncate(model)
    monkeypatch.setattr(aoe.model.embed, "_check_safetensors", lambda path: None)
    with pytest.raises(SystemExit) as exc:
        aoe.model.embed.main([str(model), "--in", str(texts), "--out", str(texts.parent / "emb.npy"), "--pooling", "cls",
                        "--device", "cpu"], prog="aoe embed")
    assert exc.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"aoe embed: {model}: a weights file cannot be read (Error while deserializing header: ")
    assert line.endswith(REFETCH)
    assert sorted(p.name for p in texts.parent.iterdir()) == ["model", "texts.txt"]  # no output, no temporary file


@pytest.mark.slow
def test_a_complete_folder_still_embeds(model: Path, texts: Path):
    import numpy as np

    proc = _embed(model, texts, "--device", "cpu")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert np.load(texts.parent / "emb.npy").shape == (2, 32)
    assert proc.stderr.splitlines()[-1].endswith("2 texts x 32 dims (pooling cls, max_length 128)")


def test_the_help_documents_the_exit_status(tmp_path, capsys):
    # `aoe embed --help` through the command's entry point (argparse prints it and exits 0); `python -m aoe embed`
    # itself runs in test_a_complete_folder_still_embeds
    proc = _embed_here(capsys, tmp_path / "model", tmp_path / "texts.txt", "--help")
    assert proc.returncode == 0
    help_text = " ".join(proc.stdout.split())
    assert "exit status: 0 when the embeddings are written; 2 when an option" in help_text
    assert "1 for anything else" in help_text


# --- --max-length outside what the tokenizer and the model can do ---


@pytest.mark.slow
def test_a_max_length_past_the_models_positions_is_one_line_before_any_loading(minilm_dir: Path, tmp_path: Path):
    # MiniLM has 512 positions: a longer input failed inside BertEmbeddings with a traceback
    # ("The expanded size of the tensor (1502) must match the existing size (512) ...")
    texts = tmp_path / "long.txt"
    texts.write_text(" ".join(["word"] * 1500) + "\nshort\n", encoding="utf-8")
    proc = _embed(minilm_dir, texts, "--device", "cpu", "--max-length", "2000")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        f"aoe embed: --max-length 2000: {minilm_dir} takes at most 512 tokens (max_position_embeddings 512 in its "
        "config.json); use --max-length 512 or less, or leave it out for the model's maximum"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["long.txt"]


@pytest.mark.parametrize(
    "max_length, expected",
    [
        ("129", "--max-length 129: {m} takes at most 128 tokens (max_position_embeddings 128 in its config.json); "
                "use --max-length 128 or less, or leave it out for the model's maximum"),
        ("1", "--max-length 1 is too small: tokenizer {m} adds 2 special tokens to every text ([CLS] [SEP]); "
              "use --max-length 3 or more"),
    ],
)
def test_the_max_length_is_checked_before_the_model_loads(model: Path, texts: Path, monkeypatch, capsys, max_length, expected):
    import aoe.model.embed
    import aoe.model.encoder

    def no_loading(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(aoe.model.encoder, "Encoder", no_loading)
    with pytest.raises(SystemExit) as exc:
        aoe.model.embed.main([str(model), "--in", str(texts), "--out", str(texts.parent / "emb.npy"), "--pooling", "cls",
                        "--device", "cpu", "--max-length", max_length], prog="aoe embed")
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines() == ["aoe embed: " + expected.format(m=model)]
    assert sorted(p.name for p in texts.parent.iterdir()) == ["model", "texts.txt"]  # no output, no temporary file


@pytest.mark.slow
def test_a_tokenizer_limit_below_the_positions_is_the_limit(model: Path, texts: Path, capsys):
    # RoBERTa's config has 514 positions for 512 tokens; its tokenizer says 512
    config = json.loads((model / "tokenizer_config.json").read_text())
    config["model_max_length"] = 100
    (model / "tokenizer_config.json").write_text(json.dumps(config))
    proc = _embed_here(capsys, model, texts, "--device", "cpu", "--max-length", "101")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        f"aoe embed: --max-length 101: {model} takes at most 100 tokens (model_max_length 100 in its tokenizer_config.json); "
        "use --max-length 100 or less, or leave it out for the model's maximum"
    ]


@pytest.mark.slow
@pytest.mark.parametrize("max_length", ["1", "2"])
def test_a_max_length_below_the_special_tokens_is_one_line(model: Path, texts: Path, max_length: str, capsys):
    # the tokenizer keeps texts whole below its [CLS] [SEP]: "max_length 1" was printed over untruncated embeddings
    proc = _embed_here(capsys, model, texts, "--device", "cpu", "--max-length", max_length)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        f"aoe embed: --max-length {max_length} is too small: tokenizer {model} adds 2 special tokens to every text "
        "([CLS] [SEP]); use --max-length 3 or more"
    ]
    assert not (texts.parent / "emb.npy").exists()


def test_a_trained_folders_prompt_counts_in_the_smallest_max_length(model: Path, texts: Path, monkeypatch, capsys):
    import aoe.model.embed
    import aoe.model.encoder

    prompt = 'Summarize sentence "{text}" in one word:"'
    (model / "aoe_config.json").write_text(json.dumps({"pooling": "cls", "prompt": prompt}))
    monkeypatch.setattr(aoe.model.encoder, "Encoder", lambda *a, **k: pytest.fail("the model was loaded"))
    with pytest.raises(SystemExit):
        aoe.model.embed.main([str(model), "--in", str(texts), "--out", str(texts.parent / "emb.npy"), "--device", "cpu",
                        "--max-length", "8"], prog="aoe embed")
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"aoe embed: --max-length 8 is too small: prompt {prompt!r} alone needs 13 tokens with tokenizer {model} "
        "(special tokens included); use --max-length 14 or more"
    )


@pytest.mark.slow
def test_the_printed_max_length_is_the_truncation_done(model: Path, texts: Path, capsys):
    import numpy as np

    # cut to [CLS] <first token> [SEP]: the first two are one sequence, the third ("and") another.
    # In this process: the line is the command's print to stderr, the embeddings its output file.
    texts.write_text("a first text\na second one\nand a third\n", encoding="utf-8")
    proc = _embed_here(capsys, model, texts, "--device", "cpu", "--max-length", "3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.splitlines()[-1].endswith("3 texts x 32 dims (pooling cls, max_length 3)")
    emb = np.load(texts.parent / "emb.npy")
    assert np.array_equal(emb[0], emb[1]) and not np.array_equal(emb[0], emb[2])


def test_a_model_folder_asked_in_the_paper_grids_tree_names_the_presets_tree(tmp_path, monkeypatch):
    """Issue 62: `aoe embed results/models/...` after the demo said only "results/models/..."; the demo's models
    are under results/cpu-demo/models/."""
    from aoe.model.embed import _check_model_dir
    from aoe.model.folder import InputError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "results/cpu-demo/models/minilm-l6/aoe/stsb/seed1").mkdir(parents=True)
    with pytest.raises(InputError) as err:
        _check_model_dir(Path("results/models/minilm-l6/aoe/stsb/seed1"))
    assert str(err.value) == ("results/models/minilm-l6/aoe/stsb/seed1: no such folder; did you mean "
                              "results/cpu-demo/models/minilm-l6/aoe/stsb/seed1? (each configuration has its own tree)")
    with pytest.raises(InputError, match="no such folder; point MODEL_DIR at a saved model folder: <tree>/models/"):
        _check_model_dir(Path("results/models/minilm-l6/aoe/stsb/seed7"))
