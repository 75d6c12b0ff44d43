"""Tests for aoe.data.download against a scripted HTTP server on 127.0.0.1.

No traffic leaves the machine: each test starts its own ``http.server`` on a
free local port and scripts how every request for a path is answered
(full body, an error status, or a connection dropped mid-body).
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from aoe.data import sts
from aoe.data.download import SENTEVAL_ARCHIVE_URL, download_file, fetch_senteval_archive
from aoe.data.io import DataError

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


def test_archive_url_constant() -> None:
    assert SENTEVAL_ARCHIVE_URL.startswith("https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/")
    assert SENTEVAL_ARCHIVE_URL.endswith("/senteval.tar")


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
    with pytest.raises(DataError, match=f"no data mirror was given and downloads are disabled.*{variable}"):
        fetch_senteval_archive(server.url("/senteval.tar"), tmp_path / "cache")
    assert server.log == []


# ---------------------------------------------------------------- archive


def _synthetic_tar(prefix: str, extra: tuple[tuple[str, bytes], ...] = ()) -> bytes:
    """A SentEval-like tar with an STS-B dev split (2 pairs) under ``prefix``, plus ``extra`` members."""
    base = f"{prefix}/" if prefix else ""
    files = {
        f"{base}STS/STSBenchmark/sts-dev.csv": (
            b"g\tf\t2012\t1\t4.0\ta  man\ta woman\ng\tf\t2012\t2\t1.0\tx\ty\n"
        ),
        f"{base}SICK/SICK_trial.txt": b"pair_ID\tsentence_A\tsentence_B\trelatedness_score\n",
        f"{base}README.md": b"readme\n",
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in [*files.items(), *extra]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


# "": the real senteval.tar has STS/, SICK/, ... at its root.
@pytest.mark.parametrize("prefix", ["", "SentEval/data/downstream", "downstream"])
def test_fetch_senteval_archive(
    server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    server.files["/senteval.tar"] = _synthetic_tar(prefix)
    cache = tmp_path / "cache"
    downstream = fetch_senteval_archive(server.url("/senteval.tar"), cache)
    assert downstream == (cache / "senteval.tar.d" / prefix if prefix else cache / "senteval.tar.d")
    assert (downstream / "STS" / "STSBenchmark" / "sts-dev.csv").is_file()
    assert sorted(p.name for p in cache.iterdir()) == ["senteval.tar", "senteval.tar.d"]

    monkeypatch.setitem(sts.EXPECTED_ROWS, ("stsb", "dev"), 2)
    df = sts.read_sts(downstream, "stsb", "dev")
    assert list(df["sentence1"]) == ["a man", "x"] and list(df["score"]) == [4.0, 1.0]

    # Already extracted: no download, and so it works offline too.
    monkeypatch.setenv("AOE_OFFLINE", "1")
    assert fetch_senteval_archive(server.url("/senteval.tar"), cache) == downstream
    assert len(server.log) == 1


@pytest.mark.parametrize("unsafe", ["../evil", "/tmp/aoe-absolute-evil", "downstream/../../evil"])
def test_fetch_rejects_unsafe_member(server: ScriptedServer, tmp_path: Path, unsafe: str) -> None:
    server.files["/senteval.tar"] = _synthetic_tar("downstream", extra=((unsafe, b"pwned\n"),))
    cache = tmp_path / "cache"
    with pytest.raises(DataError, match="unsafe member") as info:
        fetch_senteval_archive(server.url("/senteval.tar"), cache)
    assert unsafe in str(info.value)
    assert not (tmp_path / "evil").exists() and not Path("/tmp/aoe-absolute-evil").exists()
    # Nothing extracted, no staging leftovers; only the downloaded archive stays.
    assert [p.name for p in cache.iterdir()] == ["senteval.tar"]


def test_fetch_rejects_symlink_member(server: ScriptedServer, tmp_path: Path) -> None:
    buffer = io.BytesIO(_synthetic_tar("downstream"))
    with tarfile.open(fileobj=buffer, mode="a") as tar:
        link = tarfile.TarInfo("downstream/link")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tar.addfile(link)
    server.files["/senteval.tar"] = buffer.getvalue()
    with pytest.raises(DataError, match="not a regular file or directory"):
        fetch_senteval_archive(server.url("/senteval.tar"), tmp_path / "cache")


def test_fetch_archive_without_sts(server: ScriptedServer, tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("other/file.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    server.files["/senteval.tar"] = buffer.getvalue()
    cache = tmp_path / "cache"
    with pytest.raises(DataError, match="no SentEval downstream folder"):
        fetch_senteval_archive(server.url("/senteval.tar"), cache)
    assert [p.name for p in cache.iterdir()] == ["senteval.tar"]


def test_fetch_corrupt_archive(server: ScriptedServer, tmp_path: Path) -> None:
    server.files["/senteval.tar"] = b"this is not a tar archive" * 100
    cache = tmp_path / "cache"
    with pytest.raises(DataError, match="cannot extract") as info:
        fetch_senteval_archive(server.url("/senteval.tar"), cache)
    assert str(cache / "senteval.tar") in str(info.value)
