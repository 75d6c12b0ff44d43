"""A fake Hugging Face hub on 127.0.0.1 (no network) for the model download paths.

It serves, for each repository id given, the three endpoints huggingface_hub uses to fetch
files at a pinned commit: ``/api/models/<id>/revision/<rev>`` (the commit and the file list),
``/api/models/<id>/tree/<rev>`` (the listing snapshot_download reads) and
``/<id>/resolve/<commit>/<file>`` (HEAD and GET, with the commit and ETag headers). Unknown
repositories answer 404 RepoNotFound, unknown files 404 EntryNotFound, as the hub does. Each
repository's commit is a fixed digest of its id. Requests are logged.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import threading
from pathlib import Path


def commit_of(repo_id: str) -> str:
    return hashlib.sha1(repo_id.encode()).hexdigest()


class FakeHub(http.server.ThreadingHTTPServer):
    def __init__(self, repos: dict[str, dict[str, Path]]):
        self.repos = repos
        self.requests: list[tuple[str, str]] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: FakeHub

    def log_message(self, *args):
        pass

    def _json(self, obj) -> None:
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _missing(self, code: str) -> None:
        self.send_response(404)
        self.send_header("X-Error-Code", code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _route(self, head: bool) -> None:
        path = self.path.split("?")[0]
        self.server.requests.append(("HEAD" if head else "GET", path))
        repos = self.server.repos
        if path.startswith("/api/models/"):
            rest = path[len("/api/models/"):]
            for marker in ("/revision/", "/tree/"):
                if marker in rest:
                    repo_id = rest.split(marker)[0]
                    files = repos.get(repo_id)
                    if files is None:
                        return self._missing("RepoNotFound")
                    if marker == "/tree/":
                        return self._json([
                            {"type": "file", "path": n, "size": p.stat().st_size, "oid": hashlib.sha1(p.read_bytes()).hexdigest()}
                            for n, p in files.items()
                        ])
                    return self._json({"id": repo_id, "sha": commit_of(repo_id), "siblings": [{"rfilename": n} for n in files]})
            return self._missing("RepoNotFound")
        repo_id, _, rest = path.lstrip("/").partition("/resolve/")
        files = repos.get(repo_id)
        if files is None:
            return self._missing("RepoNotFound")
        commit, _, name = rest.partition("/")
        if commit != commit_of(repo_id) or name not in files:
            return self._missing("EntryNotFound")
        data = files[name].read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Repo-Commit", commit)
        self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        self.end_headers()
        if not head:
            self.wfile.write(data)

    def do_HEAD(self):
        self._route(head=True)

    def do_GET(self):
        self._route(head=False)


def folder_files(folder: Path) -> dict[str, Path]:
    """A repository's files: every file at the top of ``folder``."""
    return {p.name: p for p in Path(folder).iterdir() if p.is_file()}


@contextlib.contextmanager
def serve(monkeypatch, repos: dict[str, dict[str, Path]]):
    """Serve ``repos`` ({repo id: {file name: local file}}) and point huggingface_hub at it."""
    import huggingface_hub.constants as const

    server = FakeHub(repos)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
    monkeypatch.setattr(const, "ENDPOINT", server.endpoint)
    monkeypatch.setattr(const, "HUGGINGFACE_CO_URL_TEMPLATE", server.endpoint + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(const, "HF_HUB_OFFLINE", False)
    try:
        yield server
    finally:
        server.shutdown()
