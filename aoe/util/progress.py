"""Progress with an ETA for long loops, readable in a rule's log file.

Every job that can run for minutes (transfer classifiers, the NLI probe, MTEB tasks,
Flickr30k retrieval, LLM generation, the GIS collector) reports through
:func:`progress`, which draws its lines with tqdm's own formatter
(:meth:`tqdm.tqdm.format_meter`, the library of the training bar):

* on a terminal, one line redrawn in place (``\\r``) at most every half second, as tqdm does;
* into a file (a rule's log: :func:`aoe.util.joblog.start_log` points stderr at it), one
  whole line at the start, then at most one every ``interval`` seconds while the loop
  advances, and one at the end, e.g.::

      transfer MR: 120/410 fit (29%), elapsed 03:12, ETA 07:44, 1.60s/fit, reg=0.001

  never tqdm's ``\\r`` redraws, which a log file keeps as one ever-growing line.

``interval`` defaults to ``$AOE_PROGRESS_INTERVAL`` seconds, else 30 (a log line every
half minute at most, whatever the number of items). :meth:`Progress.beat` lets a long
item (one classifier fit, one generation batch) report between updates at the same rate.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any

__all__ = ["LOG_FORMAT", "LOG_FORMAT_NO_TOTAL", "Progress", "log_interval", "progress"]

# One log line: where it is, how long it has run, how long it still needs.
LOG_FORMAT = "{desc}: {n_fmt}/{total_fmt} {unit} ({percentage:.0f}%), elapsed {elapsed}, ETA {remaining}, {rate_fmt}{postfix}"
# ... and while the total is not known yet (a listing of unknown length): no share, no ETA.
LOG_FORMAT_NO_TOTAL = "{desc}: {n_fmt} {unit}, elapsed {elapsed}, {rate_fmt}{postfix}"
DEFAULT_LOG_INTERVAL = 30.0
TERMINAL_INTERVAL = 0.5


def log_interval() -> float:
    """Seconds between two log lines: ``$AOE_PROGRESS_INTERVAL``, else 30."""
    value = os.environ.get("AOE_PROGRESS_INTERVAL")
    if value in (None, ""):
        return DEFAULT_LOG_INTERVAL
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"AOE_PROGRESS_INTERVAL={value!r} is not a number of seconds") from None
    if seconds < 0:
        raise ValueError(f"AOE_PROGRESS_INTERVAL={value!r} is negative")
    return seconds


def _isatty(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


class Progress:
    """A progress counter that prints through tqdm's formatter (see the module docstring).

    Use it as tqdm: ``update(n)``, ``set_postfix(**kw)``, ``set_description(desc)``,
    ``reset(total)``, ``close()``, a context manager, or iterate over it when built on
    an iterable. ``beat(**kw)`` sets postfix fields and prints if a line is due.
    """

    def __init__(
        self,
        iterable: Iterable | None = None,
        *,
        total: float | None = None,
        desc: str = "",
        unit: str = "it",
        initial: int = 0,
        interval: float | None = None,
        file: IO[str] | None = None,
        disable: bool = False,
    ):
        if total is None and iterable is not None:
            try:
                total = len(iterable)  # type: ignore[arg-type]
            except TypeError:
                total = None
        self.iterable = iterable
        self.total = total
        self.desc = desc
        self.unit = unit
        self.n = self.initial = initial
        self.file = file if file is not None else sys.stderr  # looked up now: start_log replaces sys.stderr
        self.disable = disable
        self.terminal = _isatty(self.file)
        self.interval = interval if interval is not None else (TERMINAL_INTERVAL if self.terminal else log_interval())
        self.postfix: dict[str, Any] = {}
        self.closed = False
        self._width = 0
        self._printed_n: float | None = None
        self.start_t = self.last_print_t = time.monotonic()
        self._print()

    # -- tqdm's interface -------------------------------------------------------------------------
    def __iter__(self) -> Iterator:
        if self.iterable is None:
            raise TypeError("this Progress was built without an iterable")
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, n: float = 1) -> None:
        """Advance by ``n``; print if ``interval`` has passed since the last line."""
        self.n += n
        self._maybe_print()

    def beat(self, **postfix: Any) -> None:
        """A sign of life within a long item: update the postfix fields, print if a line is due."""
        self.postfix.update(postfix)
        self._maybe_print()

    def set_postfix(self, ordered_dict: Mapping[str, Any] | None = None, refresh: bool = False, **postfix: Any) -> None:
        """Replace the postfix fields (shown after the rate); printed with the next line (tqdm's signature:
        ``refresh`` is accepted and ignored, a line comes at the rate of the others)."""
        self.postfix = {**(ordered_dict or {}), **postfix}

    def set_description(self, desc: str) -> None:
        self.desc = desc

    def reset(self, total: float | None = None) -> None:
        """Start counting again (from 0, with a new ``total``), as tqdm's reset."""
        self.n = self.initial = 0
        self.total = total
        self.start_t = time.monotonic()
        self._print()

    def close(self) -> None:
        """Print the final line (once)."""
        if self.closed:
            return
        self.closed = True
        if self.n != self._printed_n:  # else the last line already says where it ended
            self._print()
        if self.terminal and not self.disable:
            self.file.write("\n")
            self.file.flush()

    # -- output -----------------------------------------------------------------------------------
    def format(self) -> str:
        """The current line."""
        from tqdm import tqdm

        postfix = ", ".join(f"{k}={_fmt(v)}" for k, v in self.postfix.items()) or None
        return tqdm.format_meter(
            self.n,
            self.total,
            time.monotonic() - self.start_t,
            prefix=self.desc,
            unit=self.unit,
            postfix=postfix,
            initial=self.initial,
            ascii=not self.terminal,
            bar_format=None if self.terminal else LOG_FORMAT if self.total else LOG_FORMAT_NO_TOTAL,
        )

    def _maybe_print(self) -> None:
        if time.monotonic() - self.last_print_t >= self.interval:
            self._print()

    def _print(self) -> None:
        self.last_print_t = time.monotonic()
        self._printed_n = self.n
        if self.disable:
            return
        line = self.format()
        try:
            if self.terminal:
                self.file.write("\r" + line + " " * max(self._width - len(line), 0))
                self._width = len(line)
            else:
                self.file.write(line + "\n")
            self.file.flush()
        except (OSError, ValueError):  # a closed or vanished log: progress is never worth a failure
            pass


def progress(iterable: Iterable | None = None, **kwargs: Any) -> Progress:
    """A :class:`Progress` (keywords: ``total``, ``desc``, ``unit``, ``initial``, ``interval``, ``file``, ``disable``)."""
    return Progress(iterable, **kwargs)
