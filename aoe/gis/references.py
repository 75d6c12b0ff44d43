"""GIS: the duplicate references in issue comments, labels and duplicate events.

Rules in :mod:`aoe.gis.collect`'s docstring ("Which comments count", "Bare references",
"Duplicate events"); :mod:`aoe.gis.harvest` applies them to a repository's issues.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DuplicateReference",
    "Marking",
    "apply_duplicate_events",
    "clean_comment",
    "duplicate_marking",
    "find_duplicate_references",
    "is_duplicate_label",
    "issue_references",
    "says_closing",
]

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


def clean_comment(text: str) -> str:
    """Comment text without code, quotes and HTML comments, where a "duplicate of" is not the author's own claim."""
    text = _FENCED_CODE_RE.sub("\n", text.replace("\r\n", "\n"))
    text = _HTML_COMMENT_RE.sub(" ", text)
    text = _INLINE_CODE_RE.sub(" ", text)
    return _QUOTE_LINE_RE.sub("", text)


def find_duplicate_references(text: str | None, repo: str) -> list[DuplicateReference]:
    """The duplicate references in a comment body, in order (rules in :mod:`aoe.gis.collect`'s docstring).

    ``repo`` (``owner/name``) decides whether an explicit ``OWNER/NAME#N`` or
    issue URL is same-repository; negated references are left out.
    """
    if not text:
        return []
    clean = clean_comment(text)
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


def issue_references(text: str | None, repo: str, exclude: Iterable[int] = ()) -> list[DuplicateReference]:
    """Every issue a comment refers to, once each in order of appearance (rules under "Bare references")."""
    if not text:
        return []
    clean = clean_comment(text)
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


def duplicate_marking(
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
class Marking:
    """Where an issue stands after its last ``marked_as_duplicate``/``unmarked_as_duplicate`` event."""

    marked: bool
    canonical: DuplicateReference | None = None


def apply_duplicate_events(events: Iterable[Mapping[str, Any]], repo: str, on_issue: int | None = None) -> dict[int, Marking]:
    """Each same-repository duplicate's marking after ``events`` (in the order given)."""
    markings: dict[int, Marking] = {}
    for event in events:
        kind = event.get("event")
        if kind not in ("marked_as_duplicate", "unmarked_as_duplicate"):
            continue
        dupe, canonical = duplicate_marking(event, repo, on_issue)
        if dupe is None or dupe.other_repo is not None:
            continue
        markings[dupe.number] = Marking(True, canonical) if kind == "marked_as_duplicate" else Marking(False)
    return markings


def is_duplicate_label(name: str) -> bool:
    """Whether a label asserts duplication ("duplicate", "status: duplicate"), not just suspects it."""
    lowered = name.lower()
    return "duplicate" in lowered and not _TENTATIVE_LABEL_RE.search(lowered)


def says_closing(text: str) -> bool:
    """Whether a comment (outside code, quotes and HTML comments) says it closes the issue."""
    return bool(_CLOSING_RE.search(clean_comment(text)))
