"""bench/ stays grouped by the question each script answers (issue 72): every script in a group folder beside
its README, which names it; every committed result in its group's results/; one harness for the options and
workers of a timed comparison (bench/_common.py), no script-local copy of it."""

from __future__ import annotations

import re

from tests.workflow_utils import REPO

BENCH = REPO / "bench"
GROUPS = sorted(p for p in BENCH.iterdir() if p.is_dir() and p.name not in ("out", "__pycache__"))


def test_every_script_lives_in_a_group_that_names_it():
    """No script at bench/'s top but the shared harness and the old paths' one line (links to bench/_moved.*); each
    group's README names each of its scripts, and the top README links each group."""
    assert sorted(p.name for p in BENCH.iterdir() if p.is_file() and not p.is_symlink()) == ["README.md", "_common.py", "_moved.py", "_moved.sh"]
    top = (BENCH / "README.md").read_text()
    for group in GROUPS:
        assert f"]({group.name}/README.md)" in top, f"bench/README.md does not link {group.name}/"
        pages = "".join(p.read_text() for p in group.glob("*.md"))
        for script in [*group.glob("*.py"), *group.glob("*.sh")]:
            assert f"`{script.name}`" in pages, f"bench/{group.name}/'s pages do not name {script.name}"


def test_committed_results_sit_in_their_groups_results_folder():
    """Every file under a group but its scripts and pages is one of its results/; no bench/results/ any more."""
    assert not (BENCH / "results").exists()
    for group in GROUPS:
        stray = [p.name for p in group.iterdir() if p.is_file() and p.suffix not in (".py", ".sh", ".md")]
        assert not stray, f"bench/{group.name}/: {stray} belong in results/"


def test_the_worker_preamble_is_written_once():
    """A timed comparison's --worker / RESULT handshake lives in bench/_common.py only."""
    copies = [str(p.relative_to(REPO)) for p in BENCH.glob("*/*.py")
              if re.search(r"""print\(\s*["']RESULT """, p.read_text())]
    assert not copies, f"a script-local copy of _common.serve_worker: {copies}"
    assert 'print("RESULT "' in (BENCH / "_common.py").read_text()


def test_an_old_path_says_where_its_script_went():
    """Issue 72's bound: each bench/<name>.py (.sh) the docs named before the grouping prints one line naming its new
    path and exits 2, through a link to bench/_moved.py (.sh); a link's script exists under its group."""
    import subprocess
    import sys

    links = sorted(p for p in BENCH.iterdir() if p.is_symlink())
    assert len(links) == 16 and all(p.resolve().name == f"_moved{p.suffix}" for p in links), links
    for link in links:
        new = [p for p in BENCH.glob(f"*/{link.name}") if not p.is_symlink()]
        assert len(new) == 1, link.name
        if link.suffix == ".py" and link.name != "cluster_cost.py":
            continue  # one Python run shows the link's line; every link's target exists above
        cmd = [sys.executable, str(link)] if link.suffix == ".py" else ["bash", str(link)]
        out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=30)
        rel = new[0].relative_to(REPO)
        assert out.returncode == 2 and out.stderr.strip().splitlines() == [
            f"bench/{link.name} moved to {rel} (bench/ is grouped by question: bench/README.md); run that"], out.stderr


def test_an_old_path_imported_names_the_fix_and_no_importer_puts_bench_first():
    """A link is named like its script, so ``import cluster_cost`` with bench/ before bench/gpu/ on sys.path finds the
    notice (1f89be4 reverted the links for that): the notice refuses to be imported, naming the order to use, and
    no script or test puts bench/ at the front (each appends it, for _common)."""
    import re
    import subprocess
    import sys

    probe = "import sys; sys.path.insert(0, 'bench'); import cluster_cost"
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert out.returncode != 0 and "ImportError: bench/cluster_cost.py moved to bench/gpu/cluster_cost.py" in out.stderr, out.stderr
    assert "put bench/gpu/ before bench/ on sys.path" in out.stderr
    front = re.compile(r'sys\.path\.insert\(0, str\((REPO / "bench"|Path\(__file__\)\.resolve\(\)\.parents\[1\])\)\)'
                       r'|sys\.path\[:0\] = \[str\(REPO / "bench"\)')
    files = [*BENCH.glob("*/*.py"), *(REPO / "tests").glob("*.py")]
    assert not [str(p.relative_to(REPO)) for p in files if not p.is_symlink() and front.search(p.read_text())]
