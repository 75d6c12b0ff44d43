"""What a number was measured under, and the one gate every difference of two numbers passes (issue 69).

Four audits found Δs, gains and t-tests between numbers measured in different ways (an int-gold score minus a
float-gold one, a cls_avg-scored row tested against CLS-scored baselines), each by reading. Here each row of ours
carries its :class:`Measure` (the gold its scores correlate with, the evaluation protocol, the pooling arithmetic
of its embeddings, its training recipe: :func:`aoe.config.measures.row_measure` from the configuration), and
:func:`like_for_like` is what the t-tests (:func:`aoe.results.ttests.ttests`), the gains over the backbone as
downloaded (:mod:`aoe.publish.gains`), the papers' prose claims (:mod:`aoe.publish.claims`) and the numbers they quote (:mod:`aoe.publish.quoted`) call before they subtract or test: it refuses
two numbers measured otherwise (:class:`UnlikeNumbers`, naming the difference and the fix) unless the table's
config names that difference (``tables.<name>.compare_across: {field: why}``), and returns what the printed line
then says about it.

Torch-free and config-free: reads two measures and a mapping only.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

__all__ = ["FIELDS", "Measure", "UnlikeNumbers", "differences", "like_for_like", "named_text"]

# what a number was measured under: the fields a difference of two numbers must share (or its table name)
FIELDS = ("gold", "protocol", "pooling", "recipe")


@dataclass(frozen=True)
class Measure:
    """What one row's numbers were measured under. ``recipe`` is canonical JSON ({train set: {setting: value}},
    :data:`aoe.config.measures.RECIPE_KEYS`), or a name for a model not trained by us ("as downloaded",
    "released <checkpoint>"); "" in a field: not recorded (a table built by hand), which matches only ""."""

    gold: str = ""
    protocol: str = ""
    pooling: str = ""
    recipe: str = ""

    @classmethod
    def of(cls, data: dict | None) -> Measure:
        """From a row's ``measure`` entry (a table row dict or the table's JSON twin); none: every field unrecorded."""
        data = data or {}
        unknown = set(data) - set(FIELDS)
        if unknown:
            raise ValueError(f"measure: unknown field(s) {', '.join(sorted(unknown))}; the fields are {', '.join(FIELDS)}")
        return cls(**{f: str(data.get(f) or "") for f in FIELDS})

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


class UnlikeNumbers(ValueError):
    """Two numbers measured otherwise, set against each other without their table naming the difference;
    ``difference``: what differs (``gold: int vs float``), the message without its place and fix."""

    def __init__(self, message: str, difference: str = ""):
        super().__init__(message)
        self.difference = difference


def _recipe_diff(a: str, b: str) -> str:
    """The settings two recipes differ in, ``learning_rate 1e-05 vs 2e-05``; the two names where either is not a
    recipe of ours (as downloaded, a released checkpoint)."""
    try:
        ra, rb = json.loads(a), json.loads(b)
    except ValueError:
        return f"{a or 'unrecorded'} vs {b or 'unrecorded'}"
    if not isinstance(ra, dict) or not isinstance(rb, dict):
        return f"{a} vs {b}"
    if set(ra) != set(rb):  # trained on other sets: their settings are not one recipe's to compare key by key
        return f"trained on {', '.join(ra)} vs {', '.join(rb)}"
    parts = []
    for trainset in dict.fromkeys([*ra, *rb]):
        sa, sb = ra.get(trainset) or {}, rb.get(trainset) or {}
        keys = [k for k in dict.fromkeys([*sa, *sb]) if sa.get(k) != sb.get(k)]
        where = f"{trainset}: " if len(ra) > 1 or len(rb) > 1 else ""
        parts += [f"{where}{k} {json.dumps(sa.get(k))} vs {json.dumps(sb.get(k))}" for k in keys]
    return ", ".join(parts)


def differences(a: Measure, b: Measure) -> dict[str, str]:
    """{field: how a and b differ in it} for each field of :data:`FIELDS` they differ in ({} for like numbers)."""
    out = {}
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        if x != y:
            out[f] = _recipe_diff(x, y) if f == "recipe" else f"{x or 'unrecorded'} vs {y or 'unrecorded'}"
    return out


def named_text(named: dict[str, str]) -> str:
    """How a line says the differences its table named: ``measured otherwise, as the table allows: recipe
    (learning_rate 1e-05 vs 2e-05: why)``; '' for none."""
    if not named:
        return ""
    return "measured otherwise, as the table allows: " + "; ".join(f"{f} ({d})" for f, d in named.items())


def like_for_like(a: Measure, b: Measure, allowed: dict | None = None, where: str = "") -> dict[str, str]:
    """The gate before any Δ, gain or test of ``a`` against ``b``: {field: difference, with the table's reason} of
    the differences the table names in ``allowed`` (``tables.<name>.compare_across``: {field: why}), which the
    line prints (:func:`named_text`); raises :class:`UnlikeNumbers` on any other difference, naming it and the fix."""
    allowed = allowed or {}
    diff = differences(a, b)
    refused = {f: d for f, d in diff.items() if f not in allowed}
    if refused:
        what = "; ".join(f"{f}: {d}" for f, d in refused.items())
        raise UnlikeNumbers(
            f"{where + ': ' if where else ''}measured otherwise ({what}): set each against a row measured the same way "
            f"(an in-domain row's other gold is its eval_gold variant row), or name the difference with its source under "
            f"the table's compare_across ({', '.join(f'{f}: <why>' for f in refused)})",
            what,
        )
    return {f: f"{d}: {allowed[f]}" for f, d in diff.items()}
