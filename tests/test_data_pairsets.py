"""NLI, GLUE, GIS and Flickr30k tables: readers on the real mirror, formats, provenance, bad input, the hub path."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import json
import shutil
import threading
from pathlib import Path

import pandas as pd
import pytest

from aoe.data.catalog import SOURCES, table_paths
from aoe.data.hub import fetch_hub_dataset, read_hub_split
from aoe.data.io import DataError
from aoe.data.mirror import mirror_sources, upstream_url
from aoe.data.nli import nli_formats, read_allnli, read_nli_csv
from aoe.data.prepare import prepare_pairset

from tests.forkserver import forked_snakemake
from tests.workflow_utils import copy_workflow

# Each Snakemake run a process of its own, forked from one that imported Snakemake once (tests/forkserver.py)
snakemake, dry_run, _snakemake_forks = forked_snakemake()

MIRRORED = [(d, s) for d, splits in SOURCES.items() for s, src in splits.items() if src.kind == "mirror"]


@pytest.mark.parametrize("dataset,split", MIRRORED)
def test_every_mirrored_split_prepares_with_its_known_size(mirror, tmp_path, dataset, split):
    manifest = prepare_pairset(dataset, split, mirror, tmp_path)
    src = SOURCES[dataset][split]
    paths = table_paths(dataset, split, str(tmp_path))
    assert set(manifest["tables"]) == set(src.formats) == set(paths)
    main = "captions" if "captions" in src.formats else "pairs"
    table = pd.read_parquet(paths[main])
    if main == "pairs" and dataset in ("snli", "mnli"):
        assert len(pd.read_parquet(paths["nli3"])) == src.rows  # labelled rows
    else:
        assert len(table) == src.rows
    # every input file is pinned and checked against the mirror's sha256
    for rel, info in manifest["origin"]["files"].items():
        assert info["sha256"] == mirror_sources()[rel]["sha256"]
    written = json.loads((tmp_path / dataset / f"{split}.manifest.json").read_text())
    assert written == manifest


def test_nli_formats_follow_the_labels(mirror, tmp_path):
    rows = read_nli_csv(mirror / "nli/snli_1.0_dev.csv", 9842)
    assert rows["label"].value_counts().to_dict() == {"entailment": 3329, "contradiction": 3278, "neutral": 3235}
    tables = nli_formats(rows)
    pairs, triplets, nli3 = tables["pairs"], tables["triplets"], tables["nli3"]
    assert len(pairs) == 3329 + 3278 and pairs["score"].sum() == 3329  # neutral dropped
    assert sorted(nli3["score"].unique()) == [0.0, 1.0, 2.0]
    label = {(r.premise, r.hypothesis): r.label for r in rows.itertuples()}
    for t in triplets.itertuples():
        assert label[(t.sentence1, t.sentence2)] == "entailment"
        assert label[(t.sentence1, t.sentence3)] == "contradiction"
    # each source pair is used at most once (SNLI repeats some hypotheses, so compare pair ids)
    ids = triplets["pair_id"].str.split("|", expand=True)
    assert ids[0].is_unique and ids[1].is_unique
    # every premise with both an entailment and a contradiction yields min(#ent, #con) triplets
    counts = rows.groupby(["premise", "label"]).size().unstack(fill_value=0)
    assert len(triplets) == int(counts[["entailment", "contradiction"]].min(axis=1).sum())


def test_mrpc_splits_are_the_scripts(mirror):
    """Issue 61: AnglE's in-domain script trains SetFit/mrpc's train split (GLUE train, 3,668 pairs), not the MSR
    release's 4,076 (fcb6223 train_angle.py:59-67): GLUE's dev (its dev_ids.tsv) is the other 408, held out."""
    from aoe.data.glue import MRPC_FILES, read_mrpc

    train, dev = (read_mrpc(mirror / MRPC_FILES[s][0], MRPC_FILES[s][1]) for s in ("train", "dev"))
    msr = read_mrpc(mirror / "glue/MRPC/msr_paraphrase_train.txt", 4076)
    dev_ids = {"-".join(line.split()) for line in (mirror / "glue/MRPC/dev_ids.tsv").read_text().splitlines() if line.strip()}
    assert (len(train), len(dev)) == (3668, 408) and set(dev["pair_id"]) == dev_ids
    assert not set(train["pair_id"]) & dev_ids
    # the MSR file split by GLUE's ids, texts and labels unchanged, in the file's order
    pd.testing.assert_frame_equal(msr[~msr["pair_id"].isin(dev_ids)].reset_index(drop=True), train)


def test_probe_sets_are_disjoint_from_the_cpu_training_set(mirror):
    """SNLI dev trains the CPU presets; SNLI test and MultiNLI dev (the NLI probe) share no pair with it."""
    train = read_nli_csv(mirror / "nli/snli_1.0_dev.csv")
    key = set(zip(train["premise"], train["hypothesis"]))
    for rel in ("nli/snli_1.0_test.csv", "nli/multinli_1.0_dev_matched.csv", "nli/multinli_1.0_dev_mismatched.csv"):
        probe = read_nli_csv(mirror / rel)
        assert not key & set(zip(probe["premise"], probe["hypothesis"])), rel
        assert not set(train["pair_id"]) & set(probe["pair_id"]), rel


def _copy(mirror: Path, rel: str, root: Path) -> Path:
    dest = root / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(mirror / rel, dest)
    return dest


def test_changed_mirror_file_is_refused_and_named(mirror, tmp_path):
    dest = _copy(mirror, "glue/MRPC/msr_paraphrase_test.txt", tmp_path / "m")
    dest.write_text(dest.read_text(encoding="utf-8-sig").replace("Amrozi", "Amrozy"), encoding="utf-8")
    with pytest.raises(DataError, match=r"msr_paraphrase_test\.txt: sha256 \w+ is not the published \w+ of glue/MRPC/msr_paraphrase_test\.txt .*; restore the published file"):
        prepare_pairset("mrpc", "test", tmp_path / "m", tmp_path / "out")
    assert not (tmp_path / "out" / "mrpc").exists()


def test_missing_mirror_file_is_named(tmp_path):
    with pytest.raises(DataError, match=r"snli_1.0_test.csv: missing from the mirror"):
        prepare_pairset("snli", "test", tmp_path, tmp_path / "out")


def test_unknown_split_and_dataset_are_named(tmp_path):
    with pytest.raises(DataError, match=r"'snli' has no split 'train'"):
        prepare_pairset("snli", "train", tmp_path)
    with pytest.raises(DataError, match=r"unknown dataset 'quora'"):
        prepare_pairset("quora", "train", tmp_path)


def test_bad_rows_name_the_line(tmp_path):
    bad = tmp_path / "nli.csv"
    bad.write_text("pairID,sentence1,sentence2,label\n1,a,b,entailment\n2,c,d,maybe\n")
    with pytest.raises(DataError, match=r"nli.csv, line 3: unknown NLI label 'maybe'"):
        read_nli_csv(bad)
    bad.write_text("pairID,sentence1,sentence2,label\n1,a,b,entailment\n2,c,d,-\n")
    with pytest.raises(DataError, match=r"1 labelled rows, expected 2"):
        read_nli_csv(bad, expected_rows=2)
    from aoe.data.glue import read_mrpc

    mrpc = tmp_path / "mrpc.txt"
    mrpc.write_text("\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tA\tB\n1\t3\t4\tonly four\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"mrpc.txt, line 3: 4 tab-separated fields"):
        read_mrpc(mrpc)


def test_allnli_train_split_with_quotes_and_unlabelled_rows(tmp_path):
    path = tmp_path / "AllNLI.tsv.gz"
    lines = [
        "split\tdataset\tfilename\tsentence1\tsentence2\tlabel",
        'train\tSNLI\tsnli_1.0_train.jsonl\tA man says "hi".\tA man speaks.\tentailment',
        'train\tSNLI\tsnli_1.0_train.jsonl\tA man says "hi".\tA man is silent.\tcontradiction',
        "train\tSNLI\tsnli_1.0_train.jsonl\tA man says \"hi\".\tA man is tall.\tneutral",
        "train\tSNLI\tsnli_1.0_train.jsonl\tA dog.\tA cat.\t-",
        "dev\tSNLI\tsnli_1.0_dev.jsonl\tA.\tB.\tentailment",
    ]
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    rows = read_allnli(path, "train")
    assert list(rows["label"]) == ["entailment", "contradiction", "neutral"]
    assert rows["premise"].iloc[0] == 'A man says "hi".'
    tables = nli_formats(rows)
    assert tables["triplets"][["sentence2", "sentence3"]].values.tolist() == [["A man speaks.", "A man is silent."]]
    with gzip.open(path, "at", encoding="utf-8") as fh:
        fh.write("train\tSNLI\tx\tonly\tfive fields\n")
    with pytest.raises(DataError, match=r"AllNLI.tsv.gz, line 7: 5 fields"):
        read_allnli(path, "train")


def test_upstream_urls_are_the_recorded_sources():
    url = upstream_url("nli/snli_1.0_dev.csv")
    assert url == "https://raw.githubusercontent.com/Tikquuss/nli_dataset/6a11ce694e69/Stanford-nli/snli_1.0_dev.csv"
    with pytest.raises(DataError, match="no recorded upstream"):
        upstream_url("nli/unknown.csv")


# ---- the hub path, against a fake hub on 127.0.0.1

COMMIT = "fedcba9876543210fedcba9876543210fedcba98"


class _Hub(http.server.ThreadingHTTPServer):
    def __init__(self, repo: str, files: dict[str, bytes]):
        self.repo, self.files, self.requests = repo, files, []
        super().__init__(("127.0.0.1", 0), _HubHandler)


class _HubHandler(http.server.BaseHTTPRequestHandler):
    server: _Hub

    def log_message(self, *args):
        pass

    def _send(self, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _route(self, head: bool) -> None:
        path = self.path.split("?")[0]
        self.server.requests.append(path)
        repo, files = self.server.repo, self.server.files
        if path.startswith(f"/api/datasets/{repo}/revision/"):
            info = {"id": repo, "sha": COMMIT, "siblings": [{"rfilename": n} for n in files]}
            return self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"}, head)
        if path.startswith(f"/api/datasets/{repo}/tree/"):
            tree = [{"type": "file", "path": n, "size": len(b), "oid": hashlib.sha1(b).hexdigest()} for n, b in files.items()]
            return self._send(200, json.dumps(tree).encode(), {"Content-Type": "application/json"}, head)
        prefix = f"/datasets/{repo}/resolve/{COMMIT}/"
        name = path[len(prefix):] if path.startswith(prefix) else None
        if name not in files:
            code = "RepoNotFound" if f"/{repo}/" not in path else "EntryNotFound"
            return self._send(404, b"", {"X-Error-Code": code}, head)
        data = files[name]
        headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{hashlib.sha256(data).hexdigest()}"'}
        self._send(200, data, headers, head)

    def do_HEAD(self):
        self._route(True)

    def do_GET(self):
        self._route(False)


def _parquet_bytes(df: pd.DataFrame, tmp: Path) -> bytes:
    p = tmp / "x.parquet"
    df.to_parquet(p, index=False)
    return p.read_bytes()


@pytest.fixture
def gis_hub(tmp_path, monkeypatch):
    def split(n: int, tag: str) -> pd.DataFrame:
        return pd.DataFrame(
            {"text1": [f"{tag} issue {i}" for i in range(n)], "text2": [f"{tag} other {i}" if i % 7 else "" for i in range(n)], "label": [i % 2 for i in range(n)]}
        )

    files = {
        "data/train-00000-of-00001.parquet": _parquet_bytes(split(18565, "train"), tmp_path),
        "data/valid-00000-of-00001.parquet": _parquet_bytes(split(1547, "valid"), tmp_path),
        "data/test-00000-of-00001.parquet": _parquet_bytes(split(1548, "test"), tmp_path),
        "README.md": b"# card\n",
    }
    server = _Hub("WhereIsAI/github-issue-similarity", files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    import huggingface_hub.constants as const

    monkeypatch.setattr(const, "ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setattr(const, "HUGGINGFACE_CO_URL_TEMPLATE", f"http://127.0.0.1:{server.server_port}" + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("AOE_OFFLINE", raising=False)
    yield server
    server.shutdown()


def test_hub_dataset_is_pinned_and_prepared(gis_hub, tmp_path):
    snap = tmp_path / "hub" / "gis"
    record = fetch_hub_dataset("WhereIsAI/github-issue-similarity", "main", snap)
    assert record["commit"] == COMMIT
    assert set(record["files"]) == {f for f in gis_hub.files if f.endswith(".parquet")}  # the card is not data
    rows, files = read_hub_split(snap, "valid")
    assert files == ["data/valid-00000-of-00001.parquet"] and len(rows) == 1547
    manifest = prepare_pairset("gis", "test", snap, tmp_path / "data")
    table = pd.read_parquet(tmp_path / "data" / "gis" / "test.parquet")
    empty = sum(1 for i in range(1548) if i % 7 == 0)
    assert manifest["tables"]["pairs"]["dropped_empty"] == empty and len(table) == 1548 - empty
    assert manifest["origin"]["commit"] == COMMIT
    assert set(table["score"]) == {0.0, 1.0}


def test_hub_split_of_the_wrong_size_is_refused(gis_hub, tmp_path):
    gis_hub.files["data/test-00000-of-00001.parquet"] = _parquet_bytes(
        pd.DataFrame({"text1": ["a"], "text2": ["b"], "label": [1]}), tmp_path
    )
    snap = tmp_path / "hub" / "gis"
    fetch_hub_dataset("WhereIsAI/github-issue-similarity", "main", snap)
    with pytest.raises(DataError, match=r"1 rows in gis/test, expected 1548"):
        prepare_pairset("gis", "test", snap, tmp_path / "data")


def test_hub_offline_or_missing_repo_is_named(gis_hub, tmp_path, monkeypatch):
    with pytest.raises(DataError, match=r"WhereIsAI/nothing@main: cannot fetch"):
        fetch_hub_dataset("WhereIsAI/nothing", "main", tmp_path / "x")
    assert not (tmp_path / "x").exists()
    monkeypatch.setenv("AOE_OFFLINE", "1")
    with pytest.raises(DataError, match="AOE_OFFLINE is set"):
        fetch_hub_dataset("WhereIsAI/github-issue-similarity", "main", tmp_path / "y")


# ---- the DAG: mirror vs download


@pytest.mark.slow
def test_without_a_mirror_the_dag_downloads_each_source(tmp_path):
    wd = copy_workflow(tmp_path / "wf")
    env = {"AOE_DATA_MIRROR": ""}
    targets = ["results/data/snli/dev.triplets.parquet", "results/data/gis/test.parquet", "results/data/allnli/train.nli3.parquet"]
    out = snakemake(wd, "-n", "--cores", "1", *targets, env=env)
    assert out.returncode == 0, out.stdout
    assert "results/downloads/files/nli/snli_1.0_dev.csv" in out.stdout
    assert "results/downloads/files/sbert/AllNLI.tsv.gz" in out.stdout
    assert "results/downloads/hub/gis" in out.stdout
    bad = snakemake(wd, "-n", "--cores", "1", "results/data/snli/train.parquet", env=env)
    assert bad.returncode != 0 and "no split 'train'" in bad.stdout


@pytest.mark.slow
def test_with_the_mirror_nothing_is_downloaded(tmp_path, mirror):
    # the files are laid out from the mirror (rule download_file), with downloads switched off
    wd = copy_workflow(tmp_path / "wf")
    out = snakemake(wd, "--cores", "1", "results/data/snli/dev.triplets.parquet", "results/data/mrpc/test.parquet",
                    env={"AOE_DATA_MIRROR": str(mirror), "AOE_OFFLINE": "1"})
    assert out.returncode == 0, out.stdout[-3000:]
    log = (wd / "results/logs/download_file/nli/snli_1.0_dev.csv.log").read_text()
    assert f"copied from the data mirror: {mirror / 'nli/snli_1.0_dev.csv'}" in log


@pytest.mark.slow
def test_gis_statistics_and_figures_from_the_hub_through_the_dag(gis_hub, tmp_path, mirror):
    """download_hub -> prepare_pairs -> gis_stats -> gis_figures, against the fake hub."""
    wd = copy_workflow(tmp_path / "wf")
    (wd / "gis.yaml").write_text("analysis:\n  gis: {tokenizer_backbone: minilm-l6}\n")
    env = {"AOE_DATA_MIRROR": str(mirror), "HF_ENDPOINT": f"http://127.0.0.1:{gis_hub.server_port}", "HF_HUB_DISABLE_XET": "1"}
    out = snakemake(wd, "--cores", "2", "results/figures/gis_fig9_token_lengths.png", "results/figures/gis_fig8_ngram_overlap.pdf",
                    "--configfile", "gis.yaml", env=env)
    assert out.returncode == 0, out.stdout[-4000:]
    stats = json.loads((wd / "results/analysis/gis/stats.json").read_text())
    empty = {n: sum(1 for i in range(n) if i % 7 == 0) for n in (18565, 1547, 1548)}
    sizes = {s: stats["table7"][s]["total"] if "total" in stats["table7"][s] else None for s in stats["table7"]}
    assert sizes["train"] == 18565 - empty[18565] and sizes["valid"] == 1547 - empty[1547], sizes
    for ext in ("pdf", "png"):
        assert (wd / f"results/figures/gis_fig8_ngram_overlap.{ext}").stat().st_size > 1000
    manifest = json.loads((wd / "results/data/gis/train.manifest.json").read_text())
    assert manifest["origin"]["commit"] == COMMIT
