"""A training run's checkpoints: what makes a killed job resume, and a finished model survive its job.

Beside each model folder ``seed{N}/``, ``seed{N}.ckpt/`` holds::

    step{S}/            accelerate's state (model or adapters, optimizer, scheduler, RNGs) after step S, and
                        trainer_state.json (written last): the loop's position, the metrics so far, the run's
                        identity and the size and sha256 of every file, so a damaged file is found, not loaded
    final/              the finished model folder, hard links to the files of ``seed{N}/`` (no extra disk),
                        and final.json: the identity and the training summary

Why ``final/``: Snakemake deletes the output of a job that did not end cleanly (a SLURM time limit
right after training, a lost node, ``--rerun-incomplete``) and of a job whose params changed. A job
that finds a ``final/`` of the same identity lays it out again in seconds instead of training again.
Delete the ``.ckpt`` folder to train from scratch.

The identity is everything that decides the trained weights: the resolved training settings less
those that do not (:data:`RESULT_NEUTRAL`), the objective with every default resolved, the token
cache's identity (the training table's sha256, the tokenizer, the truncation and the prompt), the
backbone's files, the model the run starts from, and the code that computes the weights (each module's
digest, :mod:`aoe.training.fingerprint`: an edited loss is another run). A checkpoint of another identity is never
resumed; it is removed only when the new run writes its first checkpoint, so a job that fails
before that (a bad setting found at start) has cost nothing.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path

from aoe.config.hparams import RUN_ONLY
from aoe.data.io import sha256_file
from aoe.training.fingerprint import code_fingerprint
from aoe.util.jsonio import write_json_atomic
from aoe.util.othertrees import in_other_trees, link_tree
from aoe.util.fsutil import DiskFullError, naming_full_disk

__all__ = [
    "RESULT_NEUTRAL", "TRAINER_STATE", "FINAL", "checkpoint_dir", "run_identity", "identity_changes",
    "step_dirs", "save_checkpoint", "resume", "keep_final", "finished_model", "finished_elsewhere",
    "kept_final_changes", "restore_final", "remove_steps",
]

# settings that never change the trained weights: how a run logs and checkpoints, and the base an
# adapter is evaluated on (a change reruns the evaluations, and the train job lays out its final model)
RESULT_NEUTRAL = (*RUN_ONLY, "eval_base_dtype")
TRAINER_STATE = "trainer_state.json"
FINAL = "final"
_FINAL_RECORD = "final.json"
# how many step checkpoints are kept: the newest, and one to fall back to if the newest is damaged
KEEP = 2


def checkpoint_dir(out_dir: str | Path) -> Path:
    out_dir = Path(out_dir)
    return out_dir.with_name(out_dir.name + ".ckpt")


def _jsonable(x):
    return json.loads(json.dumps(x, sort_keys=True, default=str))


def _backbone_files(backbone_dir: str | Path) -> dict:
    """What identifies a backbone folder without reading gigabytes: its backbone.json (source, revision,
    commit) and the name and size of each file."""
    root = Path(backbone_dir)
    info = root / "backbone.json"
    return {
        "backbone.json": json.loads(info.read_text()) if info.is_file() else None,
        "files": {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*")) if p.is_file() and p.name != "backbone.json"},
    }


def run_identity(cfg, objective, cache_dir: str | Path, backbone_dir: str | Path, init_record: dict | None) -> dict:
    """Everything that decides the trained weights of a run (see the module docstring)."""
    cache = json.loads((Path(cache_dir) / "cache.json").read_text())
    train = {k: v for k, v in asdict(cfg).items() if k not in RESULT_NEUTRAL}
    return _jsonable({
        "train": train,
        "objective": asdict(objective),
        "data": {k: cache.get(k) for k in ("format", "table_sha256", "tokenizer_sha256", "max_length", "prompt", "n_examples")},
        "backbone": _backbone_files(backbone_dir),
        "init": (init_record or {}).get("aoe_config_sha256"),
        # per module, so a refused checkpoint names the module that changed (code.aoe/losses/angle.py: ...)
        "code": code_fingerprint()["modules"],
    })


def identity_changes(old: dict, new: dict, prefix: str = "") -> list[str]:
    """The leaves that differ between two identities, as ``key: old -> new`` (at most 8)."""
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += identity_changes(a, b, f"{prefix}{key}.")
        elif a is None and isinstance(b, dict):  # a part an older run did not record (code): its leaves, not one long dict
            out += [f"{line.split(':', 1)[0]}: not recorded" for line in identity_changes({}, b, f"{prefix}{key}.")]
        elif a != b:
            out.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return out[:8]


def _file_manifest(folder: Path) -> dict[str, list]:
    """{relative path: [size, sha256]} of every file under ``folder``."""
    return {str(p.relative_to(folder)): [p.stat().st_size, sha256_file(p)] for p in sorted(folder.rglob("*")) if p.is_file()}


def _damaged(folder: Path, manifest: dict[str, list]) -> str | None:
    """The first file of ``folder`` that is missing, or differs from its recorded size or sha256."""
    for rel, (size, _) in manifest.items():  # sizes first: a truncated file is found without hashing
        path = folder / rel
        if not path.is_file():
            return f"{path} is missing"
        if path.stat().st_size != size:
            return f"{path} has {path.stat().st_size} bytes, {size} were written"
    current = _file_manifest(folder)
    for rel, (_, digest) in manifest.items():
        if current[rel][1] != digest:
            return f"{folder / rel} differs from what was written (sha256)"
    return None


def step_dirs(root: Path) -> list[Path]:
    """The ``step{S}`` folders of ``root``, newest first (complete or not)."""
    found = [p for p in root.glob("step*") if p.is_dir() and p.name[4:].isdigit()] if root.is_dir() else []
    return sorted(found, key=lambda p: -int(p.name[4:]))


def _foreign(root: Path, identity: dict) -> list[Path]:
    """What ``root`` holds of another run (another identity), or of a save that never finished."""
    out = []
    for d in step_dirs(root):
        try:
            same = json.loads((d / TRAINER_STATE).read_text())["identity"] == identity
        except (OSError, ValueError, KeyError):
            same = False
        if not same:
            out.append(d)
    final = root / FINAL
    if final.exists() and _final_identity(final) != identity:
        out.append(final)
    return out


def _final_identity(final: Path) -> dict | None:
    try:
        return json.loads((final / _FINAL_RECORD).read_text())["identity"]
    except (OSError, ValueError, KeyError):
        return None


def save_checkpoint(accelerator, root: Path, identity: dict, state: dict, metrics_lines: list[str]) -> Path:
    """Model, optimizer, scheduler and RNG states (accelerate), then trainer_state.json with the loop's
    position, the metrics so far and the manifest of the files; older checkpoints beyond :data:`KEEP`
    and those of another run go."""
    step_dir = root / f"step{state['step']}"
    if accelerator.is_main_process:
        root.mkdir(parents=True, exist_ok=True)
        for stale in _foreign(root, identity) + ([step_dir] if step_dir.exists() else []):
            shutil.rmtree(stale, ignore_errors=True)
    accelerator.wait_for_everyone()
    try:
        # safetensors' SafetensorError ("... (os error 28)") is no OSError: naming_full_disk reads the errno in its text
        with naming_full_disk(step_dir, "nothing of this checkpoint (its partial folder is removed; the earlier ones stay)",
                              also="checkpoint less often (trainsets.<name>.train.checkpoint_every; 0: never)"):
            try:
                accelerator.save_state(str(step_dir))
                if accelerator.is_main_process:
                    (step_dir / "metrics.jsonl").write_text("".join(line + "\n" for line in metrics_lines))
                    files = _file_manifest(step_dir)
                    write_json_atomic({"state": state, "identity": identity, "files": files}, step_dir / TRAINER_STATE)
            except BaseException:
                # the partial checkpoint would keep the space filled (for other users' jobs too) until the next run
                shutil.rmtree(step_dir, ignore_errors=True)
                raise
    except DiskFullError:
        raise
    except (OSError, RuntimeError) as e:
        # torch's zip writer on a full disk says "[enforce fail at inline_container.cc:672] . unexpected pos
        # 23744 vs 23636", with no errno to tell a full disk from another failure
        free = shutil.disk_usage(root).free
        raise OSError(
            f"checkpoint {step_dir} could not be written ({type(e).__name__}: {e}); {free / 2**20:.0f} MiB are free "
            f"on its filesystem, and a checkpoint takes the model and optimizer states (several times the weights): "
            f"free space (or raise the quota), or checkpoint less often (trainsets.<name>.train.checkpoint_every; 0: never)"
        ) from e
    if accelerator.is_main_process:
        for old in step_dirs(root)[KEEP:]:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return step_dir


def resume(accelerator, root: Path, identity: dict, state: dict, metrics_lines: list[str], partial: bool = False) -> int | None:
    """Load the newest intact checkpoint of this identity; return its step, or None (start from step 0).

    A damaged checkpoint (a file missing, truncated or changed since it was written, or one
    accelerate cannot load) is skipped with a warning naming the file, for the one before it.
    ``partial``: the checkpoint holds the trainable parameters only (LoRA), the rest is as loaded.
    """
    say = accelerator.print
    for d in step_dirs(root):
        try:
            saved = json.loads((d / TRAINER_STATE).read_text())
        except FileNotFoundError:
            say(f"checkpoint {d}: incomplete (no {TRAINER_STATE}: the job was killed while saving it); skipped")
            continue
        except (OSError, ValueError) as err:
            say(f"WARNING: checkpoint {d}: {d / TRAINER_STATE} is unreadable ({err}); skipped")
            continue
        if saved.get("identity") != identity:
            changes = "; ".join(identity_changes(saved.get("identity") or {}, identity))
            say(f"checkpoint {d} is of another run ({changes}); not resumed, removed at this run's first checkpoint")
            continue
        damage = _damaged(d, saved["files"])
        if damage is None:
            try:
                accelerator.load_state(str(d), **({"strict": False} if partial else {}))
            except Exception as err:  # noqa: BLE001 - any load failure means: this checkpoint is unusable
                damage = f"accelerate could not load it ({type(err).__name__}: {err})"
        if damage is not None:
            say(f"WARNING: checkpoint {d} is damaged: {damage}; falling back to the one before it (it is removed at the next checkpoint)")
            continue
        state.update(saved["state"])
        metrics_lines.extend(line for line in (d / "metrics.jsonl").read_text().splitlines() if line)
        say(f"resumed from {d} at step {state['step']}")
        return state["step"]
    return None


def keep_final(model_dir: Path, root: Path, identity: dict, summary: dict) -> Path:
    """Keep the finished model folder ``model_dir`` as ``root/final`` (hard links), with its identity and summary."""
    root.mkdir(parents=True, exist_ok=True)
    tmp, final = root / f".{FINAL}.tmp", root / FINAL
    shutil.rmtree(tmp, ignore_errors=True)
    link_tree(model_dir, tmp)
    # sizes and sha256 as trained: final/ shares its files with the model folder (hard links), so
    # a write into the model folder's files (a tool saving over model.safetensors) damages it too
    write_json_atomic({"identity": identity, "summary": summary, "files": _file_manifest(tmp)}, tmp / _FINAL_RECORD)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    return final


def remove_steps(root: Path) -> None:
    """The step checkpoints, once ``final`` holds the finished model."""
    for d in step_dirs(root):
        shutil.rmtree(d, ignore_errors=True)


def finished_model(root: Path, identity: dict, repair: bool = True) -> tuple[Path, dict] | None:
    """(``root/final``, its summary) if it holds a finished model of this identity, intact; else None. ``repair``: a
    damaged one is removed (never in another tree: :func:`finished_elsewhere`)."""
    final = root / FINAL
    try:
        record = json.loads((final / _FINAL_RECORD).read_text())
    except (OSError, ValueError):
        return None
    if record.get("identity") != identity or not (final / "aoe_config.json").is_file():
        return None
    damage = _damaged(final, record["files"]) if "files" in record else f"{final / _FINAL_RECORD} lists no files to check"
    if damage is not None:
        print(f"{final} is not restored: {damage}" + ("; training again" if repair else ""), flush=True)
        if repair:
            shutil.rmtree(final, ignore_errors=True)  # the model folder's own links are separate entries: it stays as it is
        return None
    return final, record["summary"]


def finished_elsewhere(out_dir: Path, identity: dict) -> tuple[Path, dict] | None:
    """(``final``, its summary) of the first results tree beside this one that holds a finished, intact model of this
    cell and identity (:func:`aoe.util.othertrees.in_other_trees`; issue 71: a tree of one's own reuses what another
    trained); None where none does. Another tree's files are only read."""
    for other in in_other_trees(checkpoint_dir(out_dir) / FINAL, "models"):
        found = finished_model(other.parent, identity, repair=False)
        if found is not None:
            return found
    return None


def kept_final_changes(root: Path, identity: dict) -> list[str]:
    """How the finished model kept in ``root/final`` differs from this run (:func:`identity_changes`); [] where
    there is none, or it is of this run."""
    kept = _final_identity(root / FINAL)
    return identity_changes(kept, identity) if kept is not None and kept != identity else []


def restore_final(final: Path, out_dir: Path, record: dict) -> None:
    """Lay ``final`` out as the model folder ``out_dir`` (hard links), with aoe_config.json rewritten to ``record``."""
    from aoe.util.fsutil import atomic_dir

    with atomic_dir(out_dir) as work:
        work.rmdir()
        link_tree(final, work)
        (work / _FINAL_RECORD).unlink()
        # a new file, not a write through the link: final/aoe_config.json stays as trained
        (work / "aoe_config.json").unlink()
        (work / "aoe_config.json").write_text(json.dumps(record, indent=2) + "\n")
