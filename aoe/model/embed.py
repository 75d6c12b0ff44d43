"""Embed a text file with a model folder: one text per line in, an (N, H) float32 .npy out.

    python -m aoe.model.embed results/models/bert-base-uncased/aoe/stsb/seed42 --in texts.txt --out emb.npy   # the paper grid's
    aoe embed results/cpu-demo/models/minilm-l6/aoe/stsb/seed1 --in texts.txt --out emb.npy                 # a preset's tree
    aoe embed results/backbones/bert-base-uncased --pooling cls --in texts.txt --out emb.npy

Row i of the output is the embedding of line i (blank lines included, as empty
texts). A trained folder embeds with the pooling and prompt in its aoe_config.json;
a backbone folder takes ``--pooling`` (and ``--prompt``). Texts are cut to
``--max-length`` tokens (default: the model's maximum, at most 512, as the evaluations
and the folder's sentence-transformers files); a value past the model's positions, or
with no room for text after the special tokens and prompt, is refused before loading.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from aoe.model.folder import REFETCH, InputError, aoe_record, default_max_length, position_limit, read_json_object
from aoe.util.fsutil import atomic_file

__all__ = ["read_texts", "main"]


# What transformers' AutoModel.from_pretrained looks for in a folder, in its order of preference,
# and what peft's PeftModel.from_pretrained looks for in an adapter folder.
_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
_ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
_POINT = ("point MODEL_DIR at a saved model folder: <tree>/models/<backbone>/<objective>/<trainset>/seed<N> or "
          "<tree>/backbones/<backbone>, the tree being results/ for the paper grid, results/<preset>/ for a preset "
          "(results/cpu-demo/models/minilm-l6/aoe/stsb/seed1 for the demo)")


def _missing_folder(path: Path) -> str:
    """A missing MODEL_DIR: the same folder in the trees that have it (results/models/X asked where a preset's run
    wrote results/<preset>/models/X), else where model folders are."""
    parts = path.parts
    if "results" in parts:
        at = parts.index("results")
        root, rest = Path(*parts[: at + 1]), Path(*parts[at + 1 :]) if len(parts) > at + 1 else None
        if rest is not None and root.is_dir():
            found = sorted(str(p) for p in root.glob(f"*/{rest}") if p.is_dir())
            if found:
                return f"{path}: no such folder; did you mean {' or '.join(found[:3])}? (each configuration has its own tree)"
    return f"{path}: no such folder; {_POINT}"


def read_texts(path: str | os.PathLike) -> list[str]:
    """The lines of a UTF-8 text file, without their line ends; an error for a missing or empty file."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"input file {path} does not exist" if not path.exists() else f"input {path} is not a file")
    try:
        content = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"input file {path} is not UTF-8 text ({exc})") from exc
    # split on "\n" only: str.splitlines would also break texts at \x0b, \x1c, \u2028 ...
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final line end
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    if not any(line.strip() for line in lines):
        raise InputError(f"input file {path} has no text (it is empty or blank)")
    return lines


def _check_safetensors(path: Path) -> None:
    """Parse the header, which safetensors checks against the file's size: a cut-short file fails here, in a millisecond."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy"):
            pass
    except SafetensorError as exc:
        raise InputError(
            f"{path}: not a complete safetensors file ({path.stat().st_size} bytes; {exc}); "
            f"it was cut short or damaged, as by an interrupted copy or download: {REFETCH}"
        ) from exc


def _check_weights(folder: Path, names: tuple[str, ...]) -> None:
    found = next((folder / name for name in names if (folder / name).is_file()), None)
    if found is None:
        raise InputError(f"{folder}: no weights file ({', '.join(names[:-1])} or {names[-1]}); {REFETCH}")
    if not found.name.endswith(".index.json"):
        if found.suffix == ".safetensors":
            _check_safetensors(found)
        return
    weight_map = read_json_object(found).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise InputError(f"{found}: no \"weight_map\" naming the weight shards; {REFETCH}")
    for shard in sorted(set(weight_map.values())):
        if not (folder / shard).is_file():
            raise InputError(f"{folder / shard}: missing (a shard listed in {found.name}); {REFETCH}")
        if shard.endswith(".safetensors"):
            _check_safetensors(folder / shard)


def _check_backbone_dir(path: Path) -> None:
    config = read_json_object(path / "config.json")
    if "model_type" not in config:
        raise InputError(
            f"{path / 'config.json'}: no \"model_type\" key, so transformers cannot tell which model it is; {REFETCH}"
        )
    _check_weights(path, _WEIGHTS)


def _check_model_dir(path: Path) -> None:
    """What loading would fail on, found before torch or transformers is imported, with the file it is in."""
    if not path.is_dir():
        raise InputError(_missing_folder(path) if not path.exists() else f"{path}: not a folder; {_POINT}")
    adapter = (path / "adapter_config.json").is_file()
    if not (adapter or (path / "config.json").is_file()):
        raise InputError(f"{path} is not a model folder (no config.json or adapter_config.json); {_POINT}")
    record = read_json_object(path / "aoe_config.json") if (path / "aoe_config.json").is_file() else {}
    if not adapter:
        _check_backbone_dir(path)
        return
    read_json_object(path / "adapter_config.json")
    _check_weights(path, _ADAPTER_WEIGHTS)
    if isinstance(record.get("base_model"), str):  # without one, the Encoder says what is missing
        base = (path / record["base_model"]).resolve()
        if not (base / "config.json").is_file():
            raise InputError(
                f"{base}: the base model of {path} (aoe_config.json base_model) is missing or has no config.json; {REFETCH}"
            )
        _check_backbone_dir(base)


def _check_device(device: str) -> str:
    """``device``, if torch can place a model on it here; checked before a model is loaded onto the CPU to be moved."""
    import torch

    try:
        parsed = torch.device(device)
    except RuntimeError as exc:  # torch's message lists every device type it was built to know
        raise InputError(f"--device {device}: not a torch device; use cpu, cuda or cuda:N (or leave --device out)") from exc
    if parsed.type == "cuda":
        if torch.version.cuda is None and torch.version.hip is None:
            raise InputError(
                f"--device {device}: this torch ({torch.__version__}) is built without CUDA; "
                "use --device cpu (or leave --device out), or install a CUDA build of torch"
            )
        if not torch.cuda.is_available():
            raise InputError(
                f"--device {device}: no CUDA GPU is visible to torch; use --device cpu (or leave --device out), "
                "or check the GPU driver and CUDA_VISIBLE_DEVICES"
            )
        count = torch.cuda.device_count()
        if parsed.index is not None and parsed.index >= count:
            raise InputError(f"--device {device}: only {count} CUDA device(s) visible; use cuda:0 to cuda:{count - 1}")
    elif parsed.type == "mps" and not torch.backends.mps.is_available():
        raise InputError(f"--device {device}: MPS is not available on this machine; use --device cpu (or leave --device out)")
    return device


def _open_output(out: Path, stack: contextlib.ExitStack):
    """The output as :func:`atomic_file` (moved onto ``out`` once written), opened before any model loads."""
    if out.is_dir():
        raise InputError(f"output {out} is a folder; give a file name such as {out / 'emb.npy'}")
    if not out.parent.is_dir():
        raise InputError(f"cannot write output {out}: folder {out.parent} does not exist")
    try:
        return stack.enter_context(atomic_file(out, "wb"))
    except OSError as exc:
        raise InputError(f"cannot write output {out}: {exc.strerror or exc}") from exc


def _max_length_error(model_dir: Path, max_length: int, explicit: bool, prompt: str | None) -> str | None:
    """Why ``max_length`` cannot be what the texts are cut to, or None; read from the folder's files, no model loaded.

    Past the model's positions the forward pass fails with a tensor-size traceback; below
    the tokenizer's special tokens (and the prompt) the tokenizer keeps every text whole,
    and the summary line would name a truncation that never happened.
    """
    from transformers import AutoTokenizer

    from aoe.model.tokens import max_length_floor

    limit = position_limit(model_dir) if explicit else None  # the default is within it by construction
    if limit is not None and max_length > limit[0]:
        return (
            f"--max-length {max_length}: {model_dir} takes at most {limit[0]} tokens ({limit[1]}); "
            f"use --max-length {limit[0]} or less, or leave it out for the model's maximum"
        )
    record = aoe_record(model_dir)
    # the prompt the Encoder will use: the trained one (a different --prompt is refused there)
    floor, why = max_length_floor(AutoTokenizer.from_pretrained(model_dir), record.get("prompt") if record else prompt)
    if max_length < floor:
        return f"--max-length {max_length} is too small: {why}; use --max-length {floor} or more"
    return None


def build_parser(prog: str = "python -m aoe.model.embed") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=__doc__.split("\n\n")[0],
        epilog=(
            "exit status: 0 when the embeddings are written; 2 when an option, the input, the output or the model folder "
            "cannot be used (a missing or incomplete model folder, a broken config.json, a cut-short weights file, "
            "a device this machine lacks), with a message on stderr that names the file or option and the fix; "
            "1 for anything else (a bug: its traceback is printed)"
        ),
    )
    parser.add_argument(
        "model_dir", metavar="MODEL_DIR", type=Path, help="model folder (<tree>/models/... or <tree>/backbones/...; <tree>: results/ for the paper grid, results/<preset>/ for a preset)"
    )
    parser.add_argument("--in", dest="input", required=True, type=Path, help="UTF-8 text file, one text per line")
    parser.add_argument("--out", required=True, type=Path, help="output .npy file: (lines, hidden size) float32")
    parser.add_argument("--batch-size", type=int, default=64, help="texts per forward pass (default 64)")
    parser.add_argument(
        "--max-length", type=int, default=None, help="truncation length in tokens (default: the model's maximum, at most 512)"
    )
    parser.add_argument("--pooling", default=None, help="pooling for a folder without aoe_config.json (cls, avg, last, ...)")
    parser.add_argument("--prompt", default=None, help="template with {text} for a prompted backbone without aoe_config.json")
    parser.add_argument("--device", default=None, help="torch device, e.g. cpu or cuda:0 (default: cuda if available)")
    return parser


def main(argv: list[str] | None = None, prog: str = "python -m aoe.model.embed") -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.batch_size < 1:
        parser.error(f"--batch-size must be at least 1, got {args.batch_size}")
    if args.max_length is not None and args.max_length < 1:
        parser.error(f"--max-length must be at least 1, got {args.max_length}")
    output = contextlib.ExitStack()  # the output's temporary file: moved onto --out at the end, removed on any exit before
    try:
        texts = read_texts(args.input)
        _check_model_dir(args.model_dir)
        device = _check_device(args.device) if args.device is not None else None
        handle = _open_output(args.out, output)
    except InputError as exc:
        # one line, no usage text: the message names the file or option and the fix
        parser.exit(2, f"{parser.prog}: {exc}\n")

    with output:
        import numpy as np
        from safetensors import SafetensorError

        from aoe.model.encoder import DamagedModelError, Encoder

        try:
            max_length = args.max_length or default_max_length(args.model_dir)
            # before the model loads (minutes for an LLM): one line, not a traceback mid-encoding
            problem = _max_length_error(args.model_dir, max_length, args.max_length is not None, args.prompt)
            if problem is not None:
                parser.exit(2, f"{parser.prog}: {problem}\n")
            encoder = Encoder(args.model_dir, pooling=args.pooling, device=device, prompt=args.prompt)
        except ValueError as exc:  # pooling / prompt missing or contradicting aoe_config.json
            parser.error(str(exc))
        except (SafetensorError, DamagedModelError) as exc:  # the files passed _check_model_dir: one changed since (a copy still running?)
            cause = exc.__cause__ if isinstance(exc, DamagedModelError) and exc.__cause__ is not None else exc
            parser.exit(2, f"{parser.prog}: {args.model_dir}: a weights file cannot be read ({cause}); {REFETCH}\n")
        emb = encoder.encode(texts, batch_size=args.batch_size, max_length=max_length, progress=True)
        np.save(handle, emb.astype(np.float32, copy=False))
    print(f"{args.out}: {emb.shape[0]} texts x {emb.shape[1]} dims (pooling {encoder.pooling}, max_length {max_length})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
