"""Collecting the GitHub Issue Similarity (GIS) dataset: duplicate issue pairs plus sampled non-duplicates.

The paper (Li & Li, ACL 2024, §4 and Appendix B) says only that duplicates were
"marked by maintainers ... with a comment like 'closing as a duplicate of #id'",
gathered with the GitHub API from 55 repositories, with the remaining issues as
negatives. Everything below that is a decision of this reproduction, made
explicit here.

**Which issues.** ``GET /repos/{o}/{r}/issues?state=all&sort=created&direction=asc``
(``since`` passed through when given). Items with a ``pull_request`` key are pull
requests and are skipped; a duplicate whose target is a pull request is dropped.
The time window is half-open on ``created_at``: ``since <= created_at < until``.
Because the list is sorted by creation, paging stops at the first issue created
at or after ``until``. GitHub's ``since`` filters on ``updated_at``, so issues
created before ``since`` but active after it are listed too; they serve as
targets of duplicates from the window (their text is at hand) but are not
scanned themselves and never enter negatives.

**Which comments count.** Comment bodies are read after removing quoted lines
(``> ...``), fenced and inline code and HTML comments. A duplicate reference is
one of the duplicate words (``duplicate``, ``duplicates``, ``dup``, ``dupe``,
optionally followed by ``of``/``to``/``:``/``issue``) followed by ``#N``,
``OWNER/NAME#N`` or ``https://github.com/OWNER/NAME/issues/N`` of the same
repository; so "Duplicate of #N", "closing as a duplicate of #N", "dup of #N"
and "This duplicates #N" all match, while "duplicated by #N" (the reverse
direction) does not. A reference preceded in its clause by a negation ("not a
duplicate of #N") is ignored. A reference is *strong* when its author's
``author_association`` is OWNER, MEMBER or COLLABORATOR (or the author is a
bot, which maintainers install) and it is not hedged ("possible duplicate of",
"maybe", "looks like", ..., or a question mark in the same sentence). Strong
references count on their own, following the paper's "marked by maintainers".
Other references count only when corroborated by one of: ``state_reason ==
"duplicate"``, a label whose name contains "duplicate", a ``marked_as_duplicate``
event not undone by a later ``unmarked_as_duplicate``, or the comment itself
saying it closes the issue while the issue is closed. When an issue has
several countable references, the latest one wins (maintainers correct
themselves). The issue's own body is never read for references: reporters
write "might be a duplicate of #N" there. ``comment_policy="any"`` makes every
unhedged reference strong.

**Bare references.** An issue that carries one of those duplicate signals but
no "duplicate of" reference is often closed with just "Same as #N", "→ #N" or
"#N". Then the issues a maintainer's comments refer to (``#N``,
``OWNER/NAME#N``, an issue URL; outside quotes and code, not negated, not the
issue itself, not a pull request) decide: exactly one is the target; several
are counted as ``ambiguous_references`` and no target is guessed.

**Duplicate events.** ``marked_as_duplicate`` events are read from one pass over
the repository-wide listing ``GET /repos/{o}/{r}/issues/events``, not from each
issue's timeline: that is what finds issues marked only through GitHub's
duplicate feature (no comment, no close reason), without a timeline request
per closed issue. Events are applied in time order; the last marking or
unmarking of an issue holds. GitHub's REST docs list only the common event
properties for ``marked_as_duplicate``; GraphQL's ``MarkedAsDuplicateEvent``
has ``duplicate`` and ``canonical`` issues. The duplicate is the event's
``duplicate`` issue when present, else the issue it is listed under (``issue``
in the listing, the timeline's own issue there); when it carries ``canonical``
(an issue object or ``{"number": N}``/``html_url``), that is the target,
otherwise the event confirms the comments' references (it is created by
GitHub's "Duplicate of #N" comment feature, for users with write access). When
the listing is unavailable (404 on a GitHub-compatible server) or cut short
(a 422 past the deepest page a server lets a client reach), it is counted as
``issue_events_incomplete`` and each issue's timeline is read instead, for
issues that carry a signal, a reference their comments could not settle, or an
event seen in the part that was listed.

**API economy.** Comments are fetched only for issues with ``comments > 0``;
the events listing once per repository; timelines only in the fallback above.
An issue known to be a duplicate whose target cannot be found is counted as
``duplicate_without_target`` and kept out of negatives, as is an issue whose
target is another repository, a pull request, or not listed.

**Pairs.** Text = ``title + "\\n" + body`` (raw Markdown, code blocks kept; or
GitHub's HTML rendering with ``body_format="html"``, which is what the
published dataset's rows look like). Positive = (duplicate, original), label 1;
both directions of a mutual marking collapse to one pair with the newer issue
first. Pairs with an empty (whitespace-only) text are dropped and counted.

**Splits, issue-disjoint.** Issues are nodes of a graph whose edges are the
positive pairs plus "same text" links; each connected component goes to one
split as a whole, so no issue text appears in two splits and no positive pair
straddles splits. Components with positives are assigned greedily, largest
first (ties in seeded random order), to the split furthest below its share of
positive pairs; the shares default to the paper's 18,565 / 1,547 / 1,548.
Issues without positives are assigned the same way by count, per repository,
in the proportions that repository's positives went to the splits (so every
(repository, split) that needs negatives has issues to draw them from).

**Negatives.** Within each (repository, split), ``negative_ratio`` times as many
pairs as positives (the paper's Table 7 is roughly 1:1) are drawn uniformly,
seeded, from the split's in-window issues of that repository, rejecting pairs in
the same component (so neither issue is a duplicate of the other, directly or
transitively) and repeats. Shortfalls are counted, never papered over.

**Modules.** :mod:`aoe.gis.references` parses the references (comments, labels, duplicate
events), :mod:`aoe.gis.harvest` lists one repository and decides its duplicates,
:mod:`aoe.gis.pairs` builds the pairs and splits; :func:`collect` here runs them over the
repositories and writes the dataset.
"""
from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from aoe.gis.client import DEFAULT_API_URL, GISError, GitHubClient, cache_namespace
from aoe.gis.harvest import (
    DEFAULT_LIST_MAX_AGE,
    RepoHarvest,
    harvest_repo,
    is_repo_name,
    iso_utc,
    parse_when,
    split_repo,
)
from aoe.gis.pairs import PAPER_SPLIT_SIZES, build_pairs
from aoe.util.fsutil import atomic_file
from aoe.util.jsonio import write_json_atomic

__all__ = ["collect", "default_cache_dir", "load_repo_list"]

log = logging.getLogger("aoe.gis")


# -- inputs ------------------------------------------------------------------------------


def load_repo_list(path: str | os.PathLike[str] | None = None) -> list[str]:
    """The ``repositories`` list of a YAML file; by default the paper's 55 (``aoe/resources/gis_repos.yaml``)."""
    if path is None:
        text = resources.files("aoe.resources").joinpath("gis_repos.yaml").read_text(encoding="utf-8")
        source = "aoe/resources/gis_repos.yaml"
    else:
        text = Path(path).read_text(encoding="utf-8")
        source = str(path)
    data = yaml.safe_load(text)
    repos = data.get("repositories") if isinstance(data, dict) else None
    if not isinstance(repos, list) or not all(is_repo_name(r) for r in repos):
        raise GISError(f"{source}: expected a 'repositories' list of OWNER/NAME strings")
    return list(repos)


def default_cache_dir(api_url: str | None = None) -> Path:
    """``$XDG_CACHE_HOME/aoe/gis/<host[_port][_path]>-<hash>`` (``~/.cache`` without XDG): outside any Snakemake output.

    One folder per API root (scheme, host, port, path prefix), so two servers on one
    host never share one; see :func:`aoe.gis.client.cache_namespace`.
    """
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "aoe" / "gis" / cache_namespace(api_url or os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL)


# -- the whole collection ------------------------------------------------------------------


def _write_jsonl_atomic(rows: Iterable[Mapping[str, Any]], path: Path) -> None:
    with atomic_file(path, fsync=True) as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def _public_api_url(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]))


def collect(
    repos: Sequence[str],
    out_dir: str | os.PathLike[str],
    *,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    seed: int = 0,
    api_url: str | None = None,
    token: str | None = None,
    split_sizes: Mapping[str, float] = PAPER_SPLIT_SIZES,
    negative_ratio: float = 1.0,
    comment_policy: str = "maintainers",
    body_format: str = "markdown",
    list_max_age: float | None = DEFAULT_LIST_MAX_AGE,
    tokenizer: Callable[[str], Sequence[Any]] | None = None,
    progress: bool = True,
    client: GitHubClient | None = None,
) -> dict[str, Any]:
    """Collect GIS pairs from ``repos`` into ``out_dir/pairs.jsonl`` and ``out_dir/stats.json``; return the stats.

    ``since``/``until``: ISO dates bounding issue creation (``since <= created <
    until``, UTC). ``api_url`` defaults to ``$GITHUB_API_URL`` or
    https://api.github.com, ``token`` to ``$GITHUB_TOKEN`` (optional; never
    written anywhere). Raw responses are cached in ``cache_dir`` (default
    :func:`default_cache_dir`), which makes a killed run resumable and a re-run
    free for completed work; list pages younger than ``list_max_age`` seconds
    are reused without a request. ``client`` replaces the client built from
    ``api_url``/``token``/``cache_dir`` (tests inject clocks and hooks that
    way; those three must then be left out). ``tokenizer`` is passed to
    :func:`aoe.gis.stats.compute_stats`. ``pairs.jsonl`` is written first and
    ``stats.json`` last, both atomically, so ``stats.json`` marks a finished run.
    """
    if isinstance(repos, str):
        raise TypeError("repos must be a list of OWNER/NAME strings, not one string")
    unique: list[str] = []
    for repo in repos:
        split_repo(repo)
        if repo.lower() not in {r.lower() for r in unique}:
            unique.append(repo)
    if not unique:
        raise ValueError("no repositories given")
    since_dt, until_dt = parse_when(since), parse_when(until)
    if since_dt is not None and until_dt is not None and since_dt >= until_dt:
        raise ValueError(f"empty time window: since {iso_utc(since_dt)} is not before until {iso_utc(until_dt)}")
    if client is None:
        client = GitHubClient(api_url, token, cache_dir if cache_dir is not None else default_cache_dir(api_url))
    elif api_url is not None or token is not None or cache_dir is not None:
        raise ValueError("pass either client or api_url/token/cache_dir, not both")
    out = Path(out_dir)
    harvests: list[RepoHarvest] = []
    for repo in unique:
        harvest = harvest_repo(
            client,
            repo,
            since=since_dt,
            until=until_dt,
            comment_policy=comment_policy,
            body_format=body_format,
            list_max_age=list_max_age,
            progress=progress,
        )
        log.info(
            "%s: %d issues in window, %d duplicate markings resolved, %d network requests",
            repo,
            harvest.counts.get("issues_in_window", 0),
            len(harvest.duplicates),
            harvest.counts["requests:network"],
        )
        harvests.append(harvest)
    rows, pair_info = build_pairs(harvests, seed=seed, split_sizes=split_sizes, negative_ratio=negative_ratio)
    # Here rather than at module level: see the note in aoe/gis/__init__.py.
    from aoe.gis.stats import compute_stats

    totals: Counter[str] = Counter()
    for h in harvests:
        totals.update(h.counts)
    stats = {
        "parameters": {
            "repositories": unique,
            "since": iso_utc(since_dt) if since_dt else None,
            "until": iso_utc(until_dt) if until_dt else None,
            "seed": seed,
            "split_sizes": dict(split_sizes),
            "negative_ratio": negative_ratio,
            "comment_policy": comment_policy,
            "body_format": body_format,
            "api_url": _public_api_url(client.api_url),
            "authenticated": client.has_token,
        },
        "collection": {
            "repositories": {h.repo: h.counts for h in harvests},
            "totals": dict(sorted(totals.items())),
            "client": dict(client.counts),
            "pairs": pair_info,
        },
        "dataset": compute_stats(rows, tokenizer=tokenizer),
    }
    _write_jsonl_atomic(rows, out / "pairs.jsonl")
    write_json_atomic(stats, out / "stats.json")
    return stats
