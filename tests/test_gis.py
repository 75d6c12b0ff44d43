"""Tests for the GIS collector (aoe.gis) against a fake GitHub API on 127.0.0.1 (tests/fake_github.py).

Nothing leaves the machine and nothing really sleeps: the client's ``sleep`` and
``clock`` are a fake clock shared with the server's rate-limit headers.
"""

from __future__ import annotations

import json
import logging
import random
import time
import traceback
from collections import defaultdict
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from aoe.gis import (
    GitHubClient,
    MalformedResponse,
    OfflineError,
    RepositoryNotFound,
    RequestFailed,
    TokenRejected,
    build_pairs,
    collect,
    compute_stats,
    find_duplicate_references,
    load_pairs,
    load_repo_list,
    plot_all,
    rows_from_splits,
)
from aoe.gis.__main__ import main as cli_main
from aoe.gis.client import cache_namespace
from aoe.gis.collect import default_cache_dir
from aoe.gis.harvest import RepoHarvest
from aoe.gis.references import DuplicateReference
from aoe.gis.stats import ngram_overlap
from tests.fake_github import (
    BASE_TIME,
    UNMARKED,
    FakeGitHub,
    marked_as_duplicate,
    stamp,
)

TOKEN = "ghp_FAKE0123456789abcdefSECRETxyz"
REPO = "acme/widgets"
OTHER = "acme/gadgets"

# (duplicate, original) pairs the scenario in `populate` must yield, nothing more.
EXPECTED_WIDGETS = {
    (2, 1), (3, 1), (5, 4), (6, 4), (8, 9), (11, 1), (18, 4), (20, 2), (21, 9),
    (22, 9), (23, 1), (24, 4), (26, 9), (47, 46),
}
EXPECTED_GADGETS = {(2, 1)}
# Issues known to be duplicates of something unusable: never in negatives.
NO_NEGATIVE = {7, 12, 14, 25}


class FakeClock:
    """Shared by client (sleep, clock) and server (X-RateLimit-Reset): sleeping advances time instantly."""

    def __init__(self) -> None:
        self.now = time.time()
        self.sleeps: list[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class Killed(Exception):
    """Stands in for the process being killed between two requests."""


def populate(github: FakeGitHub) -> None:
    """Two synthetic repositories covering every duplicate phrasing and corner case the collector handles."""
    w = github.repo(REPO)
    for n in (1, 4, 9, 30):  # originals and a plain issue
        w.add_issue(n)
    w.add_issue(2, comments=[("MEMBER", "Duplicate of #1")])
    w.add_issue(3, comments=[("NONE", "Same here"), ("OWNER", "Thanks for the report! Closing as a duplicate of #1.")])
    w.add_issue(5, comments=[("COLLABORATOR", "dup of #4")])
    w.add_issue(6, comments=[("MEMBER", "Duplicate of https://github.com/acme/widgets/issues/4")])
    w.add_issue(7, comments=[("MEMBER", "Duplicate of https://github.com/other/place/issues/4")])
    # A non-maintainer's marking, confirmed by GitHub's marked_as_duplicate event (no canonical in REST).
    w.add_issue(8, comments=[("CONTRIBUTOR", "Duplicate of #9")], events=[marked_as_duplicate()])
    # Marked, then unmarked: not a duplicate.
    w.add_issue(10, comments=[("NONE", "Duplicate of #9")], events=[marked_as_duplicate(), UNMARKED])
    # No comments; closed as duplicate; the event names the canonical issue.
    w.add_issue(11, state="closed", state_reason="duplicate", events=[marked_as_duplicate(1)])
    w.add_issue(12, state="closed", state_reason="duplicate", comments=[("NONE", "thanks, closing")])
    w.add_issue(13, pull_request=True, comments=[("MEMBER", "Duplicate of #1")])
    w.add_issue(14, comments=[("MEMBER", "Duplicate of #13")])
    w.add_issue(15, title="", body="", comments=[("MEMBER", "duplicate of #1")])
    w.add_issue(16, comments=[("MEMBER", "Possible duplicate of #4?")])
    w.add_issue(17, comments=[("MEMBER", "This is not a duplicate of #4, reopening.")])
    w.add_issue(18, labels=("duplicate",), comments=[("MEMBER", "I think this is a duplicate of #4")])
    w.add_issue(19, comments=[("MEMBER", "> Duplicate of #1\n\nI disagree with the above.")])
    w.add_issue(20, comments=[("MEMBER", "Duplicate of #2")])
    w.add_issue(21, comments=[("OWNER", "dupe of acme/widgets#9")])
    w.add_issue(22, comments=[("MEMBER", "This duplicates #9.")])
    w.add_issue(23, comments=[("NONE", "Duplicate of #1")], bot_comments=(0,))
    # Seven comments: two pages of five; the marking is on the second page.
    w.add_issue(24, comments=[("NONE", f"me too {i}") for i in range(6)] + [("MEMBER", "Duplicate #4")])
    w.add_issue(25, comments=[("MEMBER", "Duplicate of #999")])
    w.add_issue(26, state="closed", state_reason="completed", comments=[("CONTRIBUTOR", "closing as duplicate of #9")])
    w.add_issue(27, labels=("possible duplicate",))
    w.add_issue(28, comments=[("MEMBER", "Duplicate of #28")])
    w.add_issue(29, comments=[("MEMBER", "```\nDuplicate of #1\n```")])
    for n in range(31, 44):
        w.add_issue(n, body=f"Plain issue {n} about subsystem {n % 5}.")
    w.add_issue(46, comments=[("MEMBER", "Duplicate of #47")])
    w.add_issue(47, comments=[("MEMBER", "Duplicate of #46")])
    g = github.repo(OTHER)
    g.add_issue(1)
    g.add_issue(2, comments=[("MEMBER", "duplicate of #1")])
    for n in range(3, 9):
        g.add_issue(n)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("GITHUB_TOKEN", "GITHUB_API_URL", "AOE_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def github(clock: FakeClock):
    server = FakeGitHub(max_per_page=5, valid_tokens=(TOKEN,), clock=clock.time).start()
    populate(server)
    yield server
    server.stop()


def make_client(github: FakeGitHub, cache: Path, clock: FakeClock, token: str = TOKEN, **kwargs) -> GitHubClient:
    return GitHubClient(github.url, token, cache, sleep=clock.sleep, clock=clock.time, **kwargs)


def run(github: FakeGitHub, tmp_path: Path, clock: FakeClock, repos=(REPO, OTHER), out: str = "out", cache: str = "cache", **kwargs):
    client_kwargs = {k: kwargs.pop(k) for k in ("token", "on_request", "max_attempts") if k in kwargs}
    client = make_client(github, tmp_path / cache, clock, **client_kwargs)
    stats = collect(list(repos), tmp_path / out, client=client, progress=False, **kwargs)
    return stats, load_pairs(tmp_path / out / "pairs.jsonl")


def test_progress_lines_per_repository(github: FakeGitHub, tmp_path: Path, clock: FakeClock, monkeypatch, capsys) -> None:
    """The collector's log: per repository, the listing's pages, then its issues with an ETA (aoe.util.progress)."""
    monkeypatch.setenv("AOE_PROGRESS_INTERVAL", "0")
    stats = collect([REPO], tmp_path / "out", client=make_client(github, tmp_path / "cache", clock), progress=True)
    err = capsys.readouterr().err
    window = stats["collection"]["repositories"][REPO]["issues_in_window"]
    assert f"{REPO} (listing): 0 page, elapsed 00:00" in err and "\r" not in err
    assert f"{REPO}: 0/{window} issue (0%), elapsed 00:00, ETA ?" in err
    assert f"{REPO}: {window}/{window} issue (100%)" in err


def positives(rows, repo: str = REPO) -> set[tuple[int, int]]:
    return {(r["issue1"], r["issue2"]) for r in rows if r["label"] == 1 and r["repo"] == repo}


def components(pairs: set[tuple[int, int]]) -> dict[int, int]:
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b in pairs:
        parent[find(a)] = find(b)
    return {x: find(x) for x in list(parent)}


# -- parsing of comments --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Duplicate of #12", [(12, None, False)]),
        ("DUPLICATE OF #12", [(12, None, False)]),
        ("Thanks! Closing as a duplicate of #12.", [(12, None, False)]),
        ("closing as duplicate of #12", [(12, None, False)]),
        ("dup of #12", [(12, None, False)]),
        ("Dupe of #12", [(12, None, False)]),
        ("This duplicates #12.", [(12, None, False)]),
        ("Duplicate #12", [(12, None, False)]),
        ("Duplicate: #12", [(12, None, False)]),
        ("duplicate of issue #12", [(12, None, False)]),
        ("duplicate of acme/widgets#12", [(12, None, False)]),
        ("duplicate of ACME/Widgets#12", [(12, None, False)]),
        ("Duplicate of https://github.com/acme/widgets/issues/12", [(12, None, False)]),
        ("Duplicate of [#12](https://github.com/acme/widgets/issues/12)", [(12, None, False)]),
        ("duplicate of https://github.com/other/repo/issues/12", [(12, "other/repo", False)]),
        ("duplicate of Other/Repo#12", [(12, "other/repo", False)]),
        ("Possible duplicate of #12", [(12, None, True)]),
        ("Looks like a dup of #12", [(12, None, True)]),
        ("Is this a duplicate of #12?", [(12, None, True)]),
        ("Duplicate of #12?", [(12, None, True)]),
        ("Not a duplicate of #12", []),
        ("This isn't a duplicate of #12.", []),
        ("Duplicated by #12", []),
        ("> Duplicate of #12\nI disagree", []),
        ("```\nDuplicate of #12\n```", []),
        ("run `duplicate of #12` here", []),
        ("<!-- Duplicate of #12 -->", []),
        ("See #12, it is related", []),
        ("Not related. Duplicate of #12", [(12, None, False)]),
    ],
)
def test_duplicate_reference_phrasings(text: str, expected: list[tuple]) -> None:
    assert find_duplicate_references(text, "acme/widgets") == [DuplicateReference(*e) for e in expected]


# -- the whole collection --------------------------------------------------------------------


def test_collects_exactly_the_expected_pairs(github: FakeGitHub, tmp_path: Path, clock: FakeClock) -> None:
    stats, rows = run(github, tmp_path, clock)
    assert positives(rows) == EXPECTED_WIDGETS
    assert positives(rows, OTHER) == EXPECTED_GADGETS
    keys = [(r["repo"], r["issue1"], r["issue2"]) for r in rows]
    assert len(keys) == len(set(keys)), "a pair appears twice"
    for r in rows:
        assert set(r) == {"text1", "text2", "label", "repo", "issue1", "issue2", "split"}
        assert r["text1"].strip() and r["text2"].strip()
    by_issue = {(REPO, n): item for n, item in github.repo(REPO).items.items()}
    row = next(r for r in rows if (r["issue1"], r["issue2"]) == (2, 1))
    assert row["text1"] == f"{by_issue[(REPO, 2)]['title']}\n{by_issue[(REPO, 2)]['body']}"
    assert "```python" in row["text2"], "code blocks are kept"
    counts = stats["collection"]["repositories"][REPO]
    assert counts["pull_requests_skipped"] == 1
    assert counts["target_pull_request"] == 1
    assert counts["target_other_repo"] == 1
    assert counts["target_not_listed"] == 1
    assert counts["duplicate_without_target"] == 1
    assert counts["self_reference_ignored"] == 1
    assert counts["evidence:marked_as_duplicate"] == 1
    assert counts["evidence:comment+marked_as_duplicate"] == 1
    assert stats["collection"]["pairs"]["positives_dropped_empty_text"] == 1
    assert stats["collection"]["pairs"]["mutual_markings_merged"] == 1
    # API economy: no comments for the PR or for comment-less issues; duplicate events come from
    # one pass over each repository's events listing, never from a timeline per issue.
    assert not github.requests_to("/issues/13/")
    assert not github.requests_to("/issues/1/comments")
    assert not github.requests_to("/timeline")
    for repo in (REPO, OTHER):
        pages = [e.page for e in github.requests_to(f"/repos/{repo}/issues/events?")]
        assert pages == list(range(1, stats["collection"]["repositories"][repo]["issue_event_pages"] + 1))
    # Negatives: balanced per repository and split, never linked, never a known duplicate.
    comp = components(EXPECTED_WIDGETS)
    for split in ("train", "valid", "test"):
        for repo in (REPO, OTHER):
            part = [r for r in rows if r["split"] == split and r["repo"] == repo]
            assert sum(r["label"] == 0 for r in part) == sum(r["label"] == 1 for r in part)
    for r in rows:
        if r["label"] == 0 and r["repo"] == REPO:
            a, b = r["issue1"], r["issue2"]
            assert comp.get(a, a) != comp.get(b, b)
            assert not {a, b} & (NO_NEGATIVE | {13, 15})
    assert stats["dataset"]["table7"]["all"]["positive"] == len(EXPECTED_WIDGETS) + len(EXPECTED_GADGETS)


def test_splits_are_issue_and_text_disjoint(github: FakeGitHub, tmp_path: Path, clock: FakeClock) -> None:
    _, rows = run(github, tmp_path, clock)
    assert {r["split"] for r in rows} == {"train", "valid", "test"}
    split_of_issue: dict[tuple[str, int], set[str]] = defaultdict(set)
    split_of_text: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        for n, text in ((r["issue1"], r["text1"]), (r["issue2"], r["text2"])):
            split_of_issue[(r["repo"], n)].add(r["split"])
            split_of_text[text].add(r["split"])
    assert all(len(s) == 1 for s in split_of_issue.values())
    assert all(len(s) == 1 for s in split_of_text.values())


def synthetic_harvests(seed: int, repos: int = 3, issues: int = 500) -> list[RepoHarvest]:
    rng = random.Random(seed)
    out = []
    for r in range(repos):
        texts = {n: f"repo {r} issue {n} " + " ".join(rng.choice("abcdefgh") for _ in range(8)) for n in range(1, issues + 1)}
        # Issue templates left unfilled: groups of different issues with the very same text.
        for n in range(issues - 100, issues + 1):
            texts[n] = f"unfilled template {n % 10}"
        texts[7] = texts[8] = "identical template text"
        dups = []
        for n in range(10, issues + 1):
            if rng.random() < 0.3:
                dups.append((n, rng.randrange(1, n)))
        dups.append((8, 3))  # issue 7 is unrelated to 3 but shares issue 8's text
        out.append(RepoHarvest(f"org/repo{r}", texts, set(texts), dups, set(), {}))
    return out


def test_build_pairs_sizes_disjointness_and_determinism() -> None:
    harvests = synthetic_harvests(0)
    rows, info = build_pairs(harvests, seed=3)
    again, _ = build_pairs(synthetic_harvests(0), seed=3)
    assert rows == again, "same seed, same output"
    other, _ = build_pairs(synthetic_harvests(0), seed=4)
    assert other != rows
    pos = {s: sum(1 for r in rows if r["split"] == s and r["label"] == 1) for s in ("train", "valid", "test")}
    total = sum(pos.values())
    assert total == sum(len(h.duplicates) for h in harvests)
    # The paper's 18,565 : 1,547 : 1,548, within a few pairs (components are indivisible).
    assert abs(pos["train"] / total - 18565 / 21660) < 0.02
    assert abs(pos["valid"] / total - 1547 / 21660) < 0.02
    assert abs(pos["test"] / total - 1548 / 21660) < 0.02
    neg = sum(1 for r in rows if r["label"] == 0)
    assert neg == total - info["negatives_shortfall"] and info["negatives_shortfall"] == 0
    seen: dict[tuple[str, int], str] = {}
    texts: dict[str, str] = {}
    for r in rows:
        for n, text in ((r["issue1"], r["text1"]), (r["issue2"], r["text2"])):
            assert seen.setdefault((r["repo"], n), r["split"]) == r["split"]
            assert texts.setdefault(text, r["split"]) == r["split"]
    for h in harvests:
        same_text = {(n, min(m for m in h.texts if h.texts[m] == t)) for n, t in h.texts.items()}
        comp = components(set(h.duplicates) | same_text)
        for r in rows:
            if r["repo"] == h.repo and r["label"] == 0:
                assert comp.get(r["issue1"], r["issue1"]) != comp.get(r["issue2"], r["issue2"])


def test_time_window_and_early_stop(github: FakeGitHub, tmp_path: Path, clock: FakeClock) -> None:
    w = github.repo("acme/window")
    for n in range(1, 13):
        w.add_issue(n, comments=[("MEMBER", {5: "Duplicate of #2", 6: "Duplicate of #1", 10: "Duplicate of #4"}[n])] if n in (5, 6, 10) else None)
    w.add_comment(2, "NONE", "still happening")  # active after `since`: listed as a context issue
    since, until = stamp(BASE_TIME + timedelta(hours=3)), stamp(BASE_TIME + timedelta(hours=9))
    stats, rows = run(github, tmp_path, clock, repos=("acme/window",), since=since, until=until)
    assert positives(rows, "acme/window") == {(5, 2)}
    counts = stats["collection"]["repositories"]["acme/window"]
    assert counts["context_issues"] == 1 and counts["issues_in_window"] == 6
    assert counts["target_not_listed"] == 1  # issue 1 was never updated after `since`
    assert not github.requests_to("/issues/10/"), "issue 10 is after `until`"
    assert not [e for e in github.requests_to("/repos/acme/window/issues?") if e.page == 3], "paging stops at `until`"
    listed = github.requests_to("/repos/acme/window/issues?")[0].path
    assert "since=2023-01-01T03%3A00%3A00Z" in listed
    for r in rows:
        if r["label"] == 0:
            assert {r["issue1"], r["issue2"]} <= set(range(3, 9))


def test_html_bodies(github: FakeGitHub, tmp_path: Path, clock: FakeClock) -> None:
    _, rows = run(github, tmp_path, clock, repos=(OTHER,), body_format="html")
    assert rows and all("<p>" in r["text1"] for r in rows)
    assert all("html" in e.accept for e in github.requests_to("/repos/acme/gadgets/issues?"))
    assert all("html" not in e.accept for e in github.requests_to("/comments"))


RECALL_REPO = "acme/recall"
CLOSED_DUPLICATE = {"state": "closed", "state_reason": "duplicate"}


def populate_recall(github: FakeGitHub) -> tuple[set[tuple[int, int]], set[int]]:
    """One repository with every marking style: the (duplicate, original) pairs to find, and issues that must not pair.

    Issues 1-10 are originals, 40 a pull request; 11-35 are duplicates, 41-47 are not
    (or not resolvable) and must yield no pair.
    """
    r = github.repo(RECALL_REPO)
    for n in range(1, 11):
        r.add_issue(n)
    r.add_issue(40, pull_request=True)
    expected: set[tuple[int, int]] = set()

    def dup(number: int, original: int, **kwargs) -> None:
        r.add_issue(number, **kwargs)
        expected.add((number, original))

    def event(canonical: int | None = None) -> dict:
        return marked_as_duplicate(canonical, RECALL_REPO)

    # A maintainer's (or bot's) comment in the usual phrasings.
    dup(11, 1, comments=[("MEMBER", "Duplicate of #1")])
    dup(12, 2, comments=[("OWNER", "Thanks! Closing as a duplicate of #2.")], **CLOSED_DUPLICATE)
    dup(13, 3, comments=[("COLLABORATOR", "dup of #3")])
    dup(14, 4, comments=[("MEMBER", "dupe of acme/recall#4")])
    dup(15, 5, comments=[("MEMBER", "This duplicates #5.")])
    dup(16, 6, comments=[("MEMBER", "Duplicate of https://github.com/acme/recall/issues/6")])
    dup(17, 7, comments=[("NONE", "Duplicate of #7")], bot_comments=(0,))
    # Anyone's comment, corroborated by the close reason, a label, the closing itself or GitHub's event.
    dup(18, 8, comments=[("NONE", "duplicate of #8")], **CLOSED_DUPLICATE)
    dup(19, 9, comments=[("CONTRIBUTOR", "Duplicate of #9")], labels=("duplicate",))
    dup(20, 10, comments=[("CONTRIBUTOR", "Closing as duplicate of #10")], state="closed", state_reason="completed")
    dup(21, 1, comments=[("NONE", "Duplicate of #1")], events=[event()])
    # The event names the canonical issue.
    dup(22, 2, events=[event(2)], **CLOSED_DUPLICATE)
    # Only the event: no comment, no close reason (older issues have none), or the wrong one.
    dup(23, 3, state="closed", events=[event(3)])
    dup(24, 4, state="closed", state_reason="completed", events=[event(4)])
    dup(25, 5, events=[event(5)])
    dup(26, 6, state="closed", events=[event(7), UNMARKED, event(6)])  # re-marked: the last marking holds
    # Closed as duplicate; a maintainer's bare reference names the original.
    dup(27, 7, comments=[("MEMBER", "Same as #7")], **CLOSED_DUPLICATE)
    dup(28, 8, comments=[("OWNER", "→ #8")], **CLOSED_DUPLICATE)
    dup(29, 9, comments=[("MEMBER", "#9")], **CLOSED_DUPLICATE)
    dup(30, 10, comments=[("NONE", "+1"), ("MEMBER", "See acme/recall#10, closing.")], **CLOSED_DUPLICATE)
    dup(31, 1, comments=[("MEMBER", "Tracked in https://github.com/acme/recall/issues/1")], **CLOSED_DUPLICATE)
    dup(32, 2, comments=[("MEMBER", "Same as #2")], labels=("duplicate",))
    dup(33, 3, state="closed", comments=[("MEMBER", "Same as #3")], events=[event()])
    dup(34, 4, comments=[("MEMBER", "Same as #4; the fix is in #40, and this is #34.")], **CLOSED_DUPLICATE)
    dup(35, 5, comments=[("MEMBER", "> is it #1?\n\nSame as #5")], **CLOSED_DUPLICATE)
    # Not duplicates, or duplicates whose original cannot be told: no pair, and no guess.
    r.add_issue(41, comments=[("MEMBER", "Same as #1 or #2, not sure which")], **CLOSED_DUPLICATE)
    r.add_issue(42, comments=[("NONE", "Same as #3")], **CLOSED_DUPLICATE)
    r.add_issue(43, comments=[("MEMBER", "See #4 for background")])
    r.add_issue(44, comments=[("MEMBER", "Fixed by #40")], state="closed", state_reason="completed")
    r.add_issue(45, state="closed", events=[event(5), UNMARKED])
    r.add_issue(46, comments=[("MEMBER", "This is not the same as #6. Closing anyway.")], **CLOSED_DUPLICATE)
    r.add_issue(47, comments=[("MEMBER", "Same as #8")], labels=("possible duplicate",))
    return expected, {41, 42, 43, 44, 45, 46, 47}


def test_recall_over_every_marking_style(github: FakeGitHub, tmp_path: Path, clock: FakeClock) -> None:
    expected, not_pairs = populate_recall(github)
    stats, rows = run(github, tmp_path, clock, repos=(RECALL_REPO,))
    found = positives(rows, RECALL_REPO)
    missed = sorted(expected - found)
    recall = len(expected & found) / len(expected)
    assert recall == 1.0, f"recall {recall:.2f}: missed {missed}"
    assert found == expected, f"spurious pairs {sorted(found - expected)}"
    counts = stats["collection"]["repositories"][RECALL_REPO]
    assert counts["ambiguous_references"] == 1  # 41
    assert counts["duplicate_without_target"] == 3  # 41, 42, 46
    assert counts["evidence:marked_as_duplicate"] == 5  # 22-26
    assert counts["evidence:reference+state_reason"] == 7  # 27-31, 34, 35
    assert counts["evidence:reference+label"] == 1 and counts["evidence:reference+marked_as_duplicate"] == 1
    assert not {r["issue1"] for r in rows if r["label"] == 1} & not_pairs
    # One pass over the events listing replaces every per-issue timeline request.
    assert not github.requests_to("/timeline")
    event_pages = -(-len(github.repo(RECALL_REPO).issue_events()) // 5)
    assert counts["issue_event_pages"] == event_pages > 1
    assert len(github.requests_to(f"/repos/{RECALL_REPO}/issues/events?")) == event_pages
    assert {int(e.route.split("/")[5]) for e in github.requests_to("/comments")} == {
        n for n, item in github.repo(RECALL_REPO).items.items() if item["comments"]
    }


def test_timelines_replace_an_unavailable_events_listing(github: FakeGitHub, tmp_path: Path, clock: FakeClock) -> None:
    # A GitHub-compatible server without the repository-wide listing: the per-issue timelines decide.
    github.fail(f"/repos/{REPO}/issues/events", 404)
    stats, rows = run(github, tmp_path, clock, repos=(REPO,))
    assert positives(rows) == EXPECTED_WIDGETS
    counts = stats["collection"]["repositories"][REPO]
    assert counts["issue_events_incomplete"] == 1
    assert {int(e.route.split("/")[5]) for e in github.requests_to("/timeline")} == {8, 10, 11, 12, 16}


def test_events_listing_cut_short_falls_back_to_timelines(github: FakeGitHub, tmp_path: Path, clock: FakeClock) -> None:
    expected, _ = populate_recall(github)
    # A capped listing answers 422 past its deepest page.
    github.fail(f"/repos/{RECALL_REPO}/issues/events", 422, page=2)
    stats, rows = run(github, tmp_path, clock, repos=(RECALL_REPO,))
    counts = stats["collection"]["repositories"][RECALL_REPO]
    assert counts["issue_events_incomplete"] == 1 and counts["issue_event_pages"] == 1
    found = positives(rows, RECALL_REPO)
    assert found <= expected
    # The first (newest) page still reveals the event-only markings it holds; the timeline confirms them.
    first_page = {e["issue"]["number"] for e in github.repo(RECALL_REPO).issue_events()[:5]}
    timelines = {int(e.route.split("/")[5]) for e in github.requests_to("/timeline")}
    assert first_page <= timelines
    assert {(d, o) for d, o in expected if d in first_page} <= found


@pytest.mark.parametrize(
    ("event", "on_issue", "expected"),
    [
        # Timeline shape: the issue is the timeline's own.
        ({"event": "marked_as_duplicate", "canonical": {"number": 4}}, 9, (9, 4)),
        ({"event": "marked_as_duplicate"}, 9, (9, None)),
        # Repository-listing shape: the issue is named in the event.
        ({"event": "marked_as_duplicate", "issue": {"number": 9}, "canonical": {"number": 4}}, None, (9, 4)),
        ({"event": "marked_as_duplicate", "issue": {"number": 9, "html_url": "https://github.com/acme/widgets/issues/9"}}, None, (9, None)),
        # An explicit duplicate side overrides the issue the event is listed under.
        ({"event": "marked_as_duplicate", "issue": {"number": 4}, "duplicate": {"number": 9}, "canonical": {"number": 4}}, None, (9, 4)),
        ({"event": "marked_as_duplicate", "duplicate": {"number": 9}, "canonical": {"number": 4}}, 4, (9, 4)),
        (
            {"event": "marked_as_duplicate", "issue": {"number": 9},
             "canonical": {"html_url": "https://github.com/Other/Place/issues/4"}},
            None,
            (9, ("other/place", 4)),
        ),
    ],
)
def test_duplicate_event_shapes(event: dict, on_issue: int | None, expected: tuple) -> None:
    from aoe.gis.references import duplicate_marking as _duplicate_marking

    dupe, canonical = _duplicate_marking(event, REPO, on_issue)
    assert dupe == DuplicateReference(expected[0])
    want = expected[1]
    if isinstance(want, tuple):
        assert canonical == DuplicateReference(want[1], want[0])
    else:
        assert canonical == (DuplicateReference(want) if want is not None else None)


# -- robustness ------------------------------------------------------------------------------


def test_rate_limits_are_waited_out(github: FakeGitHub, tmp_path: Path, clock: FakeClock) -> None:
    github.fail(f"/repos/{REPO}/issues", ("primary", 120), page=1)
    github.fail(f"/repos/{REPO}/issues", ("primary-ok", 50), page=2)  # used up the last request
    github.fail(f"/repos/{REPO}/issues", ("secondary", 7), page=3)
    github.fail(f"/repos/{REPO}/issues", ("429", 3), page=4)
    _, rows = run(github, tmp_path, clock, repos=(REPO,))
    assert positives(rows) == EXPECTED_WIDGETS
    assert 119 <= clock.sleeps[0] <= 122, clock.sleeps  # until X-RateLimit-Reset (+1 s slack)
    assert 49 <= clock.sleeps[1] <= 52, clock.sleeps  # waited before the next request, not after a 403
    assert clock.sleeps[2:] == [7, 3]
    assert [e.status for e in github.requests_to(f"/repos/{REPO}/issues?")][:7] == [403, 200, 200, 403, 200, 429, 200]


def test_transient_failures_are_retried(github: FakeGitHub, tmp_path: Path, clock: FakeClock) -> None:
    github.fail(f"/repos/{REPO}/issues", 502, 503, page=1)
    github.fail(f"/repos/{REPO}/issues", "drop", "truncate", page=2)
    github.fail(f"/repos/{REPO}/issues/24/comments", 500, page=2)
    _, rows = run(github, tmp_path, clock, repos=(REPO,))
    assert positives(rows) == EXPECTED_WIDGETS
    assert clock.sleeps == [1, 2, 1, 2, 1]  # exponential backoff, reset per request
    assert [e.status for e in github.requests_to(f"/repos/{REPO}/issues?") if e.page == 2][:3] == ["drop", "truncate", 200]


def test_retries_are_bounded_and_errors_name_the_url(github: FakeGitHub, tmp_path: Path, clock: FakeClock) -> None:
    github.fail(f"/repos/{REPO}/issues", *[500] * 10, page=1)
    with pytest.raises(RequestFailed) as info:
        run(github, tmp_path, clock, repos=(REPO,), max_attempts=3)
    message = str(info.value)
    assert f"{github.url}/repos/{REPO}/issues?" in message and "after 3 attempts" in message and "HTTP 500" in message
    assert len(github.requests_to(f"/repos/{REPO}/issues?")) == 3
    assert TOKEN not in message


def test_kill_and_resume_repeats_no_completed_request(github: FakeGitHub, tmp_path: Path, clock: FakeClock) -> None:
    _, clean_rows = run(github, tmp_path, clock, cache="clean-cache", out="clean")
    clean_requests = len(github.log)
    assert clean_requests > 30
    for kill_at in (4, 13, 29):
        github.log.clear()
        calls: list[str] = []

        def hook(url: str, kill_at: int = kill_at, calls: list[str] = calls) -> None:
            calls.append(url)
            if len(calls) == kill_at:
                raise Killed(url)

        cache = f"cache-{kill_at}"
        with pytest.raises(Killed):
            run(github, tmp_path, clock, cache=cache, out=f"out-{kill_at}", on_request=hook)
        first = list(github.log)
        assert len(first) == kill_at - 1 and all(e.status == 200 for e in first)
        github.log.clear()
        _, rows = run(github, tmp_path, clock, cache=cache, out=f"out-{kill_at}")
        done = {e.path for e in first}
        repeated = [e for e in github.log if e.path in done]
        assert all(e.if_none_match and e.status == 304 for e in repeated), repeated
        fresh = [e for e in github.log if e.path not in done]
        assert len(first) + len(fresh) == clean_requests, "nothing fetched twice, nothing skipped"
        assert rows == clean_rows


def test_rerun_costs_nothing_and_revalidates_with_etags(github: FakeGitHub, tmp_path: Path, clock: FakeClock) -> None:
    _, rows = run(github, tmp_path, clock)
    github.log.clear()
    stats, again = run(github, tmp_path, clock)
    assert again == rows and not github.log, "a re-run within list_max_age makes no request"
    assert stats["collection"]["client"]["network"] == 0
    # Later, list pages are revalidated; unchanged ones answer 304 and nothing else is asked.
    github.repo(REPO).add_comment(35, "MEMBER", "Duplicate of #1")
    stats, updated = run(github, tmp_path, clock, list_max_age=0)
    list_requests = [e for e in github.log if "/issues?" in e.path]
    conditional = [e for e in list_requests if e.if_none_match]
    assert len(conditional) == len(list_requests) - 2, "all but the last page of each list are conditional"
    assert sum(e.status == 304 for e in conditional) == len(conditional) - 1  # only the page holding #35 changed
    assert {e.route for e in github.log if "/issues?" not in e.path} == {
        f"/repos/{REPO}/issues/35/comments", f"/repos/{REPO}/issues/events", f"/repos/{OTHER}/issues/events",
    }
    assert positives(updated) == EXPECTED_WIDGETS | {(35, 1)}
    assert stats["collection"]["client"]["not_modified"] == len(conditional) - 1


def test_a_full_last_page_gaining_a_successor(github: FakeGitHub, tmp_path: Path, clock: FakeClock) -> None:
    repo = github.repo("acme/full")
    repo.add_issue(1)
    repo.add_issue(2, comments=[("NONE", f"me too {i}") for i in range(5)])  # exactly one full page
    _, rows = run(github, tmp_path, clock, repos=("acme/full",))
    assert not positives(rows, "acme/full")
    repo.add_comment(2, "MEMBER", "Duplicate of #1")  # lands on a new second page
    _, rows = run(github, tmp_path, clock, repos=("acme/full",), list_max_age=0)
    assert positives(rows, "acme/full") == {(2, 1)}


def test_offline_uses_the_cache_or_says_why_not(github: FakeGitHub, tmp_path: Path, clock: FakeClock, monkeypatch) -> None:
    monkeypatch.setenv("AOE_OFFLINE", "1")
    with pytest.raises(OfflineError, match="AOE_OFFLINE"):
        run(github, tmp_path, clock)
    assert not github.log
    monkeypatch.delenv("AOE_OFFLINE")
    _, rows = run(github, tmp_path, clock)
    github.log.clear()
    monkeypatch.setenv("AOE_OFFLINE", "1")
    _, offline_rows = run(github, tmp_path, clock, list_max_age=0)
    assert offline_rows == rows and not github.log


def test_cache_folders_are_per_api_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    same = ("https://api.github.com", "https://API.github.com/", "https://api.github.com:443")
    assert len({default_cache_dir(u) for u in same}) == 1
    assert default_cache_dir() == default_cache_dir("https://api.github.com")
    others = ("http://api.github.com", "https://api.github.com:8443", "https://ghe.example/api/v3", "https://ghe.example/api/v4")
    assert len({default_cache_dir(u) for u in same[:1] + others}) == 5
    assert default_cache_dir("https://ghe.example/api/v3").name.startswith("ghe.example_api_v3-")
    secret = default_cache_dir(f"https://x-access-token:{TOKEN}@ghe.example/api/v3")
    assert TOKEN not in str(secret) and secret == default_cache_dir("https://ghe.example/api/v3")
    assert default_cache_dir().parent == tmp_path / "xdg" / "aoe" / "gis"


def test_two_servers_on_one_host_never_share_cached_pages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    first, second = FakeGitHub(valid_tokens=(TOKEN,)).start(), FakeGitHub(valid_tokens=(TOKEN,)).start()
    try:
        # Same repository name, same issue numbers and times, different duplicates.
        for n in range(1, 7):
            first.repo(REPO).add_issue(n, comments=[("MEMBER", "Duplicate of #1")] if n == 2 else None)
            second.repo(REPO).add_issue(n, comments=[("MEMBER", "Duplicate of #4")] if n == 5 else None)
        assert urlsplit(first.url).hostname == urlsplit(second.url).hostname

        def collect_from(server: FakeGitHub, out: str, **kwargs) -> tuple[dict, set[tuple[int, int]]]:
            stats = collect([REPO], tmp_path / out, api_url=server.url, token=TOKEN, progress=False, **kwargs)
            return stats, positives(load_pairs(tmp_path / out / "pairs.jsonl"))

        assert collect_from(first, "a")[1] == {(2, 1)}
        stats, pairs = collect_from(second, "b")
        assert pairs == {(5, 4)}, "the second server's own data"
        assert stats["collection"]["client"]["network"] > 0 and second.log
        assert stats["collection"]["client"]["cache"] == 0
        assert sorted(p.name for p in (tmp_path / "xdg" / "aoe" / "gis").iterdir()) == sorted(
            cache_namespace(s.url) for s in (first, second)
        )
        # One folder given for both: entries are keyed by the API root, so neither answers for the other.
        shared = tmp_path / "shared"
        assert collect_from(first, "c", cache_dir=shared)[1] == {(2, 1)}
        second.log.clear()
        stats, pairs = collect_from(second, "d", cache_dir=shared)
        assert pairs == {(5, 4)} and stats["collection"]["client"]["cache"] == 0 and second.log
        first.log.clear()
        stats, pairs = collect_from(first, "e", cache_dir=shared)
        assert pairs == {(2, 1)} and stats["collection"]["client"]["network"] == 0 and not first.log
    finally:
        first.stop()
        second.stop()


# -- bad input: clear errors, cache kept ----------------------------------------------------------


def cache_snapshot(cache: Path) -> dict[str, bytes]:
    return {str(p.relative_to(cache)): p.read_bytes() for p in sorted(cache.rglob("*.json"))}


def test_missing_repository(github: FakeGitHub, tmp_path: Path, clock: FakeClock) -> None:
    with pytest.raises(RepositoryNotFound, match="repository acme/nope was not found") as info:
        run(github, tmp_path, clock, repos=(REPO, "acme/nope"))
    assert TOKEN not in str(info.value)
    assert not (tmp_path / "out" / "pairs.jsonl").exists()
    kept = cache_snapshot(tmp_path / "cache")
    assert kept
    github.log.clear()
    _, rows = run(github, tmp_path, clock, repos=(REPO,))
    assert not github.log and positives(rows) == EXPECTED_WIDGETS


def test_issue_deleted_after_listing(github: FakeGitHub, tmp_path: Path, clock: FakeClock) -> None:
    github.fail(f"/repos/{REPO}/issues/2/comments", 404)
    stats, rows = run(github, tmp_path, clock, repos=(REPO,))
    assert positives(rows) == EXPECTED_WIDGETS - {(2, 1), (20, 2)}
    counts = stats["collection"]["repositories"][REPO]
    assert counts["issues_vanished"] == 1 and counts["target_not_listed"] == 2
    assert all(2 not in (r["issue1"], r["issue2"]) for r in rows)


def test_rejected_token(github: FakeGitHub, tmp_path: Path, clock: FakeClock) -> None:
    run(github, tmp_path, clock, repos=(REPO,))
    before = cache_snapshot(tmp_path / "cache")
    revoked = "ghp_REVOKED9876543210zyxwvuSECRET"
    with pytest.raises(TokenRejected, match="rejected the token") as info:
        run(github, tmp_path, clock, repos=(REPO, OTHER), token=revoked)
    assert revoked not in str(info.value) and revoked not in "".join(traceback.format_exception(info.value))
    assert cache_snapshot(tmp_path / "cache") == before


def test_malformed_json(github: FakeGitHub, tmp_path: Path, clock: FakeClock) -> None:
    github.fail(f"/repos/{REPO}/issues/24/comments", "malformed", page=2)
    with pytest.raises(MalformedResponse) as info:
        run(github, tmp_path, clock, repos=(REPO,))
    assert f"{github.url}/repos/{REPO}/issues/24/comments?page=2&per_page=100" in str(info.value)
    first = {e.path for e in github.log if e.status == 200}
    github.log.clear()
    _, rows = run(github, tmp_path, clock, repos=(REPO,))
    assert positives(rows) == EXPECTED_WIDGETS
    assert not [e for e in github.log if e.path in first], "pages fetched before the error come from the cache"


def test_token_never_written_logged_or_raised(github: FakeGitHub, tmp_path: Path, clock: FakeClock, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    github.fail(f"/repos/{REPO}/issues", 502, "drop", page=1)
    stats, _ = run(github, tmp_path, clock)
    assert stats["parameters"]["authenticated"] is True
    assert {e.authorization for e in github.log} == {f"Bearer {TOKEN}"}, "the token is used"
    errors = []
    for faults, kwargs in (((500, 500), {"max_attempts": 2}), (("malformed",), {}), ((("secondary", 1),), {"max_attempts": 1})):
        github.fail(f"/repos/{OTHER}/issues", *faults, page=1)
        with pytest.raises(Exception) as info:
            run(github, tmp_path, clock, repos=(OTHER,), cache=f"c{len(errors)}", list_max_age=0, **kwargs)
        errors.append(info.value)
    with pytest.raises(RepositoryNotFound) as info:
        run(github, tmp_path, clock, repos=("acme/nope",))
    errors.append(info.value)
    client = make_client(github, tmp_path / "cache", clock)
    for exc in errors:
        text = "".join(traceback.format_exception(exc))
        assert TOKEN not in text and TOKEN not in repr(exc)
    assert TOKEN not in repr(client)
    assert TOKEN not in caplog.text
    assert "retry" in caplog.text, "retries were logged (without the token)"
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


def test_cli(github: FakeGitHub, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("GITHUB_API_URL", github.url)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    out, cache = tmp_path / "cli-out", tmp_path / "cli-cache"
    rc = cli_main(["--repo", REPO, "--repo", OTHER, "--out", str(out), "--cache", str(cache), "--seed", "1", "--no-progress"])
    assert rc == 0
    rows = load_pairs(out / "pairs.jsonl")
    assert positives(rows) == EXPECTED_WIDGETS
    stats = json.loads((out / "stats.json").read_text())
    assert stats["parameters"]["seed"] == 1 and stats["parameters"]["api_url"] == github.url
    rc = cli_main(["--repo", "acme/nope", "--out", str(tmp_path / "x"), "--cache", str(cache), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1 and "error: repository acme/nope was not found" in err and "Traceback" not in err
    assert TOKEN not in err


# -- statistics and plots --------------------------------------------------------------------


def test_statistics_definitions() -> None:
    assert ngram_overlap("a b c d", "A b c e", 1) == (3, 3 / 5)
    assert ngram_overlap("a b c d", "a b c e", 2) == (2, 2 / 4)
    assert ngram_overlap("a b c d", "a b c e", 3) == (1, 1 / 3)
    assert ngram_overlap("", "", 2) == (0, 0.0)
    rows = [
        {"text1": "a b c d", "text2": "a b c e", "label": 1, "split": "train", "repo": "x/y"},
        {"text1": "A B", "text2": "c d", "label": 0, "split": "train", "repo": "x/y"},
        {"text1": "one", "text2": " ", "label": 0, "split": "test", "repo": "x/z"},
    ]
    stats = compute_stats(rows, tokenizer=list, tokenizer_name="characters", long_threshold=3)
    assert stats["splits"] == ["train", "test"]
    assert stats["table7"] == {
        "train": {"positive": 1, "negative": 1, "total": 2},
        "test": {"positive": 0, "negative": 1, "total": 1},
        "all": {"positive": 1, "negative": 2, "total": 3},
    }
    assert list(stats["fig7_pairs_per_repo"]) == ["x/y", "x/z"]
    one = stats["fig8_ngram_overlap"]["1"]
    assert one["duplicate"]["mean_count"] == 3 and one["non_duplicate"]["mean_count"] == 0
    assert one["duplicate"]["count_histogram"]["counts"][3] == 1
    assert stats["fig8_ngram_overlap"]["3"]["duplicate"]["mean_jaccard"] == pytest.approx(1 / 3)
    assert stats["long_text_share"] == {"train": 0.5, "test": 0.0}
    assert stats["fig9_token_lengths"]["train"]["texts"] == 4
    assert sum(stats["fig9_token_lengths"]["train"]["log_histogram"]["counts"]) == 4
    assert stats["empty_texts"] == 1
    json.dumps(stats, allow_nan=False)
    # Rows shaped like the published dataset: no repo column, splits from the hub.
    hub = rows_from_splits({"train": [{"text1": "x y", "text2": "x z", "label": 1}], "test": [{"text1": "p", "text2": "q", "label": 0}]})
    hub_stats = compute_stats(hub)
    assert hub_stats["fig7_pairs_per_repo"] is None and hub_stats["splits"] == ["train", "test"]
    assert hub_stats["tokenizer"].startswith("whitespace")
    with pytest.raises(ValueError, match="label"):
        compute_stats([{"text1": "a", "text2": "b", "label": 2}])


def test_stats_file_matches_pairs_and_plots(github: FakeGitHub, tmp_path: Path, clock: FakeClock) -> None:
    stats, rows = run(github, tmp_path, clock)
    assert json.loads((tmp_path / "out" / "stats.json").read_text()) == stats
    assert compute_stats(rows) == stats["dataset"]
    paths = plot_all(stats["dataset"], tmp_path / "figures")
    assert sorted(p.name for p in paths) == sorted(
        f"{name}.{ext}" for name in ("gis_fig7_pairs_per_repo", "gis_fig8_ngram_overlap", "gis_fig9_token_lengths") for ext in ("pdf", "png")
    )
    for p in paths:
        head = p.read_bytes()[:8]
        assert head.startswith(b"%PDF") if p.suffix == ".pdf" else head == b"\x89PNG\r\n\x1a\n"


def test_packaged_repository_list() -> None:
    repos = load_repo_list()
    assert len(repos) == 55 and len({r.lower() for r in repos}) == 55
    assert {"microsoft/vscode", "huggingface/transformers", "atom/atom", "tiangolo/fastapi"} <= set(repos)


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "no pairs (the file is empty)"),
        ('{"text1": "a", "label": 1}\n', "line 1: no text2 (a pair is text1, text2, label)"),
        ('{"text1": "a", "text2": "b", "label": 1}\n{"text1": "a", "text2": null, "label": 0}\n', "line 2: text2 must be a string"),
    ],
)
def test_stats_cli_refuses_empty_or_incomplete_pairs(tmp_path: Path, capsys, text: str, message: str) -> None:
    from aoe.gis.stats import main as stats_main

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(text)
    assert stats_main([str(pairs)]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[0] == f"error: {pairs}{', ' if message.startswith('line') else ': '}{message}", err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--negative-ratio", "-1"], "--negative-ratio must be >= 0, got -1.0"),
        (["--out", "/proc/no-such-dir"], "--out /proc/no-such-dir: cannot write there"),
    ],
)
def test_cli_arguments_fail_before_any_request(github: FakeGitHub, tmp_path: Path, monkeypatch, capsys, args, message) -> None:
    monkeypatch.setenv("GITHUB_API_URL", github.url)
    argv = ["--repo", REPO, "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache"), "--no-progress"]
    with pytest.raises(SystemExit) as exc:
        cli_main([*argv, *args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "cache").exists()  # not one API request was made
