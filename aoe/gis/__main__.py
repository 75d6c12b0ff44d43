"""Command line: ``python -m aoe.gis --repo OWNER/NAME [--repo ...] --out DIR [options]``.

Writes ``DIR/pairs.jsonl`` and ``DIR/stats.json`` (and, with ``--plots``, Figures
7-9 into ``DIR/figures``). The token comes from ``GITHUB_TOKEN`` only (never a
command-line argument, where it would show in the process list and shell
history); the API root from ``GITHUB_API_URL``. Exit status 0 on success, 1 when
the collection fails (the message says why; the cache keeps what was fetched),
2 for bad arguments, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from aoe.gis.client import GISError
from aoe.gis.collect import collect, default_cache_dir, load_repo_list
from aoe.gis.harvest import DEFAULT_LIST_MAX_AGE, parse_when
from aoe.gis.stats import plot_all


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m aoe.gis",
        description="Collect the GitHub Issue Similarity (GIS) dataset: duplicate issue pairs and sampled non-duplicates.",
    )
    source = parser.add_argument_group("repositories (at least one of these)")
    source.add_argument("--repo", action="append", default=[], metavar="OWNER/NAME", help="a repository; repeat for more")
    source.add_argument("--repos-file", metavar="YAML", help="a YAML file with a 'repositories' list")
    source.add_argument("--paper-repos", action="store_true", help="the 55 repositories of the paper's Appendix B")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder for pairs.jsonl and stats.json")
    parser.add_argument("--since", metavar="DATE", help="only issues created at or after this ISO date/datetime (UTC)")
    parser.add_argument("--until", metavar="DATE", help="only issues created before this ISO date/datetime (UTC)")
    parser.add_argument("--seed", type=int, default=0, help="seed for split assignment and negative sampling (default 0)")
    parser.add_argument("--cache", metavar="DIR", help=f"response cache (default {default_cache_dir()})")
    parser.add_argument("--negative-ratio", type=float, default=1.0, help="negatives per positive, per repository and split")
    parser.add_argument(
        "--comment-policy",
        choices=("maintainers", "any"),
        default="maintainers",
        help="whose 'duplicate of #N' comments count on their own (default: OWNER/MEMBER/COLLABORATOR and bots)",
    )
    parser.add_argument(
        "--body-format",
        choices=("markdown", "html"),
        default="markdown",
        help="issue body as raw Markdown or GitHub's HTML rendering (the published dataset looks like HTML)",
    )
    parser.add_argument(
        "--list-max-age",
        type=float,
        default=DEFAULT_LIST_MAX_AGE,
        metavar="SECONDS",
        help="reuse cached issue-list pages younger than this without asking GitHub (default one day)",
    )
    parser.add_argument("--plots", action="store_true", help="also draw Figures 7-9 into DIR/figures")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every request (URLs only)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the collector; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    # urllib3 at DEBUG would log request lines; they hold no token, but they are noise.
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    repos = list(args.repo)
    try:
        if args.repos_file:
            repos += load_repo_list(args.repos_file)
        if args.paper_repos:
            repos += load_repo_list()
        parse_when(args.since)
        parse_when(args.until)
    except (GISError, ValueError, OSError) as exc:
        parser.error(str(exc))
    if not repos:
        parser.error("give at least one --repo, --repos-file or --paper-repos")
    # before any API work: a collection takes hours, and only then would these fail
    if not args.negative_ratio >= 0:
        parser.error(f"--negative-ratio must be >= 0, got {args.negative_ratio}")
    try:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out):
            pass
    except OSError as exc:
        parser.error(f"--out {args.out}: cannot write there ({exc.strerror or exc})")
    try:
        stats = collect(
            repos,
            args.out,
            since=args.since,
            until=args.until,
            cache_dir=args.cache,
            seed=args.seed,
            negative_ratio=args.negative_ratio,
            comment_policy=args.comment_policy,
            body_format=args.body_format,
            list_max_age=args.list_max_age,
            progress=not args.no_progress,
        )
    except GISError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; the response cache keeps what was fetched, so re-running resumes", file=sys.stderr)
        return 130
    if args.plots:
        plot_all(stats["dataset"], Path(args.out) / "figures")
    table = stats["dataset"]["table7"]
    summary = ", ".join(f"{s}: {c['positive']} pos / {c['negative']} neg" for s, c in table.items() if s != "all")
    print(f"wrote {Path(args.out) / 'pairs.jsonl'} ({summary or 'no pairs'})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
