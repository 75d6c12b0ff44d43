"""Embed a text file with a model folder: one text per line in, an (N, H) float32 .npy out.

    python -m aoe.embed results/models/bert-base-uncased/aoe/stsb/seed42 --in texts.txt --out emb.npy
    aoe embed results/backbones/bert-base-uncased --pooling cls --in texts.txt --out emb.npy

Row i of the output is the embedding of line i (blank lines included, as empty
texts). A trained folder embeds with the pooling and prompt in its aoe_config.json;
a backbone folder takes ``--pooling`` (and ``--prompt``). Texts are cut to
``--max-length`` tokens (default: the model's maximum, at most 512, as the evaluations
and the folder's sentence-transformers files).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

__all__ = ["read_texts", "main"]


class InputError(ValueError):
    """A file or folder given on the command line that cannot be used; the message names it."""


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


def _check_model_dir(path: Path) -> None:
    if not path.is_dir():
        raise InputError(f"model folder {path} does not exist" if not path.exists() else f"{path} is not a folder")
    if not ((path / "config.json").is_file() or (path / "adapter_config.json").is_file()):
        raise InputError(f"{path} is not a model folder (no config.json or adapter_config.json)")


def _open_output(out: Path):
    """A temporary file beside ``out`` (renamed onto it once written), opened before any model is loaded."""
    if out.is_dir():
        raise InputError(f"output {out} is a folder; give a file name such as {out / 'emb.npy'}")
    parent = out.parent
    if not parent.is_dir():
        raise InputError(f"cannot write output {out}: folder {parent} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{out.name}.", suffix=".tmp")
    except OSError as exc:
        raise InputError(f"cannot write output {out}: {exc.strerror or exc}") from exc
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would make the result private
    return os.fdopen(fd, "wb"), Path(tmp)


def build_parser(prog: str = "python -m aoe.embed") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", type=Path, help="model folder (results/models/... or results/backbones/...)")
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


def main(argv: list[str] | None = None, prog: str = "python -m aoe.embed") -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.batch_size < 1:
        parser.error(f"--batch-size must be at least 1, got {args.batch_size}")
    if args.max_length is not None and args.max_length < 1:
        parser.error(f"--max-length must be at least 1, got {args.max_length}")
    try:
        texts = read_texts(args.input)
        _check_model_dir(args.model_dir)
        handle, tmp = _open_output(args.out)
    except InputError as exc:
        parser.error(str(exc))

    try:
        import numpy as np

        from aoe.interop import default_max_length
        from aoe.models import Encoder

        try:
            encoder = Encoder(args.model_dir, pooling=args.pooling, device=args.device, prompt=args.prompt)
        except ValueError as exc:  # pooling / prompt missing or contradicting aoe_config.json
            parser.error(str(exc))
        max_length = args.max_length or default_max_length(args.model_dir)
        emb = encoder.encode(texts, batch_size=args.batch_size, max_length=max_length, progress=True)
        with handle:
            np.save(handle, emb.astype(np.float32, copy=False))
        os.replace(tmp, args.out)
    finally:
        handle.close()
        tmp.unlink(missing_ok=True)
    print(f"{args.out}: {emb.shape[0]} texts x {emb.shape[1]} dims (pooling {encoder.pooling}, max_length {max_length})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
