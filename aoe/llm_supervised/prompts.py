"""Figure 5's prompts, and reading a sentence back out of what the LLM wrote.

AnglE (arXiv 2309.12871) Figure 5: "You are a highly smart same-meaning/opposite-meaning
sentence-generating system. Your job is to generate {size} synonymous/antonym sentences
of a given input sentence. Input sentence: {text}. Output:" -- one prompt for positive
pairs (same-meaning, synonymous) and one for negative pairs (opposite-meaning, antonym).

A completion is read as a sequence of sentences (split at line ends, prompt labels the
model echoes, and sentence stops followed by a new sentence), of which the first ``size``
are the answer. What cannot be used is never kept: every sentence gets a status, ``ok``
or a reason from :data:`MALFORMED`, and the counts per reason go into the pair table's
manifest.
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
    "unparsable": "no sentence with a letter in it once list markers, quotes and prompt labels are removed",
    "truncated": "the token limit cut the sentence before anything ended it",
    "copy": "the sentence equals the input text (ignoring case, spacing and punctuation)",
    "duplicate": "the sentence repeats an earlier sentence of the same completion",
    "conflict": "the same sentence was written as similar and as dissimilar to the text (both dropped)",
}

# Labels of the prompt that a model echoes when it starts another example of its own; the
# sentence ends where one appears, and one at the start of a line is a label, not content.
_LABELS = ("input sentence:", "output sentence:", "output:", "synonymous sentence:", "antonym sentence:")
_LABEL_RE = re.compile("|".join(re.escape(x) for x in _LABELS), re.IGNORECASE)
_LEADING = re.compile(r"^\s*(?:[-*\u2022]+\s+|\(?\d{1,2}[.):]\s+|(?:" + _LABEL_RE.pattern + r")\s*)", re.IGNORECASE)
_QUOTES = "\"'`\u201c\u201d\u2018\u2019"
# A sentence ends at . ! or ? (and closing quotes) before whitespace and a capital, an opening
# quote or a list number: a base model that has written its sentence goes on with another one on
# the same line ("... the campus. You are a highly ..."). Lowercase after the stop is no end, so
# "mr. pingeon" or "0.47 percent" stay whole.
_BOUNDARY = re.compile(r"[.!?][\"')\]\u201d\u2019]*\s+(?=[\"'(\[\u201c\u2018]?(?:[A-Z]|\d{1,2}[.)]\s))")
# ... except after a title or an initialism ("Mr. Smith", "U.S. Rep.", "7 p.m. Friday")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st jr sr rep sen gov gen lt col sgt capt mt no vs etc inc corp co ltd "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
_INITIALISM = re.compile(r"(?:\b[A-Za-z]\.){2,}$")
_LIST_NUMBER = re.compile(r"^\(?\d{1,2}[.)]$")  # "2. The ...": the number opens the sentence, it does not end one


def render_prompt(template: str, text: str, size: int) -> str:
    """The prompt for one text; ``{text}`` and ``{size}`` are the template's only fields."""
    return template.replace("{size}", str(size)).replace("{text}", text)


def normalise(text: str) -> str:
    """Case, accents' compatibility forms, spacing and punctuation removed: what 'the same sentence' means."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


def _clean(part: str) -> str:
    """A sentence without leading list markers or prompt labels, or surrounding quotes."""
    part = part.strip()
    while m := _LEADING.match(part):
        if not m.group(0):
            break
        part = part[m.end() :]
    return part.strip().strip(_QUOTES).strip()


def _split_sentences(line: str) -> list[str]:
    parts, start = [], 0
    for m in _BOUNDARY.finditer(line):
        head = line[start : m.start() + 1]
        word = head.split()[-1] if head.split() else ""
        if word.rstrip(".").lower() in _ABBREVIATIONS or _INITIALISM.search(word) or _LIST_NUMBER.match(word):
            continue
        parts.append(line[start : m.end()])
        start = m.end()
    parts.append(line[start:])
    return parts


def _sentences(completion: str) -> list[tuple[str, bool]]:
    """Every non-empty sentence of a completion, in order, with whether it has ended: another
    sentence or a prompt label follows it, or its line ended. Only the very last can be open."""
    out: list[tuple[str, bool]] = []
    lines = completion.split("\n")
    for i, line in enumerate(lines):
        line = _clean(line)  # a label opening the line introduces the sentence
        cut = _LABEL_RE.search(line)
        if cut:
            line = line[: cut.start()]
        parts = [p for p in (_clean(x) for x in _split_sentences(line)) if p]
        for j, part in enumerate(parts):
            out.append((part, bool(cut) or i < len(lines) - 1 or j < len(parts) - 1))
    return out


def completed_items(completion: str, size: int) -> bool:
    """Whether ``completion`` already holds ``size`` finished sentences.

    Generation stops a row here: a base model goes on writing further examples of its own.
    """
    return sum(1 for _, ended in _sentences(completion) if ended) >= size


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
    """Read the first ``size`` sentences of what the LLM wrote after the prompt.

    ``stopped_by_length``: generation hit its token limit; a sentence still being written
    then (nothing after it ended it) is ``truncated``.
    """
    if not completion.strip():
        return Parsed((("", "empty"),))
    items: list[tuple[str, str]] = []
    seen = {normalise(text): "copy"}
    for sentence, ended in _sentences(completion)[:size]:
        if not any(ch.isalpha() for ch in sentence):
            items.append((sentence, "unparsable"))
            continue
        if stopped_by_length and not ended:
            items.append((sentence, "truncated"))
            continue
        key = normalise(sentence)
        if key in seen:
            items.append((sentence, "copy" if seen[key] == "copy" else "duplicate"))
            continue
        seen[key] = "ok"
        items.append((sentence, "ok"))
    return Parsed(tuple(items) or (("", "unparsable"),))
