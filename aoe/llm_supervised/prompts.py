"""Figure 5's prompts, and reading a sentence back out of what the LLM wrote.

AnglE (arXiv 2309.12871) Figure 5: "You are a highly smart same-meaning/opposite-meaning
sentence-generating system. Your job is to generate {size} synonymous/antonym sentences
of a given input sentence. Input sentence: {text}. Output:" -- one prompt for positive
pairs (same-meaning, synonymous) and one for negative pairs (opposite-meaning, antonym).

A completion is read as one sentence per line (``size`` of them). What cannot be used
is never kept: every output gets a status, ``ok`` or a reason from :data:`MALFORMED`,
and the counts per reason go into the pair table's manifest.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = [
    "PAPER_PROMPTS",
    "MALFORMED",
    "Parsed",
    "render_prompt",
    "parse_completion",
    "normalise",
    "completed_items",
]

PAPER_PROMPTS = {
    "similar": (
        "You are a highly smart same-meaning sentence-generating system. Your job is to generate {size} "
        "synonymous sentences of a given input sentence. Input sentence: {text}. Output:"
    ),
    "dissimilar": (
        "You are a highly smart opposite-meaning sentence-generating system. Your job is to generate {size} "
        "antonym sentences of a given input sentence. Input sentence: {text}. Output:"
    ),
}

# Why an output (or one sentence of it) is dropped.
MALFORMED = {
    "empty": "the completion is empty or whitespace",
    "unparsable": "no line with a letter in it once list markers, quotes and prompt labels are removed",
    "truncated": "the token limit cut the sentence before its line ended",
    "copy": "the sentence equals the input text (ignoring case, spacing and punctuation)",
    "duplicate": "the sentence repeats an earlier sentence of the same completion",
    "conflict": "the same sentence was written as similar and as dissimilar to the text (both dropped)",
}

# Labels of the prompt that a model echoes when it starts another example of its own; the
# sentence ends where one appears, and one at the start of a line is a label, not content.
_LABELS = ("input sentence:", "output sentence:", "output:", "synonymous sentence:", "antonym sentence:")
_LABEL_RE = re.compile("|".join(re.escape(x) for x in _LABELS), re.IGNORECASE)
_LIST_MARKER = re.compile(r"^\s*(?:[-*\u2022]+|\(?\d{1,2}[.):])\s+")
_QUOTES = "\"'`\u201c\u201d\u2018\u2019"


def render_prompt(template: str, text: str, size: int) -> str:
    """The prompt for one text; ``{text}`` and ``{size}`` are the template's only fields."""
    return template.replace("{size}", str(size)).replace("{text}", text)


def normalise(text: str) -> str:
    """Case, accents' compatibility forms, spacing and punctuation removed: what 'the same sentence' means."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


def _clean_line(line: str) -> tuple[str, bool]:
    """(the sentence on a line, whether a prompt label ended it early)."""
    line = line.strip()
    while True:  # leading labels and list markers, in any order ("1. Output: ...")
        m = _LIST_MARKER.match(line) or re.match(rf"^\s*(?:{_LABEL_RE.pattern})\s*", line, re.IGNORECASE)
        if not m or not m.group(0):
            break
        line = line[m.end() :]
    cut = _LABEL_RE.search(line)
    if cut:
        line = line[: cut.start()]
    return line.strip().strip(_QUOTES).strip(), bool(cut)


def completed_items(completion: str, size: int) -> bool:
    """Whether ``completion`` already holds ``size`` finished sentences (a line ended, or a label cut it).

    Generation stops a row here: a base model goes on writing further examples of its own.
    """
    lines = completion.split("\n")
    done = 0
    for i, line in enumerate(lines):
        sentence, cut = _clean_line(line)
        if sentence and (cut or i < len(lines) - 1):
            done += 1
            if done >= size:
                return True
    return False


@dataclass(frozen=True)
class Parsed:
    """The sentences read from one completion, in order, with the status of each.

    ``items`` is a list of (sentence, status); status ``ok`` or a key of :data:`MALFORMED`.
    A completion with no usable line gives one item ``("", reason)``.
    """

    items: tuple[tuple[str, str], ...]

    @property
    def ok(self) -> list[str]:
        return [s for s, status in self.items if status == "ok"]


def parse_completion(completion: str, text: str, size: int = 1, stopped_by_length: bool = False) -> Parsed:
    """Read up to ``size`` sentences (one per line) from what the LLM wrote after the prompt.

    ``stopped_by_length``: generation hit its token limit; the sentence still being written
    then (its line not ended and no label after it) is ``truncated``.
    """
    if not completion.strip():
        return Parsed((("", "empty"),))
    lines = completion.split("\n")
    items: list[tuple[str, str]] = []
    seen = {normalise(text): "copy"}
    for i, line in enumerate(lines):
        if len(items) >= size:
            break
        sentence, cut = _clean_line(line)
        if not sentence:
            continue
        if not any(ch.isalpha() for ch in sentence):
            items.append((sentence, "unparsable"))
            continue
        if stopped_by_length and not cut and i == len(lines) - 1:
            items.append((sentence, "truncated"))
            continue
        key = normalise(sentence)
        if key in seen:
            items.append((sentence, "copy" if seen[key] == "copy" else "duplicate"))
            continue
        seen[key] = "ok"
        items.append((sentence, "ok"))
    return Parsed(tuple(items) or (("", "unparsable"),))
