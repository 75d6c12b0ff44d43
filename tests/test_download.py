"""Tests for aoe.data.download against a scripted HTTP server on 127.0.0.1.

No traffic leaves the machine: each test starts its own ``http.server`` on a
free local port and scripts how every request for a path is answered
(full body, an error status, or a connection dropped mid-body).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from aoe.data import download as published
from aoe.data.download import download_file
from aoe.data.io import DataError
from aoe.data.mirror import mirror_sources

BODY = os.urandom(300_000)  # several download chunks, so a drop leaves a partial file to resume

# Scripted answers: "ok" serves the body honouring Range, "ok-no-range" always
# sends it whole, "drop" announces the full length but closes halfway, an int
# is an error status.
Behaviour = str | int


class ScriptedServer:
    """Serves ``files`` on 127.0.0.1; each path answers with its behaviours in order, the last repeating."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.script: dict[str, list[Behaviour]] = {}
        self.log: list[tuple[str, str | None]] = []  # (path, Range header) per request
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.log.append((self.path, self.headers.get("Range")))
                steps = server.script.get(self.path, ["ok"])
                behaviour = steps.pop(0) if len(steps) > 1 else steps[0]
                body = server.files.get(self.path)
                if isinstance(behaviour, int) or body is None:
                    self.send_error(behaviour if isinstance(behaviour, int) else 404)
                    return
                start = 0
                range_header = self.headers.get("Range")
                if behaviour == "ok" and range_header:
                    start = int(range_header.removeprefix("bytes=").rstrip("-"))
                    if start >= len(body):
                        self.send_error(416)
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(body) - start))
                self.end_headers()
                if behaviour == "drop":
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body[start:])

            def log_message(self, format: str, *args: object) -> None:
                pass  # keep pytest output clean

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        # A short poll interval keeps shutdown() (run per test) from adding 0.5 s each.
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def url(self, path: str) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}{path}"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedServer]:
    for name in ("HF_HUB_OFFLINE", "AOE_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    # A proxy configured in the environment must not intercept loopback traffic.
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    scripted = ScriptedServer()
    scripted.thread.start()
    yield scripted
    scripted.httpd.shutdown()
    scripted.httpd.server_close()


FAST = {"backoff": 0.01, "timeout": 5}


def test_normal_download(server: ScriptedServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = BODY
    dest = tmp_path / "sub" / "f.bin"
    sha = hashlib.sha256(BODY).hexdigest()
    assert download_file(server.url("/f.bin"), dest, sha256=sha, **FAST) == dest
    assert dest.read_bytes() == BODY
    assert not (tmp_path / "sub" / "f.bin.part").exists()
    # A finished dest is reused without another request.
    download_file(server.url("/f.bin"), dest, sha256=sha, **FAST)
    assert len(server.log) == 1


def test_retry_after_503(server: ScriptedServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = BODY
    server.script["/f.bin"] = [503, "ok"]
    dest = download_file(server.url("/f.bin"), tmp_path / "f.bin", **FAST)
    assert dest.read_bytes() == BODY
    assert len(server.log) == 2


def test_retries_exhausted(server: ScriptedServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = BODY
    server.script["/f.bin"] = [500]
    url = server.url("/f.bin")
    with pytest.raises(DataError) as info:
        download_file(url, tmp_path / "f.bin", retries=2, **FAST)
    message = str(info.value)
    assert url in message and "500" in message and "3 attempts" in message
    assert len(server.log) == 3
    assert not (tmp_path / "f.bin").exists()


def test_dropped_connection_resumes(server: ScriptedServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = BODY
    server.script["/f.bin"] = ["drop", "ok"]
    dest = download_file(server.url("/f.bin"), tmp_path / "f.bin", **FAST)
    assert dest.read_bytes() == BODY
    assert len(server.log) == 2
    first_range, resume_range = server.log[0][1], server.log[1][1]
    assert first_range is None
    assert resume_range is not None and resume_range != "bytes=0-"


def test_dropped_connection_restarts_without_range_support(server: ScriptedServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = BODY
    server.script["/f.bin"] = ["drop", "ok-no-range"]
    dest = download_file(server.url("/f.bin"), tmp_path / "f.bin", **FAST)
    assert dest.read_bytes() == BODY
    assert server.log[1][1] is not None  # resume was asked for, server sent the whole body instead


def test_stale_part_larger_than_remote_restarts(server: ScriptedServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = BODY
    (tmp_path / "f.bin.part").write_bytes(b"x" * (len(BODY) + 10))
    dest = download_file(server.url("/f.bin"), tmp_path / "f.bin", **FAST)
    assert dest.read_bytes() == BODY
    assert [r for _, r in server.log] == [f"bytes={len(BODY) + 10}-", None]


def test_404_is_not_retried(server: ScriptedServer, tmp_path: Path) -> None:
    url = server.url("/missing.tar")
    with pytest.raises(DataError) as info:
        download_file(url, tmp_path / "missing.tar", **FAST)
    assert url in str(info.value) and "404" in str(info.value)
    assert len(server.log) == 1


def test_checksum_mismatch_removes_file(server: ScriptedServer, tmp_path: Path) -> None:
    server.files["/f.bin"] = BODY
    dest = tmp_path / "f.bin"
    wrong = "0" * 64
    with pytest.raises(DataError) as info:
        download_file(server.url("/f.bin"), dest, sha256=wrong, **FAST)
    message = str(info.value)
    assert str(dest) in message and wrong in message and hashlib.sha256(BODY).hexdigest() in message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("variable", ["HF_HUB_OFFLINE", "AOE_OFFLINE"])
def test_offline_refuses(
    server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "1")
    with pytest.raises(DataError, match=f"downloads are disabled.*{variable}"):
        download_file(server.url("/f.bin"), tmp_path / "f.bin", **FAST)
    with pytest.raises(DataError, match=f"downloads are disabled.*{variable}"):
        published.fetch_published("glue/f.bin", tmp_path / "g.bin", url=server.url("/f.bin"), sha256=None, mirror=None)
    assert server.log == []


# ---------------------------------------------------------------- mirror or download: one place, same bytes

SHA = hashlib.sha256(BODY).hexdigest()


def _full_mirror(root: Path, relpath: str, body: bytes) -> Path:
    (root / "senteval/downstream/STS").mkdir(parents=True)
    (root / "MANIFEST.tsv").write_text("path\tlines\tbytes\tsha256\tsource\n")
    (root / relpath).parent.mkdir(parents=True, exist_ok=True)
    (root / relpath).write_bytes(body)
    return root


@pytest.mark.parametrize("relpath", ["glue/extra/pairs.txt", "senteval/downstream/EXTRA/items.txt"])  # files the table does not pin: sha256 governs
def test_fetch_published_copies_the_mirror_file_without_downloading(server, tmp_path, monkeypatch, relpath):
    mirror = _full_mirror(tmp_path / "mirror", relpath, BODY)
    (mirror / relpath).chmod(0o444)  # a read-only mirror: the copy is ours, with the umask's mode
    old = os.umask(0o022)
    try:
        origin = published.fetch_published(relpath, tmp_path / "out" / relpath, url=server.url("/f"), sha256=SHA, mirror=str(mirror))
    finally:
        os.umask(old)
    out = tmp_path / "out" / relpath
    assert origin == f"copied from the data mirror: {mirror / relpath}"
    assert out.read_bytes() == BODY and (out.stat().st_mode & 0o777) == 0o644 and out.stat().st_ino != (mirror / relpath).stat().st_ino
    assert server.log == [] and [p.name for p in out.parent.iterdir()] == [out.name]


def test_fetch_published_reads_a_bare_downstream_folder_from_the_environment(server, tmp_path, monkeypatch):
    downstream = tmp_path / "downstream"
    (downstream / "STS").mkdir(parents=True)
    (downstream / "STS" / "f.csv").write_bytes(BODY)
    monkeypatch.setenv("AOE_DATA_MIRROR", str(downstream))
    out = tmp_path / "out.csv"
    assert published.fetch_published("senteval/downstream/STS/f.csv", out, url=server.url("/f"), sha256=SHA, mirror=None).startswith("copied")
    # a bare downstream folder holds only SentEval's files: the others are downloaded
    server.files["/g"] = BODY
    assert published.fetch_published("glue/x.txt", tmp_path / "x.txt", url=server.url("/g"), sha256=SHA, mirror=None) == f"downloaded from {server.url('/g')}"
    assert (tmp_path / "x.txt").read_bytes() == BODY


def test_fetch_published_downloads_what_the_mirror_lacks(server, tmp_path, monkeypatch):
    monkeypatch.delenv("AOE_DATA_MIRROR", raising=False)
    server.files["/f"] = BODY
    out = tmp_path / "d" / "f.bin"
    assert published.fetch_published("glue/f.bin", out, url=server.url("/f"), sha256=SHA, mirror=None) == f"downloaded from {server.url('/f')}"
    mirror = _full_mirror(tmp_path / "mirror", "glue/other.txt", b"x")
    assert published.fetch_published("glue/f2.bin", tmp_path / "f2.bin", url=server.url("/f"), sha256=SHA, mirror=str(mirror)).startswith("downloaded")
    assert out.read_bytes() == BODY and len(server.log) == 2


def test_fetch_published_refuses_a_damaged_mirror_file(server, tmp_path):
    relpath = "glue/MRPC/msr_paraphrase_test.txt"
    mirror = _full_mirror(tmp_path / "mirror", relpath, BODY[:-1] + b"!")
    out = tmp_path / "out.txt"
    with pytest.raises(DataError) as err:
        published.fetch_published(relpath, out, url=server.url("/f"), sha256=SHA, mirror=str(mirror))
    assert str(err.value).startswith(f"{mirror / relpath}: sha256 ") and f"is not the published {mirror_sources()[relpath]['sha256']} of {relpath}" in str(err.value)
    assert not out.exists() and server.log == [] and list(tmp_path.glob(".out.txt.*")) == []


def test_a_tree_of_its_own_copies_what_another_tree_downloaded(server, tmp_path, monkeypatch):
    # issue 71: without a mirror, a new results tree downloaded every published file again
    monkeypatch.delenv("AOE_DATA_MIRROR", raising=False)
    server.files["/f"] = BODY
    demo, mine, other = (tmp_path / "results" / t / "downloads/files/glue/x.txt" for t in ("cpu-demo", "mine", "other"))
    assert published.fetch_published("glue/x.txt", demo, url=server.url("/f"), sha256=SHA, mirror=None).startswith("downloaded")
    fetched = len(server.log)
    assert published.fetch_published("glue/x.txt", mine, url=server.url("/f"), sha256=SHA, mirror=None) == (
        f"copied from another results tree's download: {demo}")
    assert mine.read_bytes() == BODY and len(server.log) == fetched  # nothing asked of the server
    # another file under the same name (a changed sha256) is downloaded, never taken
    server.files["/g"] = BODY + b"!"
    sha = hashlib.sha256(BODY + b"!").hexdigest()
    assert published.fetch_published("glue/x.txt", other, url=server.url("/g"), sha256=sha, mirror=None).startswith("downloaded")
