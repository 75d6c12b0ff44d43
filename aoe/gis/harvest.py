"""GIS: harvesting one repository, its issues and the duplicate pairs among them.

Which issues are listed, which requests are made and how an issue's duplicate target is
decided: :mod:`aoe.gis.collect`'s docstring ("Which issues", "Which comments count",
"Bare references", "Duplicate events", "API economy"); the reference parsing itself is
:mod:`aoe.gis.references`.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aoe.gis.client import (
    ACCEPT_HTML,
    ACCEPT_JSON,
    GISError,
    GitHubClient,
    MalformedResponse,
    NotFound,
    RequestFailed,
)
from aoe.gis.references import (
    DuplicateReference,
    Marking,
    apply_duplicate_events,
    find_duplicate_references,
    is_duplicate_label,
    issue_references,
    says_closing,
)
from aoe.util.progress import progress as progress_bar

__all__ = [
    "DEFAULT_LIST_MAX_AGE",
    "MAINTAINER_ASSOCIATIONS",
    "PER_PAGE",
    "RepoHarvest",
    "RepositoryNotFound",
    "harvest_repo",
    "is_repo_name",
    "iso_utc",
    "parse_when",
    "split_repo",
]

MAINTAINER_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
# Issue-list pages have no validator; within a day a resumed or repeated run
# trusts them, later ones revalidate them with If-None-Match (free when 304).
DEFAULT_LIST_MAX_AGE = 24 * 3600.0
PER_PAGE = 100

log = logging.getLogger("aoe.gis")

_REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
# Listings whose pagination is capped answer 422 past the deepest page they serve;
# what was listed up to there is still good.
_PAGINATION_LIMIT = 422


class RepositoryNotFound(GISError):
    """The repository does not exist on the API host (or the token cannot see it)."""


def is_repo_name(value: Any) -> bool:
    """Whether ``value`` is an ``OWNER/NAME`` string."""
    return isinstance(value, str) and bool(_REPO_RE.match(value))


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


def iso_utc(moment: datetime) -> str:
    """``moment`` (aware, UTC) as GitHub writes times: ``2024-01-31T12:00:00Z``."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _event_order(event: Mapping[str, Any]) -> tuple[str, int]:
    # ISO-8601 UTC stamps sort as strings; the id breaks ties within a second.
    event_id = event.get("id")
    return str(event.get("created_at") or ""), event_id if isinstance(event_id, int) else 0


def _repo_markings(
    client: GitHubClient, owner: str, name: str, repo: str, max_age: float | None, counts: Counter[str]
) -> tuple[dict[int, Marking], bool]:
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
    return apply_duplicate_events(sorted(events, key=_event_order), repo), complete


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


def split_repo(repo: str) -> tuple[str, str]:
    """(owner, name) of an ``OWNER/NAME`` string; anything else is a :class:`GISError`."""
    if not is_repo_name(repo):
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
    """List one repository's issues and find its duplicate pairs (rules in :mod:`aoe.gis.collect`'s docstring).

    Raises :class:`RepositoryNotFound` when the issue list answers 404/410, and
    the client's errors otherwise; whatever was fetched stays in the cache.
    """
    if comment_policy not in ("maintainers", "any"):
        raise ValueError(f"comment_policy must be 'maintainers' or 'any', not {comment_policy!r}")
    if body_format not in ("markdown", "html"):
        raise ValueError(f"body_format must be 'markdown' or 'html', not {body_format!r}")
    owner, name = split_repo(repo)
    requests_before = dict(client.counts)
    counts: Counter[str] = Counter()
    issues: dict[int, _Issue] = {}
    pull_requests: set[int] = set()
    params: dict[str, Any] = {"state": "all", "per_page": PER_PAGE, "sort": "created", "direction": "asc"}
    if since is not None:
        params["since"] = iso_utc(since)
    accept = ACCEPT_HTML if body_format == "html" else ACCEPT_JSON
    # a log line per interval (aoe.util.progress): pages while listing (no total yet), then issues with an ETA
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
        markings: dict[int, Marking] = {}
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


def _resolve_issue(
    client: GitHubClient,
    repo: str,
    issue: _Issue,
    comment_policy: str,
    counts: Counter[str],
    *,
    marking: Marking | None = None,
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
                says_closing_ = text is not None and says_closing(text)
                for ref in find_duplicate_references(text, repo):
                    candidates.append(_Candidate(ref, maintainer and not ref.hedged, says_closing_))
                if maintainer:
                    mentioned.update(dict.fromkeys(issue_references(text, repo, not_targets)))
    strong = [c for c in candidates if c.strong]
    if strong:
        return strong[-1].ref, "comment"
    signal = (
        "state_reason"
        if issue.state_reason == "duplicate"
        else "label"
        if any(is_duplicate_label(label) for label in issue.labels)
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
        marking = apply_duplicate_events(events, repo, issue.number).get(issue.number)
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
