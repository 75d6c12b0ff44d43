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
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from aoe.gis.client import (
    ACCEPT_HTML,
    ACCEPT_JSON,
    DEFAULT_API_URL,
    GISError,
    GitHubClient,
    MalformedResponse,
    NotFound,
    RequestFailed,
    cache_namespace,
)
from aoe.jsonio import write_json_atomic
from aoe.progress import progress as progress_bar

__all__ = [
    "DEFAULT_LIST_MAX_AGE",
    "MAINTAINER_ASSOCIATIONS",
    "PAPER_SPLIT_SIZES",
    "SPLITS",
    "DuplicateReference",
    "RepoHarvest",
    "RepositoryNotFound",
    "build_pairs",
    "collect",
    "default_cache_dir",
    "find_duplicate_references",
    "harvest_repo",
    "load_repo_list",
    "parse_when",
]

SPLITS = ("train", "valid", "test")
# Table 7 of the paper: train / validation / test sizes (positives + negatives).
PAPER_SPLIT_SIZES: Mapping[str, int] = {"train": 18565, "valid": 1547, "test": 1548}
MAINTAINER_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
# Issue-list pages have no validator; within a day a resumed or repeated run
# trusts them, later ones revalidate them with If-None-Match (free when 304).
DEFAULT_LIST_MAX_AGE = 24 * 3600.0
PER_PAGE = 100

log = logging.getLogger("aoe.gis")

_REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_NAME = r"[A-Za-z0-9_.-]+"
_DUPLICATE_RE = re.compile(
    r"\b(?:duplicates?|dupe?)\b(?:\s+(?:of|to))?\s*:?\s*(?:(?:the\s+)?issue\s+)?\[?"
    rf"(?:https?://github\.com/(?P<u_owner>{_NAME})/(?P<u_name>{_NAME})/(?:issues|pull)/(?P<u_num>\d+)\b"
    rf"|(?:(?P<s_owner>{_NAME})/(?P<s_name>{_NAME}))?#(?P<num>\d+)\b)",
    re.IGNORECASE,
)
_NEGATION_RE = re.compile(r"\b(?:not|no|never|nor|isnt|arent|wasnt)\b|n't\b", re.IGNORECASE)
_HEDGE_RE = re.compile(
    r"\b(?:possible|possibly|maybe|might|may|perhaps|potential|potentially|probably|likely|seems?|looks?|"
    r"think|guess|suspect|could|wonder|whether|if|related|similar)\b",
    re.IGNORECASE,
)
# Bots and triagers label suspected duplicates too ("possible duplicate"); those labels prove nothing.
_TENTATIVE_LABEL_RE = re.compile(r"possib|potential|maybe|likely|suspect|candidate|\bnot\b|\?")
_CLOSING_RE = re.compile(r"\bclos(?:e|es|ed|ing)\b", re.IGNORECASE)
_FENCED_CODE_RE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[^\n]*$", re.MULTILINE | re.DOTALL)
_INLINE_CODE_RE = re.compile(r"`[^`\n]*`")
_HTML_COMMENT_RE = re.compile(r"<!--.*?-->", re.DOTALL)
_QUOTE_LINE_RE = re.compile(r"^[ \t]*>.*$", re.MULTILINE)
_CLAUSE_BREAK = ".!?;\n"
# Any issue reference, as GitHub links them: "#N" only after a non-word character
# (not "a#1", "&#39;" or a URL fragment), "OWNER/NAME#N", or an issue URL.
_ISSUE_REF_RE = re.compile(
    rf"https?://github\.com/(?P<u_owner>{_NAME})/(?P<u_name>{_NAME})/issues/(?P<u_num>\d+)\b"
    rf"|(?<![\w/#&])(?:(?P<s_owner>{_NAME})/(?P<s_name>{_NAME}))?#(?P<num>\d+)\b"
)
# Listings whose pagination is capped answer 422 past the deepest page they serve;
# what was listed up to there is still good.
_PAGINATION_LIMIT = 422


class RepositoryNotFound(GISError):
    """The repository does not exist on the API host (or the token cannot see it)."""


# -- inputs ------------------------------------------------------------------------------


def parse_when(value: str | datetime | None) -> datetime | None:
    """An ISO date or datetime as an aware UTC datetime; a bare date means midnight UTC, naive means UTC."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(str(value).strip())
        except ValueError as exc:
            raise ValueError(f"not an ISO date or datetime: {value!r}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


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
    if not isinstance(repos, list) or not all(isinstance(r, str) and _REPO_RE.match(r) for r in repos):
        raise GISError(f"{source}: expected a 'repositories' list of OWNER/NAME strings")
    return list(repos)


def default_cache_dir(api_url: str | None = None) -> Path:
    """``$XDG_CACHE_HOME/aoe/gis/<host[_port][_path]>-<hash>`` (``~/.cache`` without XDG): outside any Snakemake output.

    One folder per API root (scheme, host, port, path prefix), so two servers on one
    host never share one; see :func:`aoe.gis.client.cache_namespace`.
    """
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "aoe" / "gis" / cache_namespace(api_url or os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL)


# -- duplicate references in comments ----------------------------------------------------


@dataclass(frozen=True)
class DuplicateReference:
    """A "duplicate of" reference found in a comment or timeline event.

    ``number`` is the referenced issue; ``other_repo`` is set (``owner/name``,
    lower case) when the reference points into a different repository;
    ``hedged`` when the wording is tentative or a question.
    """

    number: int
    other_repo: str | None = None
    hedged: bool = False


def _clean_comment(text: str) -> str:
    """Comment text without code, quotes and HTML comments, where a "duplicate of" is not the author's own claim."""
    text = _FENCED_CODE_RE.sub("\n", text.replace("\r\n", "\n"))
    text = _HTML_COMMENT_RE.sub(" ", text)
    text = _INLINE_CODE_RE.sub(" ", text)
    return _QUOTE_LINE_RE.sub("", text)


def find_duplicate_references(text: str | None, repo: str) -> list[DuplicateReference]:
    """The duplicate references in a comment body, in order (see the module docstring for the rules).

    ``repo`` (``owner/name``) decides whether an explicit ``OWNER/NAME#N`` or
    issue URL is same-repository; negated references are left out.
    """
    if not text:
        return []
    clean = _clean_comment(text)
    own = repo.lower()
    found: list[DuplicateReference] = []
    for match in _DUPLICATE_RE.finditer(clean):
        start = max(clean.rfind(ch, 0, match.start()) for ch in _CLAUSE_BREAK) + 1
        before = clean[max(start, match.start() - 80) : match.start()].replace("’", "'")
        if _NEGATION_RE.search(before):
            continue
        rest = clean[match.end() :]
        end = min((i for i in (rest.find(ch) for ch in ".!\n") if i >= 0), default=len(rest))
        hedged = bool(_HEDGE_RE.search(before)) or "?" in rest[: end + 1]
        if match.group("u_num"):
            owner_name, number = f"{match.group('u_owner')}/{match.group('u_name')}", match.group("u_num")
        else:
            owner_name = f"{match.group('s_owner')}/{match.group('s_name')}" if match.group("s_owner") else own
            number = match.group("num")
        other = None if owner_name.lower() == own else owner_name.lower()
        found.append(DuplicateReference(int(number), other, hedged))
    return found


def _issue_references(text: str | None, repo: str, exclude: Iterable[int] = ()) -> list[DuplicateReference]:
    """Every issue a comment refers to, once each in order of appearance (rules under "Bare references")."""
    if not text:
        return []
    clean = _clean_comment(text)
    own = repo.lower()
    skip = set(exclude)
    found: dict[DuplicateReference, None] = {}
    for match in _ISSUE_REF_RE.finditer(clean):
        start = max(clean.rfind(ch, 0, match.start()) for ch in _CLAUSE_BREAK) + 1
        if _NEGATION_RE.search(clean[max(start, match.start() - 80) : match.start()].replace("’", "'")):
            continue
        if match.group("u_num"):
            owner_name, number = f"{match.group('u_owner')}/{match.group('u_name')}", int(match.group("u_num"))
        else:
            owner_name = f"{match.group('s_owner')}/{match.group('s_name')}" if match.group("s_owner") else own
            number = int(match.group("num"))
        other = None if owner_name.lower() == own else owner_name.lower()
        if other is None and number in skip:
            continue
        found.setdefault(DuplicateReference(number, other))
    return list(found)


def _issue_ref(obj: Any, repo: str) -> DuplicateReference | None:
    """The issue an event's issue object (``{"number": N}``, ``{"html_url": ...}``) names."""
    if not isinstance(obj, Mapping):
        return None
    html_url = obj.get("html_url")
    if isinstance(html_url, str):
        parsed = re.match(rf"https?://[^/]+/({_NAME}/{_NAME})/(?:issues|pull)/(\d+)", html_url)
        if parsed:
            other = None if parsed.group(1).lower() == repo.lower() else parsed.group(1).lower()
            return DuplicateReference(int(parsed.group(2)), other)
    number = obj.get("number")
    if isinstance(number, int) and not isinstance(number, bool):
        return DuplicateReference(number)
    return None


def _duplicate_marking(
    event: Mapping[str, Any], repo: str, on_issue: int | None = None
) -> tuple[DuplicateReference | None, DuplicateReference | None]:
    """(duplicate, canonical) of a ``marked_as_duplicate``/``unmarked_as_duplicate`` event; either may be None.

    ``on_issue`` is the timeline's own issue; without it (the repository-wide
    listing) the event's ``issue`` is the fallback for the duplicate side. Both
    shapes go through here, so a timeline and the listing always agree.
    """
    dupe = _issue_ref(event.get("duplicate"), repo)
    if dupe is None:
        dupe = DuplicateReference(on_issue) if on_issue is not None else _issue_ref(event.get("issue"), repo)
    return dupe, _issue_ref(event.get("canonical"), repo)


@dataclass(frozen=True)
class _Marking:
    """Where an issue stands after its last ``marked_as_duplicate``/``unmarked_as_duplicate`` event."""

    marked: bool
    canonical: DuplicateReference | None = None


def _apply_duplicate_events(events: Iterable[Mapping[str, Any]], repo: str, on_issue: int | None = None) -> dict[int, _Marking]:
    """Each same-repository duplicate's marking after ``events`` (in the order given)."""
    markings: dict[int, _Marking] = {}
    for event in events:
        kind = event.get("event")
        if kind not in ("marked_as_duplicate", "unmarked_as_duplicate"):
            continue
        dupe, canonical = _duplicate_marking(event, repo, on_issue)
        if dupe is None or dupe.other_repo is not None:
            continue
        markings[dupe.number] = _Marking(True, canonical) if kind == "marked_as_duplicate" else _Marking(False)
    return markings


def _event_order(event: Mapping[str, Any]) -> tuple[str, int]:
    # ISO-8601 UTC stamps sort as strings; the id breaks ties within a second.
    event_id = event.get("id")
    return str(event.get("created_at") or ""), event_id if isinstance(event_id, int) else 0


def _repo_markings(
    client: GitHubClient, owner: str, name: str, repo: str, max_age: float | None, counts: Counter[str]
) -> tuple[dict[int, _Marking], bool]:
    """Duplicate markings from the repository-wide issue events, and whether the listing was complete."""
    events: list[Mapping[str, Any]] = []
    complete = True
    try:
        for page in client.paginate(f"/repos/{owner}/{name}/issues/events", {"per_page": PER_PAGE}, max_age=max_age):
            counts["issue_event_pages"] += 1
            for event in page.body:
                if not isinstance(event, Mapping):
                    raise MalformedResponse(f"GET {page.url}: issue event is not an object")
                if event.get("event") in ("marked_as_duplicate", "unmarked_as_duplicate"):
                    events.append(event)
    except NotFound as exc:
        complete = False
        log.warning("%s: no repository-wide issue events (HTTP %d); reading timelines instead", repo, exc.status)
    except RequestFailed as exc:
        if exc.status != _PAGINATION_LIMIT:
            raise
        complete = False
        log.warning("%s: issue events listed only up to page %d (HTTP 422); reading timelines for the rest", repo, counts["issue_event_pages"])
    if not complete:
        counts["issue_events_incomplete"] = 1
    # The listing's order is not documented; the events' own times are.
    return _apply_duplicate_events(sorted(events, key=_event_order), repo), complete


# -- harvesting one repository -----------------------------------------------------------


@dataclass
class _Issue:
    number: int
    title: str
    body: str
    state: str
    state_reason: str | None
    created_at: datetime
    updated_at: str
    comments: int
    labels: tuple[str, ...]
    in_window: bool

    @property
    def text(self) -> str:
        return f"{self.title}\n{self.body}"


@dataclass
class RepoHarvest:
    """What one repository yields: issue texts, found duplicates, and counts of everything set aside.

    ``texts`` maps every listed issue (in-window and earlier context issues) to
    its text; ``window`` holds the in-window issue numbers; ``duplicates`` the
    validated (duplicate, original) pairs; ``no_negative`` the issues known to be
    duplicates of something unusable, kept out of negatives.
    """

    repo: str
    texts: dict[int, str]
    window: set[int]
    duplicates: list[tuple[int, int]]
    no_negative: set[int] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class _Candidate:
    ref: DuplicateReference
    strong: bool
    says_closing: bool


def _split_repo(repo: str) -> tuple[str, str]:
    if not isinstance(repo, str) or not _REPO_RE.match(repo):
        raise GISError(f"repository {repo!r} is not of the form OWNER/NAME")
    owner, name = repo.split("/")
    return owner, name


def _parse_issue(item: Any, url: str, since: datetime | None, body_format: str) -> _Issue:
    try:
        body = item.get("body_html") if body_format == "html" else item.get("body")
        return _Issue(
            number=int(item["number"]),
            title=str(item.get("title") or ""),
            body=str(body or ""),
            state=str(item.get("state") or ""),
            state_reason=item.get("state_reason"),
            created_at=parse_when(item["created_at"]),
            updated_at=str(item["updated_at"]),
            comments=int(item.get("comments") or 0),
            labels=tuple(str(label.get("name", "")) for label in item.get("labels") or () if isinstance(label, Mapping)),
            in_window=since is None or parse_when(item["created_at"]) >= since,
        )
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise MalformedResponse(f"GET {url}: an issue object lacks a valid {exc!s} field") from None


def harvest_repo(
    client: GitHubClient,
    repo: str,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    comment_policy: str = "maintainers",
    body_format: str = "markdown",
    list_max_age: float | None = DEFAULT_LIST_MAX_AGE,
    progress: bool = True,
) -> RepoHarvest:
    """List one repository's issues and find its duplicate pairs (rules in the module docstring).

    Raises :class:`RepositoryNotFound` when the issue list answers 404/410, and
    the client's errors otherwise; whatever was fetched stays in the cache.
    """
    if comment_policy not in ("maintainers", "any"):
        raise ValueError(f"comment_policy must be 'maintainers' or 'any', not {comment_policy!r}")
    if body_format not in ("markdown", "html"):
        raise ValueError(f"body_format must be 'markdown' or 'html', not {body_format!r}")
    owner, name = _split_repo(repo)
    requests_before = dict(client.counts)
    counts: Counter[str] = Counter()
    issues: dict[int, _Issue] = {}
    pull_requests: set[int] = set()
    params: dict[str, Any] = {"state": "all", "per_page": PER_PAGE, "sort": "created", "direction": "asc"}
    if since is not None:
        params["since"] = _iso(since)
    accept = ACCEPT_HTML if body_format == "html" else ACCEPT_JSON
    # a log line per interval (aoe.progress): pages while listing (no total yet), then issues with an ETA
    bar = progress_bar(desc=f"{repo} (listing)", unit="page", disable=not progress)
    try:
        try:
            for page in client.paginate(f"/repos/{owner}/{name}/issues", params, accept=accept, max_age=list_max_age):
                counts["list_pages"] += 1
                past_window = False
                for item in page.body:
                    if not isinstance(item, Mapping) or "created_at" not in item or "number" not in item:
                        raise MalformedResponse(f"GET {page.url}: list item is not an issue object")
                    if until is not None and parse_when(item["created_at"]) >= until:
                        past_window = True
                        continue
                    if "pull_request" in item:
                        pull_requests.add(int(item["number"]))
                        counts["pull_requests_skipped"] += 1
                        continue
                    issue = _parse_issue(item, page.url, since, body_format)
                    issues[issue.number] = issue
                bar.update(1)
                if past_window:
                    break
        except NotFound as exc:
            what = "has its issues disabled or is gone" if exc.status == 410 else "was not found"
            raise RepositoryNotFound(
                f"repository {repo} {what} (HTTP {exc.status} for GET {exc.url}); check the spelling, "
                "or for a private repository that the token can read it"
            ) from None
        window = sorted(n for n, issue in issues.items() if issue.in_window)
        counts["issues_listed"] = len(issues)
        counts["issues_in_window"] = len(window)
        counts["context_issues"] = len(issues) - len(window)
        bar.set_description(repo)
        bar.unit = "issue"
        bar.reset(total=len(window))
        markings: dict[int, _Marking] = {}
        events_complete = True
        if window:
            markings, events_complete = _repo_markings(client, owner, name, repo, list_max_age, counts)
        duplicates: list[tuple[int, int]] = []
        no_negative: set[int] = set()
        vanished: set[int] = set()
        for number in window:
            issue = issues[number]
            try:
                outcome = _resolve_issue(
                    client,
                    repo,
                    issue,
                    comment_policy,
                    counts,
                    marking=markings.get(number),
                    events_complete=events_complete,
                    pull_requests=pull_requests,
                )
            except NotFound:
                # Deleted or transferred between listing and now: neither text nor target any more.
                vanished.add(number)
                counts["issues_vanished"] += 1
                bar.update(1)
                continue
            bar.update(1)
            if outcome is None:
                continue
            ref, evidence = outcome
            if ref is None:
                counts["duplicate_without_target"] += 1
                no_negative.add(number)
            elif ref.other_repo is not None:
                counts["target_other_repo"] += 1
                no_negative.add(number)
            elif ref.number == number:
                counts["self_reference_ignored"] += 1
            elif ref.number in pull_requests:
                counts["target_pull_request"] += 1
                no_negative.add(number)
            elif ref.number not in issues or ref.number in vanished:
                counts["target_not_listed"] += 1
                no_negative.add(number)
            else:
                duplicates.append((number, ref.number))
                counts[f"evidence:{evidence}"] += 1
        # A target that vanished after its duplicate was resolved is not usable either.
        kept = [(d, o) for d, o in duplicates if o not in vanished]
        counts["target_not_listed"] += len(duplicates) - len(kept)
        no_negative.update(d for d, o in duplicates if o in vanished)
        counts["duplicates_found"] = len(kept)
    finally:
        bar.close()
    for key in ("network", "not_modified", "cache"):
        counts[f"requests:{key}"] = client.counts[key] - requests_before[key]
    return RepoHarvest(
        repo=repo,
        texts={n: issue.text for n, issue in issues.items() if n not in vanished},
        window={n for n in window if n not in vanished},
        duplicates=kept,
        no_negative=no_negative - vanished,
        counts=dict(sorted(counts.items())),
    )


def _is_duplicate_label(name: str) -> bool:
    """Whether a label asserts duplication ("duplicate", "status: duplicate"), not just suspects it."""
    lowered = name.lower()
    return "duplicate" in lowered and not _TENTATIVE_LABEL_RE.search(lowered)


def _resolve_issue(
    client: GitHubClient,
    repo: str,
    issue: _Issue,
    comment_policy: str,
    counts: Counter[str],
    *,
    marking: _Marking | None = None,
    events_complete: bool = False,
    pull_requests: Iterable[int] = (),
) -> tuple[DuplicateReference | None, str] | None:
    """None when ``issue`` is not a duplicate; else (target or None when unknown, evidence label).

    ``marking`` is what the repository's issue events say about ``issue``;
    ``events_complete`` whether that listing covered every event (else the
    timeline is read when it could matter).
    """
    candidates: list[_Candidate] = []
    # Issues a maintainer's comments refer to, for the bare-reference rule; dict keeps order without repeats.
    mentioned: dict[DuplicateReference, None] = {}
    not_targets = {issue.number, *pull_requests}
    base = f"/repos/{repo}/issues/{issue.number}"
    if issue.comments > 0:
        counts["comment_fetches"] += 1
        for page in client.paginate(f"{base}/comments", {"per_page": PER_PAGE}, validator=issue.updated_at):
            for comment in page.body:
                if not isinstance(comment, Mapping):
                    raise MalformedResponse(f"GET {page.url}: comment is not an object")
                body = comment.get("body")
                user = comment.get("user") if isinstance(comment.get("user"), Mapping) else {}
                maintainer = (
                    comment_policy == "any"
                    or comment.get("author_association") in MAINTAINER_ASSOCIATIONS
                    or user.get("type") == "Bot"
                )
                text = body if isinstance(body, str) else None
                says_closing = text is not None and bool(_CLOSING_RE.search(_clean_comment(text)))
                for ref in find_duplicate_references(text, repo):
                    candidates.append(_Candidate(ref, maintainer and not ref.hedged, says_closing))
                if maintainer:
                    mentioned.update(dict.fromkeys(_issue_references(text, repo, not_targets)))
    strong = [c for c in candidates if c.strong]
    if strong:
        return strong[-1].ref, "comment"
    signal = (
        "state_reason"
        if issue.state_reason == "duplicate"
        else "label"
        if any(_is_duplicate_label(label) for label in issue.labels)
        else None
    )
    if candidates and signal:
        return candidates[-1].ref, f"comment+{signal}"
    closing = [c for c in candidates if c.says_closing and issue.state == "closed"]
    if closing:
        return closing[-1].ref, "comment+closed"
    if not events_complete and (candidates or signal or marking is not None):
        counts["timeline_fetches"] += 1
        events: list[Mapping[str, Any]] = []
        for page in client.paginate(f"{base}/timeline", {"per_page": PER_PAGE}, validator=issue.updated_at):
            for event in page.body:
                if not isinstance(event, Mapping):
                    raise MalformedResponse(f"GET {page.url}: timeline event is not an object")
                events.append(event)
        marking = _apply_duplicate_events(events, repo, issue.number).get(issue.number)
    marked = marking is not None and marking.marked
    if marked and marking.canonical is not None:
        return marking.canonical, "marked_as_duplicate"
    if marked and candidates:
        return candidates[-1].ref, "comment+marked_as_duplicate"
    signal = signal or ("marked_as_duplicate" if marked else None)
    if signal:
        if len(mentioned) == 1:
            return next(iter(mentioned)), f"reference+{signal}"
        if len(mentioned) > 1:
            counts["ambiguous_references"] += 1
        return None, "unknown"
    if candidates:
        counts["unconfirmed_references"] += 1
    return None


# -- pairs and splits --------------------------------------------------------------------


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[Any, Any] = {}

    def find(self, node: Any) -> Any:
        self.parent.setdefault(node, node)
        root = node
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[node] != root:
            self.parent[node], node = root, self.parent[node]
        return root

    def union(self, a: Any, b: Any) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # The smaller node becomes the root, so roots do not depend on union order.
            lo, hi = sorted((ra, rb))
            self.parent[hi] = lo


def _fractions(split_sizes: Mapping[str, float]) -> list[float]:
    if set(split_sizes) != set(SPLITS) or any(v < 0 for v in split_sizes.values()) or sum(split_sizes.values()) <= 0:
        raise ValueError(f"split_sizes needs non-negative weights for exactly {SPLITS}, got {dict(split_sizes)}")
    total = float(sum(split_sizes.values()))
    return [split_sizes[s] / total for s in SPLITS]


def _greedy_assign(items: Sequence[Any], weight: Callable[[Any], int], fractions: Sequence[float]) -> dict[Any, int]:
    """Each item to the split furthest below its share of the weight assigned so far (first split on ties)."""
    assigned = [0.0] * len(fractions)
    total = 0.0
    out: dict[Any, int] = {}
    for item in items:
        w = weight(item)
        total += w
        deficits = [f * total - a for f, a in zip(fractions, assigned)]
        best = max(range(len(fractions)), key=lambda s: (deficits[s], -s))
        assigned[best] += w
        out[item] = best
    return out


def build_pairs(
    harvests: Sequence[RepoHarvest],
    *,
    seed: int = 0,
    split_sizes: Mapping[str, float] = PAPER_SPLIT_SIZES,
    negative_ratio: float = 1.0,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Positive and sampled negative pairs with issue-disjoint splits (rules in the module docstring).

    Returns the rows (``text1, text2, label, repo, issue1, issue2, split``),
    ordered by split, repository (in ``harvests`` order), issue numbers and label,
    and counts describing the construction. Deterministic for a given ``seed``.
    """
    fractions = _fractions(split_sizes)
    if negative_ratio < 0:
        raise ValueError("negative_ratio must be non-negative")
    if len({h.repo for h in harvests}) != len(harvests):
        raise ValueError("each repository may appear only once")
    info: Counter[str] = Counter()
    uf = _UnionFind()
    positives: list[tuple[str, int, int]] = []
    for h in harvests:
        directed = set(h.duplicates)
        for dup, orig in sorted(directed):
            if dup == orig:
                continue
            if (orig, dup) in directed:
                if dup < orig:
                    continue  # marked both ways: keep one pair, the newer issue as the duplicate
                info["mutual_markings_merged"] += 1
            if not h.texts[dup].strip() or not h.texts[orig].strip():
                info["positives_dropped_empty_text"] += 1
                continue
            positives.append((h.repo, dup, orig))
            uf.union((h.repo, dup), (h.repo, orig))
    pools: dict[str, list[int]] = {}
    for h in harvests:
        eligible = sorted(n for n in h.window if n not in h.no_negative and h.texts[n].strip())
        info["issues_with_empty_text"] += sum(1 for n in h.window if not h.texts[n].strip())
        pools[h.repo] = eligible
        for n in eligible:
            uf.find((h.repo, n))
    texts = {h.repo: h.texts for h in harvests}
    # Identical texts must share a split, or the same text would be seen in training and test.
    by_text: dict[str, tuple[str, int]] = {}
    for node in sorted(uf.parent):
        first = by_text.setdefault(texts[node[0]][node[1]], node)
        if first != node:
            uf.union(first, node)
            info["identical_text_links"] += 1
    weight: Counter[Any] = Counter(uf.find((repo, dup)) for repo, dup, _ in positives)
    size: Counter[Any] = Counter(uf.find(node) for node in list(uf.parent))
    rng = random.Random(seed)
    roots = sorted(size)
    tiebreak = {root: rng.random() for root in roots}
    with_pos = sorted((r for r in roots if weight[r] > 0), key=lambda r: (-weight[r], tiebreak[r]))
    split_of_root = _greedy_assign(with_pos, lambda r: weight[r], fractions)
    # Issues without positives only matter as negatives, which follow each repository's
    # positives; spreading them like those positives gives every (repository, split) a pool.
    repo_pos: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(SPLITS))
    for root in with_pos:
        repo_pos[root[0]][split_of_root[root]] += weight[root]
    without: dict[str, list[Any]] = defaultdict(list)
    for root in sorted((r for r in roots if weight[r] == 0), key=lambda r: tiebreak[r]):
        without[root[0]].append(root)
    for repo, items in sorted(without.items()):
        shares = repo_pos[repo] if sum(repo_pos[repo]) > 0 else fractions
        split_of_root.update(_greedy_assign(items, lambda r: size[r], [x / sum(shares) for x in shares]))

    def split_of(repo: str, number: int) -> int:
        return split_of_root[uf.find((repo, number))]

    rows: list[dict[str, Any]] = []
    per_split: dict[str, Counter[str]] = {s: Counter() for s in SPLITS}
    grouped: dict[tuple[int, str], list[tuple[int, int, int]]] = defaultdict(list)
    for repo, dup, orig in positives:
        grouped[(split_of(repo, dup), repo)].append((dup, orig, 1))
    for s_index, split in enumerate(SPLITS):
        for h in harvests:
            n_pos = len(grouped[(s_index, h.repo)])
            need = round(negative_ratio * n_pos)
            pool = [n for n in pools[h.repo] if split_of(h.repo, n) == s_index]
            local = random.Random(f"{seed}/{h.repo}/{split}")
            chosen: dict[tuple[int, int], None] = {}
            attempts, max_attempts = 0, 50 * need + 100
            while len(chosen) < need and len(pool) >= 2 and attempts < max_attempts:
                attempts += 1
                a, b = local.sample(pool, 2)
                if uf.find((h.repo, a)) == uf.find((h.repo, b)):
                    continue
                chosen.setdefault((max(a, b), min(a, b)))
            info["negatives_shortfall"] += need - len(chosen)
            grouped[(s_index, h.repo)].extend((a, b, 0) for a, b in chosen)
            texts_h = h.texts
            for first, second, label in sorted(grouped[(s_index, h.repo)], key=lambda t: (t[0], t[1], -t[2])):
                rows.append(
                    {
                        "text1": texts_h[first],
                        "text2": texts_h[second],
                        "label": label,
                        "repo": h.repo,
                        "issue1": first,
                        "issue2": second,
                        "split": split,
                    }
                )
                per_split[split]["positive" if label else "negative"] += 1
    info["positives"] = len(positives)
    info["components_with_positives"] = len(with_pos)
    info["largest_component_positives"] = max(weight.values(), default=0)
    summary: dict[str, Any] = dict(sorted(info.items()))
    summary["per_split"] = {s: {"positive": c["positive"], "negative": c["negative"]} for s, c in per_split.items()}
    return rows, summary


# -- the whole collection ------------------------------------------------------------------


def _write_jsonl_atomic(rows: Iterable[Mapping[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
        _split_repo(repo)
        if repo.lower() not in {r.lower() for r in unique}:
            unique.append(repo)
    if not unique:
        raise ValueError("no repositories given")
    since_dt, until_dt = parse_when(since), parse_when(until)
    if since_dt is not None and until_dt is not None and since_dt >= until_dt:
        raise ValueError(f"empty time window: since {_iso(since_dt)} is not before until {_iso(until_dt)}")
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
            "since": _iso(since_dt) if since_dt else None,
            "until": _iso(until_dt) if until_dt else None,
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
