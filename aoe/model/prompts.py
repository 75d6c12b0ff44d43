"""LLM prompt templates (torch-free: the workflow and the mteb wrapper import it while planning).

Training wraps the text as it is (the official collator, fcb6223:angle_emb/angle.py:214-226,
formats the prompt around the raw text). The official SentEval evaluation of an LLM rewrites each
text first (:func:`official_eval_text`); ``backbones.<name>.eval_text`` says which an evaluation
does (:data:`EVAL_TEXTS`).
"""

from __future__ import annotations

__all__ = ["EVAL_TEXTS", "apply_prompt", "check_eval_text", "check_prompt", "eval_text", "official_eval_text"]

# raw: the text as the table holds it; official_eval_py: as the official eval.py hands it to the prompt
EVAL_TEXTS = ("raw", "official_eval_py")


def check_prompt(template: str | None) -> str | None:
    """``template`` itself, after checking it has the ``{text}`` placeholder (None passes)."""
    if template is not None and "{text}" not in template:
        raise ValueError(f"prompt template {template!r} has no {{text}} placeholder")
    return template


def apply_prompt(text: str, template: str | None) -> str:
    """``template`` with ``{text}`` replaced (plain substitution: braces in texts stay as they are)."""
    if template is None:
        return text
    return check_prompt(template).replace("{text}", text)


def official_eval_text(text: str) -> str:
    """``text`` as the official evaluation of a prompted LLM puts it into the prompt.

    The SentEval batcher of angle-emb's eval.py (fcb6223:eval.py:134-139, the paper-era 0.1.1;
    unchanged at 70cbd01:examples/NLI/eval_nli.py:136-140 and 1c5515b:examples/NLI/eval_nli.py:132-137),
    in its order, and only where a prompt is set (BERT texts go in as they are): a final '.' is
    added unless the text ends in one of ``.?"'``; every '"' becomes "'" (the prompt quotes the text
    in '"'); a final '?' becomes '.'. An empty text stays empty.
    """
    if text and text[-1] not in ".?\"'":
        text += "."
    text = text.replace('"', "'")
    if text and text[-1] == "?":
        text = text[:-1] + "."
    return text


def check_eval_text(mode: str) -> str:
    """``mode`` itself, after checking it is one of :data:`EVAL_TEXTS`."""
    if mode not in EVAL_TEXTS:
        raise ValueError(f"eval_text must be one of {EVAL_TEXTS}, got {mode!r}")
    return mode


def eval_text(text: str, mode: str) -> str:
    """The text an evaluation embeds under ``mode`` (:data:`EVAL_TEXTS`), before the prompt wraps it."""
    return official_eval_text(text) if check_eval_text(mode) == "official_eval_py" else text
