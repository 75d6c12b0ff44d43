"""LLM prompt templates (torch-free: the workflow and the mteb wrapper import it while planning)."""

from __future__ import annotations

__all__ = ["apply_prompt", "check_prompt"]


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
