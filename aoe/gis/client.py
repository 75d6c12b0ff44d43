"""A small GitHub REST client for the GIS collector: retries, rate limits, and a resumable response cache.

Every successful ``GET`` is stored on disk as one JSON file per request (keyed by
the API root, the token-free URL relative to it, and the ``Accept`` header, so
two servers never answer for each other even from one folder), written
atomically, so a collection killed at any point loses at most the request in
flight and a re-run picks up where it stopped. Whether a cached response is used
as is or revalidated is the caller's decision, expressed per request:

* ``validator``: an opaque string (the collector passes the issue's ``updated_at``).
  A cached response stored under the same validator is used without any request;
  GitHub bumps an issue's ``updated_at`` on every new comment, edit, close or
  label change, so an unchanged value means its comments and timeline are unchanged.
* ``max_age``: a cached response younger than this many seconds is used as is
  (the collector uses it for issue-list pages, which have no validator).

Anything else is revalidated with ``If-None-Match``; a ``304`` reuses the cached
body and, with a token, does not count against GitHub's primary rate limit. The
last page of a list is the exception and is fetched unconditionally: its ETag
covers the body but not the ``Link`` header, so a full last page that gained a
successor would still answer 304.

The token is only ever placed in the ``Authorization`` header of requests to the
configured API host. It never appears in a URL, a cache file, a log record or an
exception message: every message that leaves this module is passed through
:meth:`GitHubClient.redact` as a second line of defence.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import requests

from aoe.data.download import offline_var
from aoe.data.io import DataError
from aoe.util.jsonio import write_json_atomic

__all__ = [
    "ACCEPT_HTML",
    "ACCEPT_JSON",
    "DEFAULT_API_URL",
    "GISError",
    "GitHubClient",
    "MalformedResponse",
    "NotFound",
    "OfflineError",
    "Page",
    "RequestFailed",
    "TokenRejected",
    "api_root",
    "cache_namespace",
]

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
ACCEPT_JSON = "application/vnd.github+json"
# Adds ``body_html`` (GitHub's rendering) to issue and comment objects.
ACCEPT_HTML = "application/vnd.github.html+json"

_CACHE_FORMAT = 1
# GitHub's guidance for secondary limits without a Retry-After header: wait at least a minute.
_SECONDARY_MIN_WAIT = 60.0

log = logging.getLogger("aoe.gis")


class GISError(DataError):
    """The GIS collection cannot go on; the message says what to fix and never contains the token."""


class TokenRejected(GISError):
    """GitHub answered 401: the token is invalid, expired or revoked (or one is required)."""


class NotFound(GISError):
    """GitHub answered 404 or 410 for ``url``."""

    def __init__(self, message: str, url: str, status: int) -> None:
        super().__init__(message)
        self.url = url
        self.status = status


class MalformedResponse(GISError):
    """A 200 response whose body is not the JSON GitHub promises."""


class RequestFailed(GISError):
    """A request failed for good: retries exhausted, or a status that retrying cannot fix (``status``, when one answered)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class OfflineError(GISError):
    """A request would be needed but network access is disabled by ``AOE_OFFLINE``/``HF_HUB_OFFLINE``."""


def _root_parts(api_url: str) -> tuple[str, str, int | str | None, str]:
    """Scheme, host, port (None when the scheme's default) and path prefix of ``api_url``, without credentials."""
    parts = urlsplit(api_url.strip())
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port: int | str | None
    try:
        port = parts.port
    except ValueError:  # a malformed port still tells servers apart; the request itself will fail
        port = parts.netloc.rsplit("@", 1)[-1].rpartition(":")[2] or None
    if port == {"http": 80, "https": 443}.get(scheme):
        port = None
    return scheme, host, port, parts.path.rstrip("/")


def api_root(api_url: str) -> str:
    """``api_url`` reduced to what identifies a server: scheme, host, port and path prefix, no credentials.

    ``https://API.github.com/`` and ``https://api.github.com:443`` are the same root;
    another port or path prefix (a second GitHub Enterprise instance, a test server) is not.
    """
    scheme, host, port, path = _root_parts(api_url)
    return f"{scheme}://{host}" + (f":{port}" if port is not None else "") + path


def cache_namespace(api_url: str) -> str:
    """A folder name for ``api_url``'s responses: readable (host, port, path) plus a hash of :func:`api_root`."""
    _, host, port, path = _root_parts(api_url)
    readable = re.sub(r"[^a-z0-9.-]+", "_", f"{host}_{port or ''}{path}".lower()).strip("._-")[:80] or "api"
    # The hash tells apart roots that the readable part cannot (http vs https, '_' vs '/').
    return f"{readable}-{hashlib.sha256(api_root(api_url).encode('utf-8')).hexdigest()[:12]}"


@dataclass(frozen=True)
class Page:
    """One response page: its JSON body and where the next page is, if any.

    ``source`` tells how it was obtained: ``"network"`` (a 200), ``"not_modified"``
    (a 304 answered from the cache) or ``"cache"`` (no request made).
    """

    url: str
    body: Any
    next_url: str | None
    source: str


class GitHubClient:
    """GET pages from GitHub's REST API with retries, rate-limit handling and an on-disk cache.

    ``api_url`` defaults to ``$GITHUB_API_URL`` or ``https://api.github.com``;
    ``token`` to ``$GITHUB_TOKEN`` (pass ``""`` to force anonymous access).
    Without ``cache_dir`` nothing is cached. Transient failures (5xx, dropped
    connections, timeouts, truncated bodies, secondary rate limits) are retried
    up to ``max_attempts`` attempts in all, sleeping ``backoff * 2**k`` seconds
    (capped at ``max_backoff``) or what ``Retry-After`` asks. An exhausted
    primary rate limit (``X-RateLimit-Remaining: 0``) waits until
    ``X-RateLimit-Reset``, at most ``max_rate_limit_waits`` times per request.
    ``sleep`` and ``clock`` are injectable so tests need not wait;
    ``on_request(url)`` is called before every network attempt (tests use it
    to simulate a kill). ``counts`` tallies network requests, 304s, cache hits,
    retries and rate-limit waits.
    """

    def __init__(
        self,
        api_url: str | None = None,
        token: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        *,
        max_attempts: int = 6,
        backoff: float = 1.0,
        max_backoff: float = 300.0,
        timeout: float = 30.0,
        max_rate_limit_waits: int = 10,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        on_request: Callable[[str], None] | None = None,
        session: requests.Session | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        api_url = api_url or os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL
        self.api_url = api_url.rstrip("/")
        parts = urlsplit(self.api_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise GISError(f"GitHub API URL {self._public_url(self.api_url)!r} is not an http(s) URL")
        self._root = api_root(self.api_url)
        self._token = os.environ.get("GITHUB_TOKEN", "") if token is None else token
        self._token = self._token.strip()
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.timeout = timeout
        self.max_rate_limit_waits = max_rate_limit_waits
        self._sleep = sleep
        self._clock = clock
        self.on_request = on_request
        self._session = session or requests.Session()
        self._session.headers["User-Agent"] = "aoe-repro-gis-collector"
        if self._token:
            self._session.headers["Authorization"] = f"Bearer {self._token}"
        # Epoch second until which the primary limit is known to be exhausted.
        self._blocked_until: float | None = None
        self.counts = {"network": 0, "not_modified": 0, "cache": 0, "retries": 0, "rate_limit_waits": 0}

    def __repr__(self) -> str:
        # Spelled out so the token can never leak through a repr in a log or traceback.
        return f"GitHubClient(api_url={self._public_url(self.api_url)!r}, token={'set' if self._token else 'none'})"

    @property
    def has_token(self) -> bool:
        """Whether requests are authenticated."""
        return bool(self._token)

    def redact(self, text: str) -> str:
        """``text`` with every occurrence of the token replaced by ``[REDACTED]``."""
        return text.replace(self._token, "[REDACTED]") if self._token else text

    @staticmethod
    def _public_url(url: str) -> str:
        """``url`` without any ``user:password@`` part."""
        parts = urlsplit(url)
        if "@" not in parts.netloc:
            return url
        return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))

    # -- URLs and cache keys -------------------------------------------------------------

    def url(self, path: str, params: Mapping[str, Any] | None = None) -> str:
        """Absolute URL for an API ``path`` (``/repos/...``) with ``params`` in a canonical order."""
        if not path.startswith("/"):
            raise ValueError(f"API path must start with '/': {path!r}")
        query = urlencode(sorted((str(k), str(v)) for k, v in (params or {}).items()))
        return f"{self.api_url}{path}" + (f"?{query}" if query else "")

    def _relative(self, url: str) -> str:
        """``url`` relative to the API root with its query sorted (the cache key adds the root itself)."""
        if not (url == self.api_url or url.startswith(self.api_url + "/")):
            # A Link header pointing elsewhere would receive the Authorization header.
            raise GISError(f"refusing to follow {self._public_url(url)}: it is outside the API root {self._public_url(self.api_url)}")
        parts = urlsplit(url)
        root_path = urlsplit(self.api_url).path.rstrip("/")
        path = parts.path[len(root_path) :] or "/"
        query = urlencode(sorted(parse_qsl(parts.query, keep_blank_values=True)))
        return path + (f"?{query}" if query else "")

    def _cache_file(self, key: str) -> Path | None:
        if self.cache_dir is None:
            return None
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
        return self.cache_dir / digest[:2] / f"{digest}.json"

    def _read_cache(self, key: str) -> dict | None:
        path = self._cache_file(key)
        if path is None or not path.is_file():
            return None
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            # Writes are atomic, so this is outside damage; refetching repairs it.
            log.warning("ignoring unreadable cache file %s: %s", path, exc)
            return None
        if not isinstance(entry, dict) or entry.get("format") != _CACHE_FORMAT or entry.get("key") != key:
            return None
        return entry

    def _write_cache(self, key: str, entry: dict) -> None:
        path = self._cache_file(key)
        if path is not None:
            write_json_atomic(entry, path)

    # -- public API ----------------------------------------------------------------------

    def get_page(
        self,
        url: str,
        *,
        accept: str = ACCEPT_JSON,
        validator: str | None = None,
        max_age: float | None = None,
    ) -> Page:
        """Fetch one page (absolute ``url`` under the API root), through the cache.

        A cached entry is returned without a request when offline mode is on,
        when it was stored under the same ``validator``, or when it is younger
        than ``max_age`` seconds; otherwise the request is conditional on the
        cached ETag. Raises :class:`NotFound` (404/410), :class:`TokenRejected`
        (401), :class:`MalformedResponse`, :class:`RequestFailed` or
        :class:`OfflineError`; the cache is never damaged by a failure.
        """
        rel = self._relative(url)
        key = f"{self._root}\n{rel}\nAccept: {accept}"
        entry = self._read_cache(key)
        offline = offline_var()
        if entry is not None:
            fresh = (
                offline is not None
                or (validator is not None and entry.get("validator") == validator)
                or (max_age is not None and self._clock() - float(entry.get("fetched_at", 0)) < max_age)
            )
            if fresh:
                self.counts["cache"] += 1
                return Page(url, entry["body"], self._absolute_next(entry.get("next")), "cache")
        if offline is not None:
            where = f"the cache {self.cache_dir}" if self.cache_dir is not None else "any cache (no cache folder given)"
            raise OfflineError(f"network access is disabled ({offline} is set) and GET {rel} is not in {where}; unset {offline} to collect")
        # A last page is asked afresh: its ETag covers the body, not the Link header, so a
        # 304 could hide a next page that appeared since (a full page gaining one more item).
        etag = entry.get("etag") if entry is not None and entry.get("next") is not None else None
        response = self._request(url, accept, etag)
        if response.status_code == 304 and entry is not None:
            self.counts["not_modified"] += 1
            entry.update(fetched_at=self._clock(), validator=validator)
            self._write_cache(key, entry)
            return Page(url, entry["body"], self._absolute_next(entry.get("next")), "not_modified")
        if response.status_code == 304:
            raise RequestFailed(f"GET {self._public_url(url)} answered 304 Not Modified to a request that was not conditional")
        try:
            body = json.loads(response.content)
        except ValueError as exc:
            raise MalformedResponse(
                self.redact(f"GitHub sent malformed JSON for GET {self._public_url(url)} (HTTP 200, {len(response.content)} bytes): {exc}")
            ) from None
        next_url = response.links.get("next", {}).get("url")
        next_rel = self._relative(next_url) if next_url else None
        self.counts["network"] += 1
        self._write_cache(
            key,
            {
                "format": _CACHE_FORMAT,
                "key": key,
                "etag": response.headers.get("ETag"),
                "next": next_rel,
                "fetched_at": self._clock(),
                "validator": validator,
                "body": body,
            },
        )
        return Page(url, body, self._absolute_next(next_rel), "network")

    def paginate(
        self,
        path: str,
        params: Mapping[str, Any] | None = None,
        *,
        accept: str = ACCEPT_JSON,
        validator: str | None = None,
        max_age: float | None = None,
    ) -> Iterator[Page]:
        """Yield every page of a list endpoint, following ``Link: rel="next"`` headers.

        The cache policy (``validator``, ``max_age``) applies to every page.
        A body that is not a JSON list is a :class:`MalformedResponse`.
        """
        url: str | None = self.url(path, params)
        while url is not None:
            page = self.get_page(url, accept=accept, validator=validator, max_age=max_age)
            if not isinstance(page.body, list):
                raise MalformedResponse(f"GET {self._public_url(url)}: expected a JSON list, got {type(page.body).__name__}")
            yield page
            url = page.next_url

    def _absolute_next(self, rel: str | None) -> str | None:
        return None if rel is None else self.api_url + rel

    # -- the request loop ------------------------------------------------------------------

    def _request(self, url: str, accept: str, etag: str | None) -> requests.Response:
        """GET ``url`` until it answers 200/304 or fails for good (see the class docstring)."""
        public = self._public_url(url)
        attempt = 0
        rate_limit_waits = 0
        while True:
            self._wait_for_primary_reset()
            if self.on_request is not None:
                self.on_request(public)
            headers = {"Accept": accept, "X-GitHub-Api-Version": API_VERSION}
            if etag:
                headers["If-None-Match"] = etag
            log.debug("GET %s", public)
            try:
                response = self._session.get(url, headers=headers, timeout=self.timeout)
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
                # ChunkedEncodingError is how requests reports a body cut short.
                problem, delay = f"{type(exc).__name__}: {exc}", self._backoff_delay(attempt)
            else:
                self._note_rate_limit(response)
                status = response.status_code
                if status in (200, 304):
                    return response
                message = self._error_message(response)
                if status == 401:
                    if self._token:
                        raise TokenRejected(
                            self.redact(
                                f"GitHub rejected the token (HTTP 401: {message}) for GET {public}: "
                                "it is invalid, expired or revoked; set a valid token, or unset GITHUB_TOKEN to collect anonymously"
                            )
                        )
                    raise TokenRejected(self.redact(f"GitHub requires authentication for GET {public} (HTTP 401: {message}); set GITHUB_TOKEN"))
                if status in (404, 410):
                    raise NotFound(self.redact(f"GET {public}: HTTP {status} ({message})"), public, status)
                if status in (403, 429):
                    # GitHub: Retry-After, when present, rules over X-RateLimit-Reset.
                    self._blocked_until = None
                    primary_wait = self._primary_limit_wait(response)
                    if primary_wait is not None:
                        rate_limit_waits += 1
                        if rate_limit_waits > self.max_rate_limit_waits:
                            raise RequestFailed(f"GET {public}: primary rate limit still exhausted after {self.max_rate_limit_waits} waits")
                        self.counts["rate_limit_waits"] += 1
                        log.warning("GitHub primary rate limit exhausted; sleeping %.0f s until it resets", primary_wait)
                        self._sleep(primary_wait)
                        continue
                    secondary_wait = self._secondary_limit_wait(response, message, attempt)
                    if secondary_wait is None:
                        hint = " (does the token lack access to this repository?)" if self._token else ""
                        raise RequestFailed(self.redact(f"GET {public}: HTTP {status} Forbidden ({message}){hint}"), status)
                    problem, delay = f"HTTP {status} secondary rate limit ({message})", secondary_wait
                    self.counts["rate_limit_waits"] += 1
                elif status >= 500:
                    problem, delay = f"HTTP {status} {response.reason}", self._backoff_delay(attempt)
                else:
                    raise RequestFailed(self.redact(f"GET {public}: HTTP {status} ({message})"), status)
            attempt += 1
            if attempt >= self.max_attempts:
                raise RequestFailed(self.redact(f"GET {public} failed after {attempt} attempts; last problem: {problem}"))
            self.counts["retries"] += 1
            log.warning("%s", self.redact(f"GET {public}: {problem}; retry {attempt}/{self.max_attempts - 1} in {delay:.1f} s"))
            self._sleep(delay)

    def _backoff_delay(self, attempt: int) -> float:
        return min(self.max_backoff, self.backoff * 2**attempt)

    @staticmethod
    def _error_message(response: requests.Response) -> str:
        """GitHub's ``message`` field, or the reason phrase when the body is not GitHub's error JSON."""
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("message"), str):
            return body["message"][:300]
        return response.reason or "no reason given"

    @staticmethod
    def _header_float(response: requests.Response, name: str) -> float | None:
        value = response.headers.get(name)
        try:
            return float(value) if value is not None else None
        except ValueError:
            return None

    def _note_rate_limit(self, response: requests.Response) -> None:
        """Remember when the primary limit resets if this response used up the last request."""
        remaining = self._header_float(response, "X-RateLimit-Remaining")
        reset = self._header_float(response, "X-RateLimit-Reset")
        if remaining is not None and remaining <= 0 and reset is not None:
            self._blocked_until = reset

    def _wait_for_primary_reset(self) -> None:
        if self._blocked_until is None:
            return
        wait = self._blocked_until - self._clock()
        self._blocked_until = None
        if wait > 0:
            self.counts["rate_limit_waits"] += 1
            # One second of slack: GitHub's reset time has one-second resolution.
            log.warning("GitHub primary rate limit used up; sleeping %.0f s until it resets", wait + 1)
            self._sleep(wait + 1)

    def _primary_limit_wait(self, response: requests.Response) -> float | None:
        """Seconds to wait when a 403/429 is the primary limit, else None."""
        if self._header_float(response, "X-RateLimit-Remaining") != 0:
            return None
        if response.headers.get("Retry-After") is not None:
            return None  # a secondary limit also reports remaining 0 at times; Retry-After rules
        reset = self._header_float(response, "X-RateLimit-Reset")
        if reset is None:
            return _SECONDARY_MIN_WAIT
        return max(reset - self._clock(), 0.0) + 1.0

    def _secondary_limit_wait(self, response: requests.Response, message: str, attempt: int) -> float | None:
        """Seconds to wait when a 403/429 is a secondary (abuse) limit, else None (a real 403)."""
        retry_after = response.headers.get("Retry-After")
        if retry_after is not None:
            try:
                return max(float(retry_after), 0.0)
            except ValueError:
                try:
                    return max(parsedate_to_datetime(retry_after).timestamp() - self._clock(), 0.0)
                except (TypeError, ValueError):
                    return _SECONDARY_MIN_WAIT
        lowered = message.lower()
        if response.status_code == 429 or "secondary rate limit" in lowered or "abuse" in lowered:
            # GitHub: wait at least a minute, then exponentially longer while it persists.
            return max(_SECONDARY_MIN_WAIT, self._backoff_delay(attempt))
        return None
