"""A trained model as a Hugging Face hub repository: ``aoe export`` lays it out, ``aoe push`` uploads it.

The repository holds the model folder's files (hard links where the file system allows, else
copies: the folder, a Snakemake output, is never written), among them the sentence-transformers
modules training writes (aoe.model.interop; made here for a folder trained before that), so that
``SentenceTransformer("<repo id>")`` embeds as the project's Encoder, and the model card
(aoe.publish.modelcard, rule model_card: ``results/cards/<cell>/README.md``) as ``README.md``. A LoRA/QLoRA
adapter goes as it is: its base is the local folder aoe_config.json names.

The push goes through huggingface_hub (``create_repo``, then ``upload_folder``: one commit). The
token is huggingface_hub's own: ``HF_TOKEN`` in the environment, else the one ``hf auth login``
stored; it is passed to the hub only, never printed, logged or written. ``HF_ENDPOINT`` points it
at another hub; ``HF_HUB_OFFLINE=1`` or ``AOE_OFFLINE=1`` refuse, as for every download
(aoe.data.download). The workflow never pushes unless asked: ``snakemake push_models`` (every
trained cell, to config ``model_cards.repo_id``) or one cell's ``results/hub/<cell>.json``.

    python -m aoe export <tree>/models/<cell> OUT_DIR [--card README.md]
    HF_TOKEN=... python -m aoe push <tree>/models/<cell> <namespace>/<name> [--card README.md] [--public]

(<tree>: results/ for the paper grid, results/<preset>/ for a preset.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

__all__ = ["HubError", "default_card", "export_model", "push_model", "main_export", "main_push"]

# what aoe.model.interop.write_sentence_transformers_files writes at a folder's top (besides the module folders)
_ST_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")
_TOKEN_HELP = "set HF_TOKEN to a token with write access (https://huggingface.co/settings/tokens), or run `hf auth login`"


class HubError(RuntimeError):
    """The model cannot be exported or pushed as asked; the message says why and what to do."""


def default_card(model_dir: str | Path) -> Path:
    """The card rule model_card writes for a model folder: <tree>/cards/<cell>/README.md beside <tree>/models/<cell>."""
    parts = Path(model_dir).parts
    if "models" not in parts:
        raise HubError(f"{model_dir}: not under a models/ folder of a results tree (results/models/, results/<preset>/models/); name its card with --card")
    i = len(parts) - 1 - parts[::-1].index("models")
    return Path(*parts[:i], "cards", *parts[i + 1:], "README.md")


def _is_adapter(model_dir: Path) -> bool:
    return (model_dir / "adapter_config.json").is_file()


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:  # another file system, or links not allowed
        shutil.copy2(src, dst)


def export_model(model_dir: str | Path, out_dir: str | Path, card: str | Path | None, sentence_transformers: bool = True) -> list[str]:
    """Lay ``model_dir`` out in ``out_dir`` (new or empty) as its hub repository; return the files, sorted.

    ``card`` becomes README.md (None: none). The model folder is only read: every write goes to a
    new file in ``out_dir``.
    """
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    if not (model_dir / "aoe_config.json").is_file():
        raise HubError(f"{model_dir}: not a trained model folder (no aoe_config.json)")
    if card is not None and not Path(card).is_file():
        raise HubError(f"{card}: no model card there; make it (snakemake {card}) or pass --no-card")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise HubError(f"{out_dir}: not empty; give a new folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    # a folder trained before the training wrote them gets the sentence-transformers files here
    regenerate = sentence_transformers and not _is_adapter(model_dir) and not (model_dir / "modules.json").is_file()
    for src in sorted(model_dir.rglob("*")):
        rel = src.relative_to(model_dir)
        if src.is_file() and str(rel) != "README.md" and not (regenerate and str(rel) in _ST_FILES):
            _link_or_copy(src, out_dir / rel)
    if card is not None:
        shutil.copyfile(card, out_dir / "README.md")
    if regenerate:
        from aoe.model.interop import write_sentence_transformers_files

        write_sentence_transformers_files(out_dir)
    return sorted(str(p.relative_to(out_dir)) for p in out_dir.rglob("*") if p.is_file())


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def push_model(
    model_dir: str | Path,
    repo_id: str,
    card: str | Path | None,
    *,
    private: bool = True,
    sentence_transformers: bool = True,
    stage_in: str | Path | None = None,
    commit_message: str | None = None,
) -> dict:
    """Create ``repo_id`` on the hub (if new; ``private``) and upload the exported model in one commit.

    Returns the receipt: repo id, commit, its URL and each file's sha256 (no token). ``stage_in``:
    the folder in whose temporary subfolder the repository is laid out first, removed afterwards
    (default: the system's temporary folder; on the model's file system the files are hard links).
    """
    from aoe.data.download import offline_var

    offline = offline_var()
    if offline:
        raise HubError(f"hub access is disabled ({offline} is set); cannot push {model_dir} to {repo_id}")
    from huggingface_hub import HfApi, get_token
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        raise HubError(f"{repo_id!r}: not a hub repository id ({exc})") from None
    if "/" not in repo_id:
        raise HubError(f"{repo_id!r}: give the namespace too (<user or organization>/<name>)")
    if not get_token():
        raise HubError(f"no Hugging Face token: {_TOKEN_HELP}")
    model_dir = Path(model_dir)
    if stage_in is not None:
        Path(stage_in).mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".push-", dir=stage_in))
    try:
        files = export_model(model_dir, staging, card, sentence_transformers)
        api = HfApi()  # endpoint and token: huggingface_hub's own (HF_ENDPOINT, HF_TOKEN)
        try:
            url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
            commit = api.upload_folder(
                repo_id=repo_id, repo_type="model", folder_path=staging,
                commit_message=commit_message or f"Upload {model_dir} (aoe-repro)",
            )
        except Exception as exc:  # the hub's errors are many classes; all mean "cannot push"
            raise HubError(f"cannot push {model_dir} to {repo_id}: {type(exc).__name__}: {exc}") from exc
        return {
            "repo_id": repo_id,
            "url": str(url),
            "commit": commit.oid,
            "commit_url": commit.commit_url,
            "private": private,
            "model_dir": str(model_dir),
            "card": str(card) if card is not None else None,
            "files": {f: _sha256(staging / f) for f in files},
        }
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# ---------------------------------------------------------------------------
# Command lines: aoe export, aoe push


def _card_arg(args) -> Path | None:
    if args.no_card:
        return None
    return Path(args.card) if args.card else default_card(args.model_dir)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model_dir", help="a trained model folder, results/.../models/<backbone>/<objective>/<trainset>/seed<N>")
    parser.add_argument("--card", help="the model card to put as README.md (default: results/.../cards/<cell>/README.md, rule model_card)")
    parser.add_argument("--no-card", action="store_true", help="no README.md")
    parser.add_argument("--no-sentence-transformers", action="store_true",
                        help="do not add the sentence-transformers modules to a folder without them")


def main_export(argv: list[str] | None = None, prog: str = "aoe export") -> int:
    parser = argparse.ArgumentParser(prog=prog, description="Lay a trained model folder out as its hub repository (model files, card, sentence-transformers modules).")
    _common(parser)
    parser.add_argument("out_dir", help="a new (or empty) folder")
    args = parser.parse_args(argv)
    try:
        files = export_model(args.model_dir, args.out_dir, _card_arg(args), not args.no_sentence_transformers)
    except (HubError, FileNotFoundError, ValueError) as exc:
        parser.exit(2, f"{parser.prog}: {exc}\n")
    print(f"{args.out_dir}: {len(files)} files (load with SentenceTransformer({str(args.out_dir)!r}))", file=sys.stderr)
    return 0


def main_push(argv: list[str] | None = None, prog: str = "aoe push") -> int:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=f"Push a trained model folder and its card to the Hugging Face hub (token: HF_TOKEN; {_TOKEN_HELP}).",
    )
    _common(parser)
    parser.add_argument("repo_id", help="<namespace>/<name> on the hub (created if new)")
    parser.add_argument("--public", action="store_true", help="create the repository public (default: private)")
    parser.add_argument("--receipt", help="write the push's record (repo, commit, files' sha256) to this JSON file")
    args = parser.parse_args(argv)
    try:
        receipt = push_model(args.model_dir, args.repo_id, _card_arg(args), private=not args.public,
                             sentence_transformers=not args.no_sentence_transformers)
    except HubError as exc:
        parser.exit(2, f"{parser.prog}: {exc}\n")
    if args.receipt:
        Path(args.receipt).parent.mkdir(parents=True, exist_ok=True)
        Path(args.receipt).write_text(json.dumps(receipt, indent=2) + "\n")
    print(f"{args.repo_id}: {len(receipt['files'])} files, commit {receipt['commit']} ({receipt['commit_url']})", file=sys.stderr)
    return 0
