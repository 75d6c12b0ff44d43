"""bench/ stays grouped by the question each script answers (issue 72): every script in a group folder beside
its README, which names it; every committed result in its group's results/; one harness for the options and
workers of a timed comparison (bench/_common.py), no script-local copy of it."""

from __future__ import annotations

import re

from tests.workflow_utils import REPO

BENCH = REPO / "bench"
GROUPS = sorted(p for p in BENCH.iterdir() if p.is_dir() and p.name not in ("out", "__pycache__"))


def test_every_script_lives_in_a_group_that_names_it():
    """No script at bench/'s top but the shared harness; each group's README names each of its scripts, and the
    top README links each group."""
    assert sorted(p.name for p in BENCH.iterdir() if p.is_file()) == ["README.md", "_common.py"]
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
