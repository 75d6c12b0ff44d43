"""A model evaluated as downloaded: a backbone (its own embedding or a pretrained variant's pooling or prompt)
or a published checkpoint, each a cell that trains nothing, and the pooling and prompt it is scored with.
"""

from __future__ import annotations

from pathlib import Path

from aoe.config.cells import NO_TRAINSET, PRETRAINED, PRETRAINED_SEED, Cell
from aoe.config.errors import ConfigError

__all__ = [
    "pretrained_cell",
    "pretrained_variants",
    "pretrained_embedding",
    "pretrained_pooling",
    "released_checkpoints",
]


def released_checkpoints(config: dict) -> dict[str, dict]:
    """config released.checkpoints: published models evaluated as downloaded (AoE Table 8)."""
    return (config.get("released") or {}).get("checkpoints") or {}


def pretrained_variants(config: dict) -> dict[str, dict]:
    """config evaluation.pretrained_variants: a backbone as downloaded under another pooling or prompt
    than its own; a variant's name is the pretrained cell's third folder (``none``: its own)."""
    return config["evaluation"].get("pretrained_variants") or {}


def pretrained_cell(backbone: str, variant: str = NO_TRAINSET) -> Cell:
    return Cell(backbone, PRETRAINED, variant, PRETRAINED_SEED)


def pretrained_embedding(config: dict, backbone: str, variant: str = NO_TRAINSET) -> tuple[str, str | None]:
    """(pooling, prompt) of a backbone evaluated as downloaded: its own (:func:`pretrained_pooling`, and
    backbones.<name>.prompt), or a pretrained variant's, where a key the variant leaves out keeps the backbone's."""
    spec = config["backbones"][backbone]
    own = {"pooling": pretrained_pooling(config, backbone)[0], "prompt": spec.get("prompt")}
    if variant != NO_TRAINSET:
        own.update(pretrained_variants(config)[variant])
    return own["pooling"], own["prompt"]


def pretrained_pooling(config: dict, backbone: str, variant: str = NO_TRAINSET) -> tuple[str, str]:
    """(pooling, what set it) of a backbone evaluated as downloaded: a pretrained variant's pooling, else
    ``backbones.<name>.pooling`` where the config names one, else the pooling its folder's sentence-transformers
    files name (``its own, <file>``: :mod:`aoe.config.folder_pooling`; issue 70), else the code default (CLS, the
    papers', which a raw transformers folder such as BERT-base keeps)."""
    from aoe.config.folder_pooling import FolderPoolingError, backbone_folder_pooling
    from aoe.config.hparams import backbone_pooling

    if variant != NO_TRAINSET and "pooling" in pretrained_variants(config)[variant]:
        return pretrained_variants(config)[variant]["pooling"], f"evaluation.pretrained_variants.{variant}.pooling"
    if "pooling" in config["backbones"][backbone]:
        return backbone_pooling(config, backbone)
    try:
        own = backbone_folder_pooling(config, backbone)
    except FolderPoolingError as err:  # at planning, as every config error: the key, the file, the fix
        source = next((k for k in ("package", "path") if config["backbones"][backbone].get(k)), "path")
        raise ConfigError(f"backbones.{backbone}.{source} (evaluated as downloaded, with no pooling named): {err}") from None
    if own is not None:
        return own.pooling, f"its own, {Path(own.file).parent.name}/{Path(own.file).name} mode {own.mode}"
    return backbone_pooling(config, backbone)
