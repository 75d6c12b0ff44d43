"""bench/gpu/cluster_cost.py reads the config a run would (presets merged over config.yaml) and costs one target.

The script's main() runs in this process: its work is the dry run it starts (a subprocess of its own); a
Python process around it only imported what this one has (its command line answers --help in
tests/test_docs.py)."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from tests.workflow_utils import REPO


@pytest.fixture(scope="module")
def cluster_cost():
    """bench/gpu/cluster_cost.py as a module (not run: its main() is), sys.path as it was after its import."""
    path = sys.path[:]
    spec = importlib.util.spec_from_file_location("bench_cluster_cost", REPO / "bench" / "gpu" / "cluster_cost.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = path
    return module


def _cost(cluster_cost, capsys, tmp_path, *args: str) -> tuple[int, str, dict | None]:
    """``python bench/gpu/cluster_cost.py ARGS --out JSON`` in the repository, through its main(): (exit status, stdout and
    stderr, the JSON). A SystemExit with a message ends the interpreter printing it, with status 1."""
    out_json = tmp_path / f"cost{len(list(tmp_path.iterdir()))}.json"
    argv = sys.argv
    sys.argv = ["bench/gpu/cluster_cost.py", *args, "--out", str(out_json)]
    capsys.readouterr()
    rc, message = 0, ""
    try:
        cluster_cost.main()
    except SystemExit as exc:
        rc, message = (exc.code or 0, "") if isinstance(exc.code, int) or exc.code is None else (1, f"{exc.code}\n")
    finally:
        sys.argv = argv
    captured = capsys.readouterr()
    return rc, captured.out + captured.err + message, json.loads(out_json.read_text()) if out_json.is_file() else None


@pytest.mark.slow
def test_cost_of_a_target_and_of_a_preset(cluster_cost, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # the presets are named relative to it, as the script's users name them
    # table2 of the paper grid trains BERT-base on STS-B and GIS: 5 objectives x 5 runs x 2 sets (SimCSE, SBERT, AoE
    # at the arXiv in-domain recipe, the STS-B example's and the reproduction report's), and the NLI AnglE model of
    # each seed the STS-B example starts from
    rc, out, record = _cost(cluster_cost, capsys, tmp_path, "table2")
    assert rc == 0, out[-3000:]
    assert record["targets"] == ["table2"]
    assert {b: v["trainings"] for b, v in record["per_backbone"].items()} == {"bert-base-uncased": 55}
    # the preset alone has no objectives: it is merged over config.yaml as snakemake does (was a KeyError)
    rc, out, record = _cost(cluster_cost, capsys, tmp_path, "--configfile", "presets/cpu-demo.yaml")
    assert rc == 0, out[-3000:]
    assert set(record["per_backbone"]) == {"minilm-l6"} and record["per_backbone"]["minilm-l6"]["trainings"] == 2
    rc, out, _ = _cost(cluster_cost, capsys, tmp_path, "--configfile", "presets/nope.yaml")
    assert rc == 1 and out.splitlines()[0].startswith("bench/gpu/cluster_cost.py: config: ") \
        and "presets/nope.yaml: no such config file" in out
