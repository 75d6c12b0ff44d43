"""A fake GitHub REST API on 127.0.0.1 for the GIS collector's tests.

It serves the four endpoints the collector uses (issue list, issue comments,
issue timeline, the repository-wide issue events) for synthetic repositories,
the way GitHub does: page-number pagination with ``Link`` headers (pages capped
at ``max_per_page`` so a handful of issues spans several pages),
``since``/``sort``/``direction`` on the list, weak ETags and ``304 Not
Modified``, rate-limit headers, ``401 Bad credentials`` for a wrong token,
``404`` for unknown repositories and issues, ``body_html`` for the HTML media
type. Faults are scripted per (path, page):
each request to that page consumes the next scripted fault, then it answers
normally. Every request is logged with its conditional header and outcome.
"""

from __future__ import annotations

import hashlib
import html
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

BASE_TIME = datetime(2023, 1, 1, tzinfo=UTC)


def stamp(moment: datetime) -> str:
    """GitHub's timestamp format."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Logged:
    """One request as the server saw it."""

    path: str  # path and query exactly as sent
    route: str  # path without query
    page: int
    if_none_match: str | None
    authorization: str | None
    accept: str | None
    status: int | str  # "drop"/"truncate" when no complete response was sent


@dataclass
class FakeRepo:
    """Issues (pull requests included, as on GitHub), their comments and timeline events."""

    owner: str
    name: str
    items: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    timeline: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def add_issue(
        self,
        number: int,
        title: str | None = None,
        body: str | None = None,
        *,
        comments: list[tuple[str, str]] | None = None,
        events: list[dict[str, Any]] | None = None,
        state: str = "open",
        state_reason: str | None = None,
        labels: tuple[str, ...] = (),
        pull_request: bool = False,
        created: datetime | None = None,
        bot_comments: tuple[int, ...] = (),
    ) -> dict[str, Any]:
        """Add an issue; ``comments`` are (author_association, body); issue ``n`` is created ``n`` hours after BASE_TIME."""
        created = created or BASE_TIME + timedelta(hours=number)
        comments = comments or []
        item: dict[str, Any] = {
            "url": f"https://api.github.com/repos/{self.full_name}/issues/{number}",
            "html_url": f"https://github.com/{self.full_name}/issues/{number}",
            "number": number,
            "title": f"Issue {number} of {self.full_name}" if title is None else title,
            "body": f"Body of issue {number}.\n\n```python\nprint({number})\n```" if body is None else body,
            "state": state,
            "state_reason": state_reason,
            "labels": [{"name": label} for label in labels],
            "user": {"login": f"reporter{number}", "type": "User"},
            "comments": len(comments),
            "created_at": stamp(created),
            "updated_at": stamp(created + timedelta(minutes=30)),
        }
        if pull_request:
            item["pull_request"] = {"url": f"https://api.github.com/repos/{self.full_name}/pulls/{number}"}
        self.items[number] = item
        self.comments[number] = [
            {
                "id": number * 1000 + i,
                "body": text,
                "author_association": assoc,
                "user": {"login": f"user-{assoc.lower()}-{i}", "type": "Bot" if i in bot_comments else "User"},
                "created_at": stamp(created + timedelta(minutes=i + 1)),
            }
            for i, (assoc, text) in enumerate(comments)
        ]
        stamped = []
        for i, event in enumerate(events or []):
            # After the comments, one minute apart: the order in which they happened.
            event = dict(event)
            event.setdefault("id", number * 1000 + 500 + i)
            event.setdefault("created_at", stamp(created + timedelta(minutes=len(comments) + i + 1)))
            stamped.append(event)
        self.timeline[number] = [
            {"event": "commented", "body": c["body"], "author_association": c["author_association"]}
            for c in self.comments[number]
        ] + stamped
        return item

    def issue_events(self) -> list[dict[str, Any]]:
        """``GET /repos/{owner}/{repo}/issues/events``: every issue's events (comments are not events), newest first.

        Each carries the ``issue`` it happened on, as GitHub's repository-wide listing does.
        """
        listed = []
        for number, events in self.timeline.items():
            item = self.items[number]
            issue = {k: item[k] for k in ("url", "html_url", "number", "title", "state", "state_reason") if k in item}
            if "pull_request" in item:
                issue["pull_request"] = item["pull_request"]
            listed += [dict(event, issue=issue) for event in events if event.get("event") != "commented"]
        listed.sort(key=lambda e: (e["created_at"], e["id"]), reverse=True)
        return listed

    def add_comment(self, number: int, association: str, text: str) -> None:
        """A new comment: bumps ``updated_at`` and the comment count, as GitHub does."""
        item = self.items[number]
        comments = self.comments[number]
        comments.append({"id": number * 1000 + len(comments), "body": text, "author_association": association,
                         "user": {"login": "late", "type": "User"}, "created_at": item["updated_at"]})
        item["comments"] = len(comments)
        updated = datetime.fromisoformat(item["updated_at"]) + timedelta(days=1)
        item["updated_at"] = stamp(updated)


def marked_as_duplicate(canonical: int | None = None, repo: str = "acme/widgets") -> dict[str, Any]:
    """A timeline ``marked_as_duplicate`` event; with ``canonical``, carrying that issue.

    ``add_issue`` stamps it with an id and a time.
    """
    event: dict[str, Any] = {"event": "marked_as_duplicate", "actor": {"login": "maintainer"}}
    if canonical is not None:
        event["canonical"] = {"number": canonical, "html_url": f"https://github.com/{repo}/issues/{canonical}"}
    return event


UNMARKED = {"event": "unmarked_as_duplicate", "actor": {"login": "maintainer"}}


class FakeGitHub:
    """The server: ``start()`` it, use ``url`` as ``GITHUB_API_URL``, ``stop()`` it."""

    def __init__(self, *, max_per_page: int = 100, valid_tokens: tuple[str, ...] = (), clock: Callable[[], float] | None = None) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.max_per_page = max_per_page
        self.valid_tokens = set(valid_tokens)
        self.clock = clock or (lambda: datetime.now(UTC).timestamp())
        self.faults: dict[tuple[str, int], list[Any]] = {}
        self.log: list[Logged] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- setup -----------------------------------------------------------------------------

    def repo(self, full_name: str) -> FakeRepo:
        """The repository ``owner/name``, created empty on first use."""
        owner, name = full_name.split("/")
        return self.repos.setdefault(full_name.lower(), FakeRepo(owner, name))

    def fail(self, route: str, *faults: Any, page: int = 1) -> None:
        """Script faults for ``route`` (a path without query) and ``page``, consumed one per request.

        A fault is an int status (JSON error body), ``"drop"`` (close without any
        response), ``"truncate"`` (announce the full length, send half), ``"malformed"``
        (200 with a body that is not JSON), ``("primary", seconds)`` (403, remaining 0,
        reset ``seconds`` from now), ``("secondary", retry_after)`` (403 with Retry-After),
        ``("429", retry_after)`` or ``("primary-ok", seconds)`` (a normal 200 that uses up
        the last request, resetting ``seconds`` from now).
        """
        self.faults.setdefault((route, page), []).extend(faults)

    @property
    def url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeGitHub:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in separate writes; with Nagle's algorithm each
            # keep-alive response would wait ~40 ms for a delayed ACK.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                fake._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        server = self._server
        # A short poll interval: shutdown() waits up to one interval, once per test.
        self._thread = threading.Thread(target=lambda: server.serve_forever(poll_interval=0.02), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- queries about what happened -----------------------------------------------------

    def requests_to(self, fragment: str) -> list[Logged]:
        """Logged requests whose path contains ``fragment``."""
        return [entry for entry in self.log if fragment in entry.path]

    # -- request handling ------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        page = int(query.get("page", "1"))
        route = parts.path
        with self._lock:
            pending = self.faults.get((route, page))
            fault = pending.pop(0) if pending else None
        entry = Logged(
            handler.path, route, page, handler.headers.get("If-None-Match"), handler.headers.get("Authorization"),
            handler.headers.get("Accept"), 0,
        )
        with self._lock:
            self.log.append(entry)
        now = self.clock()
        rate_headers = {"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "4999", "X-RateLimit-Reset": str(int(now) + 3600)}
        if fault == "drop":
            entry.status = "drop"
            handler.close_connection = True
            return
        if isinstance(fault, int):
            self._send(handler, entry, fault, {"message": f"fake error {fault}"}, rate_headers)
            return
        if isinstance(fault, tuple) and fault[0] == "primary":
            headers = dict(rate_headers, **{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(now + fault[1]))})
            self._send(handler, entry, 403, {"message": "API rate limit exceeded for 127.0.0.1."}, headers)
            return
        if isinstance(fault, tuple) and fault[0] in ("secondary", "429"):
            status = 403 if fault[0] == "secondary" else 429
            headers = dict(rate_headers, **{"Retry-After": str(fault[1])})
            self._send(handler, entry, status, {"message": "You have exceeded a secondary rate limit."}, headers)
            return
        if isinstance(fault, tuple) and fault[0] == "primary-ok":
            rate_headers.update({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(now + fault[1]))})
        auth = handler.headers.get("Authorization")
        if auth is not None and auth.removeprefix("Bearer ") not in self.valid_tokens:
            self._send(handler, entry, 401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}, rate_headers)
            return
        status, body, link = self._route(route, query, handler.headers.get("Accept") or "")
        if status != 200:
            self._send(handler, entry, status, body, rate_headers)
            return
        headers = dict(rate_headers)
        if link:
            headers["Link"] = link
        raw = json.dumps(body).encode()
        etag = f'W/"{hashlib.sha1(raw).hexdigest()}"'
        headers["ETag"] = etag
        if fault == "malformed":
            raw = b'[{"number": 1, "title": "cut'
            entry.status = "malformed"
        if handler.headers.get("If-None-Match") == etag and fault is None:
            entry.status = 304
            handler.send_response(304)
            # Without Link: a 304 need not repeat it, and the client must not rely on it.
            for key, value in headers.items():
                if key != "Link":
                    handler.send_header(key, value)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        if fault == "truncate":
            entry.status = "truncate"
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json; charset=utf-8")
            handler.send_header("Content-Length", str(len(raw)))
            handler.end_headers()
            handler.wfile.write(raw[: len(raw) // 2])
            handler.wfile.flush()
            handler.close_connection = True
            return
        if entry.status != "malformed":
            entry.status = 200
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json; charset=utf-8")
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(raw)))
        handler.end_headers()
        handler.wfile.write(raw)

    def _send(self, handler: BaseHTTPRequestHandler, entry: Logged, status: int, body: Any, headers: dict[str, str]) -> None:
        entry.status = status
        raw = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json; charset=utf-8")
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(raw)))
        handler.end_headers()
        handler.wfile.write(raw)

    def _route(self, route: str, query: dict[str, str], accept: str) -> tuple[int, Any, str | None]:
        parts = route.strip("/").split("/")
        not_found = (404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}, None)
        if len(parts) < 4 or parts[0] != "repos" or parts[3] != "issues":
            return not_found
        repo = self.repos.get(f"{parts[1]}/{parts[2]}".lower())
        if repo is None:
            return not_found
        if len(parts) == 4:
            items = [dict(item) for item in repo.items.values()]
            if "since" in query:
                items = [i for i in items if i["updated_at"] >= query["since"]]
            key = "created_at" if query.get("sort", "created") == "created" else "updated_at"
            items.sort(key=lambda i: (i[key], i["number"]), reverse=query.get("direction", "desc") == "desc")
            if "html" in accept or "full" in accept:
                for item in items:
                    item["body_html"] = f"<p>{html.escape(item['body'] or '')}</p>"
                    if "full" not in accept:
                        item.pop("body")
            return self._paginate(route, query, items)
        if len(parts) == 5 and parts[4] == "events":
            return self._paginate(route, query, repo.issue_events())
        if len(parts) == 6 and parts[5] in ("comments", "timeline"):
            number = int(parts[4]) if parts[4].isdigit() else -1
            if number not in repo.items:
                return not_found
            items = repo.comments[number] if parts[5] == "comments" else repo.timeline[number]
            return self._paginate(route, query, list(items))
        return not_found

    def _paginate(self, route: str, query: dict[str, str], items: list[Any]) -> tuple[int, Any, str | None]:
        per_page = min(int(query.get("per_page", "30")), self.max_per_page)
        page = int(query.get("page", "1"))
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        links = []

        def link(target: int, rel: str) -> str:
            q = dict(query, page=str(target))
            return f'<{self.url}{route}?{urlencode(q)}>; rel="{rel}"'

        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        if page > 1:
            links += [link(1, "first"), link(page - 1, "prev")]
        return 200, chunk, ", ".join(links) or None
