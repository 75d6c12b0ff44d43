"""A fake Hugging Face hub on 127.0.0.1 (no network) for the model download paths.

It serves, for each repository id given, the three endpoints huggingface_hub uses to fetch
files at a pinned commit: ``/api/models/<id>/revision/<rev>`` (the commit and the file list),
``/api/models/<id>/tree/<rev>`` (the listing snapshot_download reads) and
``/<id>/resolve/<commit>/<file>`` (HEAD and GET, with the commit and ETag headers). Unknown
repositories answer 404 RepoNotFound, unknown files 404 EntryNotFound, as the hub does. Each
repository's commit is a fixed digest of its id. Requests are logged.

It also takes uploads (aoe.publish.hub's push): ``POST /api/repos/create`` (a new repository, or 409 for one
that exists, as the hub), ``POST /api/validate-yaml`` (a README's front matter: 400 with the YAML
error), ``POST /api/models/<id>/preupload/<rev>`` (every file "regular": sent inline) and ``POST
/api/models/<id>/commit/<rev>`` (the ndjson commit: its files are stored in ``uploads[repo id]``, as
bytes, and served by the download endpoints afterwards). ``auth`` records each request's
Authorization header, so a test can check that the token went to the hub and nowhere else.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import json
import tempfile
import threading
from pathlib import Path

import yaml

from aoe.config.hparams import YAML_LOADER


def commit_of(repo_id: str) -> str:
    return hashlib.sha1(repo_id.encode()).hexdigest()


class FakeHub(http.server.ThreadingHTTPServer):
    def __init__(self, repos: dict[str, dict[str, Path]]):
        self.repos = repos
        self.requests: list[tuple[str, str]] = []
        self.auth: list[str | None] = []
        self.created: list[dict] = []  # the create_repo payloads
        self.uploads: dict[str, dict[str, bytes]] = {}  # repo id -> {path: content} of every commit
        self.commits: list[dict] = []  # repo id, header and paths of each commit
        self._files_dir = Path(tempfile.mkdtemp(prefix="fake-hub-"))
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

    def _error(self, status: int, message: str, **extra) -> None:
        body = json.dumps({"error": message, **extra}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        path = self.path.split("?")[0]
        server = self.server
        server.requests.append(("POST", path))
        server.auth.append(self.headers.get("Authorization"))
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if server.auth[-1] is None:
            return self._error(401, "Invalid credentials in Authorization header")
        if path == "/api/repos/create":
            payload = json.loads(body)
            server.created.append(payload)
            repo_id = f"{payload['organization']}/{payload['name']}" if payload.get("organization") else payload["name"]
            if repo_id in server.repos or repo_id in server.uploads:
                # as the hub: the existing repository's url with the error (create_repo(exist_ok=True) returns it)
                return self._error(409, "You already created this model repo", url=f"{server.endpoint}/{repo_id}")
            server.uploads[repo_id] = {}
            return self._json({"url": f"{server.endpoint}/{repo_id}", "name": repo_id})
        if path == "/api/validate-yaml":
            content = json.loads(body)["content"]
            if content.startswith("---"):
                try:
                    yaml.load(content.split("---")[1], Loader=YAML_LOADER)
                except yaml.YAMLError as exc:
                    return self._error(400, "invalid YAML", errors=[{"message": str(exc)}])
            return self._json({"warnings": []})
        if path.startswith("/api/models/"):
            rest = path[len("/api/models/"):]
            for marker in ("/preupload/", "/commit/"):
                if marker in rest:
                    repo_id = rest.split(marker)[0]
                    if repo_id not in server.uploads:
                        return self._missing("RepoNotFound")
                    if marker == "/preupload/":
                        files = json.loads(body)["files"]
                        return self._json({"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]})
                    items = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
                    paths = []
                    for item in items:
                        if item["key"] == "file":
                            value = item["value"]
                            server.uploads[repo_id][value["path"]] = base64.b64decode(value["content"])
                            paths.append(value["path"])
                    self._serve_uploads(repo_id)
                    commit = hashlib.sha1(json.dumps(sorted(paths)).encode() + str(len(server.commits)).encode()).hexdigest()
                    server.commits.append({"repo_id": repo_id, "header": items[0]["value"], "paths": paths, "oid": commit})
                    return self._json({"commitUrl": f"{server.endpoint}/{repo_id}/commit/{commit}", "commitOid": commit,
                                       "pullRequestUrl": None})
        return self._missing("RepoNotFound")

    def _serve_uploads(self, repo_id: str) -> None:
        """The uploaded files, downloadable as a repository of ``repos`` (at its fixed commit)."""
        folder = self.server._files_dir / repo_id
        files = {}
        for name, data in self.server.uploads[repo_id].items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
            files[name] = folder / name
        self.server.repos[repo_id] = files

    def _route(self, head: bool) -> None:
        path = self.path.split("?")[0]
        self.server.requests.append(("HEAD" if head else "GET", path))
        self.server.auth.append(self.headers.get("Authorization"))
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
        import shutil

        shutil.rmtree(server._files_dir, ignore_errors=True)
