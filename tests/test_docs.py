"""Every command the README and the docs show runs, every file they name exists, every link resolves.

Commands come from fenced code blocks (and the indented ones of bench/'s READMEs):

- ``snakemake ...`` / ``.venv/bin/snakemake ...``: planned as a dry run (``-n --quiet rules``) with its
  own targets, ``--configfile``, ``--config`` and ``--profile``; commands that plan the same thing
  (same options) share one dry run with the union of their targets, and the dry runs go two at a time;
- ``python -m aoe ...`` / ``aoe ...`` / ``python bench/GROUP/X.py ...``: ``--help`` of that module or script
  (and of its first positional argument, the subcommand where it has them) exits 0 and knows every
  ``--option`` the doc passes;
- pip / venv / pytest lines are not checked (README command 2 is what CI runs: tests/test_workflow.py).

Paths in backticks that look like repository files must exist; relative markdown links (and their
#anchors) must resolve. The README stays short: it links out to docs/ for everything else.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.workflow_utils import REPO, copy_workflow, snakemake

README_MAX_LINES = 160

# bench/README.md and each group's pages (bench/out/ holds what runs write, installed packages' READMEs among it)
BENCH_DOCS = [REPO / "bench" / "README.md", *(path for path in (REPO / "bench").glob("*/*.md") if path.parent.name != "out")]
DOCS = sorted(
    path for path in [REPO / "README.md", REPO / "CHANGELOG.md", *BENCH_DOCS, *(REPO / "docs").glob("*.md")]
    if path.exists()
)
# docs whose indented (4-space) blocks hold commands: bench/'s (its README and each group's)
INDENTED_COMMANDS = set(BENCH_DOCS)

# Files of other repositories that the docs name in backticks (the official AnglE code and examples).
EXTERNAL_FILES = {
    "angle_emb/angle.py",
    "eval.py",
    "train_angle.py",
    "examples/NLI/README.md",
    "examples/UAE/README.md",
    "1_Pooling/config.json",  # a sentence-transformers folder's pooling config (aoe/config/folder_pooling.py)
}
# a path with a folder is checked with any of these endings; a bare file name only with the first five
# (a bare `REPORT.md` or `mteb.json` is an output's name, not a repository file)
BARE_SUFFIXES = (".py", ".yaml", ".yml", ".smk", ".sh")
FILE_SUFFIXES = (*BARE_SUFFIXES, ".md", ".json", ".tsv", ".toml", ".rst")


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block, at any indent."""
    blocks = []
    for match in re.finditer(r"^( *)```([\w+-]*)[^\n]*\n(.*?)^\1```", text, flags=re.S | re.M):
        indent = len(match.group(1))
        body = "\n".join(line[indent:] for line in match.group(3).splitlines())
        blocks.append((match.group(2).lower(), body))
    return blocks


def _without_fences(text: str) -> str:
    return re.sub(r"^( *)```.*?^\1```", "", text, flags=re.S | re.M)


def _indented_blocks(text: str) -> list[str]:
    """Lines indented by 4+ spaces after a blank line, outside fences and lists (bench/'s READMEs' style)."""
    lines, out, previous_blank = _without_fences(text).splitlines(), [], True
    in_block = False
    for line in lines:
        if line.startswith("    ") and line.strip() and (previous_blank or in_block):
            out.append(line.strip())
            in_block = True
        elif line.strip():
            in_block = False
        previous_blank = not line.strip()
    return out


def _command_lines(body: str) -> list[str]:
    """Logical lines (backslash continuations joined), comments and empty lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", body)
    lines = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def doc_commands() -> list[tuple[str, str]]:
    """(doc, command) for every shell command line of a fenced (or, where used, indented) block."""
    commands = []
    for doc in DOCS:
        text = doc.read_text()
        bodies = [body for lang, body in _fenced_blocks(text) if lang in ("", "bash", "sh", "shell", "console")]
        if doc in INDENTED_COMMANDS:
            bodies.append("\n".join(_indented_blocks(text)))
        for body in bodies:
            for line in _command_lines(body):
                # one command per `&&` part; a pipe's first part is the command, redirections dropped
                for part in line.split("&&"):
                    part = part.split(" | ")[0]
                    part = re.sub(r"\s\d?>&?\d?\S*", " ", part).strip()
                    if part:
                        commands.append((_rel(doc), part))
    return commands


def _strip_env(tokens: list[str]) -> list[str]:
    while tokens and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", tokens[0]):
        tokens = tokens[1:]
    return tokens


def classify(command: str) -> tuple[str, list[str]]:
    """("snakemake" | "aoe" | "script" | "skip" | "other", argv after the program)."""
    try:
        tokens = shlex.split(command, comments=True)
    except ValueError:
        return "other", []
    tokens = _strip_env(tokens)
    if not tokens:
        return "other", []
    head, rest = tokens[0], tokens[1:]
    if head in ("snakemake", ".venv/bin/snakemake"):
        return "snakemake", rest
    if head in ("aoe", ".venv/bin/aoe"):
        return "aoe", ["aoe", *rest]
    if re.fullmatch(r"(\.venv/bin/)?python3?", head) or head.endswith("/bin/python"):
        if rest[:2] == ["-m", "venv"] or rest[:2] == ["-m", "pip"] or rest[:2] == ["-m", "pytest"]:
            return "skip", rest
        if rest[:1] == ["-m"] and len(rest) > 1 and (rest[1] == "aoe" or rest[1].startswith("aoe.")):
            return "aoe", rest[1:]
        if rest and rest[0].endswith(".py"):
            return "script", rest
        return "other", rest
    if head.endswith("pip") or head in ("pytest", "python3 -m venv"):
        return "skip", rest
    return "other", tokens


# snakemake options whose values follow them (nargs "+" ones take every following non-option token)
_ONE_VALUE = {"--cores", "-c", "--jobs", "-j", "--profile", "--report", "--list-changes", "--lc", "--li", "--lp",
              "--latency-wait", "--retries"}
_MANY_VALUES = {"--configfile", "--configfiles", "--config", "-C", "--forcerun", "-R", "--until", "-U", "--sdm",
                "--software-deployment-method", "--rerun-triggers", "--set-resources", "--default-resources",
                "--quiet", "-q", "--omit-from", "-O"}
# options that do something else than plan (or that only print more): dropped from the dry run
# (--cores / --jobs do not change a plan, nor does --touch, which under -n lists the jobs the plain plan runs:
# commands that differ only there share one dry run, the paper grid's costing ~10 CPU-s each)
_DROPPED = {"--report", "--list-changes", "--lc", "--li", "--lp", "--verbose", "--quiet", "-q", "--dry-run", "-n",
            "--printshellcmds", "-p", "--show-failed-logs", "--nolock", "--cores", "-c", "--jobs", "-j", "--touch", "-t"}


def parse_snakemake(argv: list[str]) -> tuple[tuple[str, ...], list[str]]:
    """(the options kept for the dry run, the targets), as snakemake's argparse reads argv.

    Raises ValueError where argparse would fail or silently eat a target: `snakemake -n -q rules table2`
    reads table2 as a --quiet value (an error), `-q rules all` reads `all` as one (its quiet level) and
    plans the default target only by luck.
    """
    options, targets, i = [], [], 0
    while i < len(argv):
        token = argv[i]
        if token.startswith("-"):
            name, _, inline = token.partition("=")
            if re.fullmatch(r"-[cj]\d+", token):  # -c1, -j4: the short option with its value attached
                name, inline = token[:2], token[2:]
            values = []
            if not inline and name in _ONE_VALUE and i + 1 < len(argv):
                values, i = [argv[i + 1]], i + 1
            elif not inline and name in _MANY_VALUES:
                while i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                    values.append(argv[i + 1])
                    i += 1
            if name in ("-q", "--quiet") and (set(values) - {"rules", "host", "progress", "reason"}):
                raise ValueError(f"{token} {' '.join(values)}: a target after -q is read as a --quiet value; "
                                 "give the targets first")
            if name not in _DROPPED:
                options += [token, *values]
        else:
            targets.append(token)
        i += 1
    return tuple(options), targets


def _groups() -> dict[tuple[str, ...], dict]:
    groups: dict[tuple[str, ...], dict] = {}
    for doc, command in doc_commands():
        kind, argv = classify(command)
        if kind != "snakemake":
            continue
        try:
            options, targets = parse_snakemake(argv)
        except ValueError as error:
            raise AssertionError(f"{doc}: {command}: {error}") from None
        group = groups.setdefault(options, {"targets": [], "commands": []})
        for target in targets or ["all"]:
            if target not in group["targets"]:
                group["targets"].append(target)
        group["commands"].append(f"{doc}: {command}")
    return groups


def test_docs_show_commands():
    """The extraction finds the README's quick start and the docs' commands (guards the parser itself)."""
    commands = [command for _, command in doc_commands()]
    kinds = {classify(command)[0] for command in commands}
    assert {"snakemake", "aoe", "script", "skip"} <= kinds, kinds
    assert any("--configfile presets/cpu-demo.yaml" in c and "snakemake" in c for c in commands)
    assert parse_snakemake(["table2", "--configfile", "a.yaml", "b.yaml", "--cores", "2", "--profile", "p"]) == (
        ("--configfile", "a.yaml", "b.yaml", "--profile", "p"), ["table2"])
    # a target written after --configfile is read as a config file, as snakemake itself reads it
    assert parse_snakemake(["--configfile", "a.yaml", "table2"]) == (("--configfile", "a.yaml", "table2"), [])
    assert parse_snakemake(["-n", "all", "-q", "rules"]) == ((), ["all"])
    # `--touch -c1` plans what the plain command runs: one dry run for both (the grid's costs ~10 CPU-s)
    assert parse_snakemake(["--touch", "-c1", "table2"]) == ((), ["table2"])
    with pytest.raises(ValueError):
        parse_snakemake(["-n", "-q", "rules", "table2"])


@pytest.mark.slow
def test_snakemake_commands_plan(tmp_path):
    """Every snakemake command of the docs plans (dry run, rc 0), with or without the data mirror."""
    groups = _groups()
    assert groups, "no snakemake command found in the docs"
    work = copy_workflow(tmp_path / "wf")
    for extra in ("slurm", "profiles"):
        if (REPO / extra).is_dir():
            shutil.copytree(REPO / extra, work / extra)

    def plan(item):
        options, group = item
        args = ["-n", *group["targets"], *options, "--nolock", "--quiet", "rules"]
        return args, group, snakemake(work, *args, env={"AOE_DATA_MIRROR": ""}, timeout=300)

    # the paper grid's plans (no --configfile: config.yaml alone, ~1,200 jobs) take longest: start them first
    order = sorted(groups.items(), key=lambda kv: ("--configfile" in kv[0], -len(kv[1]["targets"])))
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(plan, order))
    failures = [
        f"snakemake {' '.join(args)} -> rc {out.returncode}\n  from: " + "\n  from: ".join(group["commands"])
        + "\n" + out.stdout[-1500:]
        for args, group, out in results if out.returncode != 0
    ]
    assert not failures, "\n\n".join(failures)
    # issue 62: `-q rules` printed the job counts twice (aoe.plan.targets.job_counts_once)
    twice = [" ".join(args) for args, _, out in results if out.stdout.count("Job stats:") > 1]
    assert not twice, twice


def _help_argv(kind: str, argv: list[str]) -> tuple[list[str], list[str]]:
    """(the --help command line, the documented --options) of an aoe or script command."""
    if kind == "aoe":
        module, rest = ("aoe" if argv[0] == "aoe" else argv[0]), argv[1:]
        program = [sys.executable, "-m", module]
    else:
        program, rest = [sys.executable, argv[0]], argv[1:]
    leading = []
    if rest and not rest[0].startswith("-"):
        leading = [rest[0]]
    documented = sorted({token.split("=")[0] for token in rest if re.fullmatch(r"--[\w-]+(=.*)?", token)})
    return [*program, *leading, "--help"], documented


@pytest.mark.slow
def test_python_commands_have_their_options():
    """Every `python -m aoe ...`, `aoe ...` and `python bench/GROUP/X.py ...` exists, answers --help and takes its options."""
    checks: dict[tuple[str, ...], dict] = {}
    for doc, command in doc_commands():
        kind, argv = classify(command)
        if kind == "script":
            assert (REPO / argv[0]).is_file(), f"{doc}: {command}: no {argv[0]}"
        if kind not in ("aoe", "script"):
            continue
        help_argv, documented = _help_argv(kind, argv)
        check = checks.setdefault(tuple(help_argv), {"options": set(), "commands": []})
        check["options"] |= set(documented)
        check["commands"].append(f"{doc}: {command}")
    assert checks

    def run(item):
        help_argv, check = item
        out = subprocess.run(list(help_argv), cwd=REPO, capture_output=True, text=True, timeout=120,
                             env={**os.environ, "AOE_DATA_MIRROR": ""})
        return help_argv, check, out

    failures = []
    with ThreadPoolExecutor(max_workers=2) as pool:
        for help_argv, check, out in pool.map(run, checks.items()):
            where = "\n  from: " + "\n  from: ".join(check["commands"])
            if out.returncode != 0:
                failures.append(f"{' '.join(help_argv[1:])} -> rc {out.returncode}{where}\n{out.stderr[-800:]}")
                continue
            unknown = [option for option in sorted(check["options"]) if option not in out.stdout]
            if unknown:
                failures.append(f"{' '.join(help_argv[1:])} does not list {unknown}{where}")
    assert not failures, "\n\n".join(failures)


def _top_level() -> set[str]:
    return {path.name for path in REPO.iterdir()} - {"results", ".venv", ".snakemake", ".git"}


def _candidate_paths(text: str) -> list[str]:
    """Backticked tokens that look like files of this repository."""
    top = _top_level()
    paths = []
    for token in re.findall(r"`([^`\n]+)`", _without_fences(text)):
        token = token.strip().rstrip(",.;:")
        # results/ and bench/out/ hold what runs write (ignored by git)
        if not token or " " in token or token.startswith(("results/", "bench/out/", "../", "/", "~", "…", "http", "$")):
            continue
        if any(ch in token for ch in "<>{}*…=|:()[]'\"@,"):
            continue  # a placeholder, a glob, a key=value, an official source's `commit:path`
        first = token.split("/")[0]
        if token.startswith("."):
            if first in top:
                paths.append(token)  # .ci/..., not a bare `.md` ending
        elif "/" in token.rstrip("/"):
            if first in top or token.endswith(FILE_SUFFIXES):
                paths.append(token)
        elif first in top or token.endswith(BARE_SUFFIXES):
            paths.append(token)
    return paths


def _tracked_names() -> set[str]:
    names = set()
    for root, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in {".git", ".venv", "results", ".snakemake", "__pycache__"}]
        names.update(files)
    return names


def test_named_files_exist():
    """Every repository file or folder a doc names in backticks exists (relative to the repo or the doc)."""
    names = _tracked_names()
    missing = []
    for doc in DOCS:
        for path in _candidate_paths(doc.read_text()):
            if path in EXTERNAL_FILES or path.rstrip("/") in EXTERNAL_FILES:
                continue
            if "/" not in path.rstrip("/"):
                if path in names or (REPO / path).exists() or (doc.parent / path).exists():
                    continue
            elif (REPO / path).exists() or (doc.parent / path).exists():
                continue
            missing.append(f"{_rel(doc)}: `{path}`")
    assert not missing, "named in the docs but not in the repository:\n" + "\n".join(missing)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, markup and punctuation dropped, spaces to hyphens (an
    underscore is a word character there: `gpu_check.py` gives gpu_checkpy)."""
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    anchors, seen = set(), {}
    for heading in re.findall(r"^#{1,6} (.+)$", _without_fences(path.read_text()), flags=re.M):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def test_relative_links_resolve():
    """Every relative markdown link of the README and the docs points at a file (and heading) that exists."""
    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", _without_fences(doc.read_text())):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.exists():
                broken.append(f"{_rel(doc)}: ({target}): no {path}")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{_rel(doc)}: ({target}): no heading #{anchor} in {path or _rel(doc)}")
    assert not broken, "\n".join(broken)


def test_readme_is_short_and_links_every_doc():
    """The README is a short entry point (<= 160 lines) that links each page of docs/, bench/ and the changelog."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MAX_LINES, f"README.md has {len(readme.splitlines())} lines"
    for doc in [*(REPO / "docs").glob("*.md"), REPO / "CHANGELOG.md", REPO / "bench" / "README.md"]:
        assert f"({_rel(doc)})" in readme or f"({_rel(doc)}#" in readme, f"README.md does not link {_rel(doc)}"


def test_the_cluster_install_names_the_pinned_torch():
    """docs/cluster.md's install commands name the torch version pyproject.toml pins (the one the tests passed with)."""
    pin = re.search(r'"torch==([^"]+)"', (REPO / "pyproject.toml").read_text()).group(1)
    named = set(re.findall(r"torch==([0-9][^\s`']*)", (REPO / "docs" / "cluster.md").read_text()))
    assert named == {pin}, (named, pin)
