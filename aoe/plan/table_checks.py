"""The tables, checked while planning: what build.tables names is defined, each table's target is its own, and
each built table's rows are models the runs train or evaluate (seeds, reruns, variants, released checkpoints,
evaluation-only poolings, gold variants), a study's and a comparison's claim names rows the table has, and
every number set against another is measured as that one was (:func:`aoe.results.likeness.like_for_like`).

Apart from the other cross-key checks because a table's rows are resolved from the whole config
(aoe.config.rows.table_rows) and judged by the same code that builds the table (aoe.results), so a
configuration the table would refuse fails before anything trains. Each raises
:class:`aoe.config.errors.ConfigError` naming the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from aoe.config.table_kinds import table_kind
from aoe.config.workflow import EVAL_POOLING_SUITES, RESERVED_TARGETS, built_tables, table_target
from aoe.config.cells import NO_TRAINSET, PRETRAINED, RELEASED, _trained_reruns, _trained_seeds
from aoe.config.errors import ConfigError
from aoe.config.pretrained import pretrained_variants, released_checkpoints
from aoe.config.rows import TableRow, _spec_trainsets, table_rows
from aoe.model.pooling_names import OFFICIAL_POOLING_NAMES, split_senteval_batch
from aoe.plan.key_sources import set_in
from aoe.plan.training_checks import unknown_backbone

__all__ = ["check_build", "check_table_row", "check_table_targets", "check_tables"]


def check_build(config: dict, configfiles: Iterable[str | Path] = (), overrides: dict | None = None) -> None:
    """``build.tables`` names tables that ``tables`` defines (the figures and analyses it may name are the
    schema's enums). The message names the file that set the list (a preset replaces config.yaml's whole)."""
    chosen = (config.get("build") or {}).get("tables")
    unknown = [t for t in chosen or () if t not in config["tables"]]
    if unknown:
        where = set_in(("build", "tables"), list(configfiles), overrides)
        names = ", ".join(repr(t) for t in unknown)
        raise ConfigError(
            f"build.tables: {'no table' if len(unknown) == 1 else 'no tables'} {names} in tables{where}; "
            f"defined: {', '.join(config['tables'])} (define it under tables, or drop it from build.tables)"
        )


def check_table_targets(config: dict) -> None:
    """Each built table's target rule (aoe.config.workflow.table_target) is its own and no workflow rule's."""
    targets: dict[str, str] = {}
    for name in built_tables(config):
        target = table_target(name)
        if target in targets:
            raise ConfigError(f"tables.{name}: its target {target!r} is also the target of tables.{targets[target]}; "
                              "build one of them (build.tables) or rename one")
        if target in RESERVED_TARGETS:
            raise ConfigError(f"tables.{name}: its target {target!r} is the name of a workflow rule; rename the table")
        targets[target] = name


def check_tables(config: dict) -> None:
    """Each built table (but gis_stats): known train sets (with an eval_split for an in-domain
    table) and at least one row, each row a model the runs train (:func:`check_table_row`)."""
    trainsets = config["trainsets"]
    for name, table in built_tables(config).items():
        kind = table_kind(table["kind"])
        if kind.inputs == "gis_stats":
            continue
        if table.get("rows") and (table.get("backbones") or table.get("objectives")):
            # Snakemake merges a preset's table over config.yaml's key by key: its backbones and
            # objectives would silently lose to the rows config.yaml gives
            raise ConfigError(f"tables.{name}: has both rows and backbones/objectives (after merging the config files); "
                              "give one: a preset changing a table that config.yaml gives as rows must give rows")
        for ts in _spec_trainsets(table):
            if ts not in trainsets:
                raise ConfigError(f"tables.{name}: unknown train set {ts!r}; known: {sorted(trainsets)}")
            if kind.column_per_trainset and not trainsets[ts].get("eval_split"):
                raise ConfigError(f"tables.{name}: train set {ts!r} has no eval_split for an in-domain column")
        rows = table_rows(config, name)
        if not rows:
            raise ConfigError(f"tables.{name}: no rows (give backbones and objectives, or rows)")
        for i, row in enumerate(rows):
            where = f"tables.{name}" + (f".rows[{i}]" if table.get("rows") else "")
            if row.eval_pooling:
                _check_eval_pooling(config, where, table["kind"], row)
            if row.eval_gold:
                _check_eval_gold(where, table["kind"], row)
            check_table_row(config, where, row)
        if table.get("study"):
            _check_study(name, table["study"], rows)
        _check_comparison(name, table, kind, rows)
        _check_like_for_like(config, name, table)


def check_table_row(config: dict, where: str, row: TableRow) -> None:
    """A known backbone; unless pretrained, train sets on which runs train it with every seed asked."""
    if row.backbone not in config["backbones"]:
        raise ConfigError(f"{where}: {unknown_backbone(row.backbone, config)}")
    if row.objective == PRETRAINED:
        variants = pretrained_variants(config)
        if row.variant != NO_TRAINSET and row.variant not in variants:
            raise ConfigError(f"{where}.variant: {row.variant!r} is not an evaluation.pretrained_variants entry "
                              f"(known: {sorted(variants)}); add it there or drop the key for the backbone's own embedding")
        return
    if row.variant != NO_TRAINSET:
        raise ConfigError(f"{where}.variant: only a pretrained row takes a variant; a trained model embeds as it "
                          "was trained (give the objective a pooling instead: objectives.<name>.base/pooling)")
    if row.objective == RELEASED:
        known = released_checkpoints(config)
        for ts in row.trainsets:
            if ts not in known:
                raise ConfigError(f"{where}: {ts!r} is not a checkpoint of released.checkpoints (known: {sorted(known)}); "
                                  "a released row's trainset names the checkpoint")
            if known[ts]["backbone"] != row.backbone:
                raise ConfigError(f"{where}: checkpoint {ts!r} is evaluated as backbone {known[ts]['backbone']!r} "
                                  f"(released.checkpoints.{ts}.backbone), not {row.backbone!r}")
        return
    if not row.trainsets:
        raise ConfigError(f"{where}: no train set (give trainset or trainsets)")
    for ts in row.trainsets:
        have = set(_trained_seeds(config, row.backbone, row.objective, ts))
        if not have:
            raise ConfigError(
                f"{where}: no run trains backbone {row.backbone!r} with objective {row.objective!r} on {ts!r}; "
                "add it to runs or remove it from the table"
            )
        if not row.seeds:
            raise ConfigError(f"{where}: every run of {row.objective!r} on {ts!r} is named_rows_only, so a row that names no "
                              "seeds takes none: give the row seeds (and reruns), or drop named_rows_only from one of those runs")
        if set(row.seeds) - have:
            raise ConfigError(f"{where}: seeds {sorted(set(row.seeds) - have)} of {row.objective!r} on {ts!r} are not trained by any run")
        for seed in row.seeds:
            made = _trained_reruns(config, row.backbone, row.objective, ts, seed)
            if made < row.reruns:
                raise ConfigError(
                    f"{where}: reruns {row.reruns} of {row.objective!r} on {ts!r} seed {seed}, but the runs train it "
                    f"{made} time(s); give that run reruns: {row.reruns}"
                )


def _check_like_for_like(config: dict, name: str, table: dict) -> None:
    """Before anything trains: each row set against a paper or reproduction number is measured as that number was
    (paper_numbers.yaml ``measured``), and a study's rows differ only as the table's ``compare_across`` names, the
    checks the table itself makes when built (:mod:`aoe.results.likeness`), so a configuration that would refuse one
    fails now, naming the key."""
    from aoe.config.measures import measured_rows
    from aoe.results.likeness import Measure, UnlikeNumbers, like_for_like
    from aoe.results.paper_numbers import paper_side
    from aoe.results.tables import row_paper_refs

    rows = measured_rows(config, name)
    allowed = table.get("compare_across") or {}
    try:
        for key in ("paper", "reproduction"):
            for i, (row, ref) in enumerate(zip(rows, row_paper_refs(table, rows, key))):
                if ref:
                    ours = Measure.of(row["measure"])
                    like_for_like(ours, paper_side(ours, ref), allowed,
                                  f"tables.{name}.rows[{i}] ({key}: {ref})")
        if table.get("study") or table.get("comparison"):
            what = "study" if table.get("study") else "comparison"
            for i, row in enumerate(rows[1:], 1):
                like_for_like(Measure.of(rows[0]["measure"]), Measure.of(row["measure"]), allowed, f"tables.{name}.rows[{i}] ({what})")
    except UnlikeNumbers as err:
        raise ConfigError(str(err)) from None


def _check_comparison(name: str, table: dict, kind, rows: list[TableRow]) -> None:
    """An objective comparison (kind ``objective_comparison``) has its ``comparison``, and no other kind one; each
    objective it names is that of one trained row of the table."""
    comparison = table.get("comparison")
    if kind.compares_rows and not comparison:
        raise ConfigError(f"tables.{name}: kind {table['kind']} judges its rows by a comparison: give tables.{name}.comparison "
                          "(claim, source, higher, lower; separates optional), e.g. presets/objectives-vs-cosent.yaml")
    if comparison and not kind.compares_rows:
        raise ConfigError(f"tables.{name}.comparison: only a table of kind objective_comparison judges one (this one is {table['kind']})")
    if not comparison:
        return
    objectives = [r.objective for r in rows]
    for key in ("higher", "lower", "separates"):
        objective = comparison.get(key)
        if objective is not None and (objectives.count(objective) != 1 or objective in (PRETRAINED, RELEASED)):
            raise ConfigError(f"tables.{name}.comparison.{key}: {objective!r} must be the objective of one trained row of the "
                              f"table (its rows' objectives: {', '.join(objectives)})")


def _check_study(name: str, study: dict, rows: list[TableRow]) -> None:
    """A study table's claim names rows it has: test best the label of the row the paper chose (one row's:
    a preset replacing the rows must keep it), test increasing at least two rows in the order of the setting."""
    from aoe.config.rows import row_label

    labels = [row_label(r.as_dict()) for r in rows]
    if study["test"] == "best":
        if labels.count(study.get("best")) != 1:
            raise ConfigError(f"tables.{name}.study.best: {study.get('best')!r} must be the label of one row of the table "
                              f"(its rows: {', '.join(map(repr, labels))})")
    elif len(rows) < 2:
        raise ConfigError(f"tables.{name}.study: test increasing needs two rows or more")


def _check_eval_pooling(config: dict, where: str, kind_name: str, row: TableRow) -> None:
    """A row's evaluation-only pooling (rules evaluate_sts_eval_pooling, evaluate_transfer_eval_pooling: the
    STS and transfer evaluations only): on an STS or transfer table's row of a model with weights of its own,
    a trained cell or a released checkpoint, not the backbone as downloaded (its other poolings:
    evaluation.pretrained_variants); under evaluation.backend senteval, not a batch-dependent one on STS."""
    suite = table_kind(kind_name).suite
    if suite not in EVAL_POOLING_SUITES:
        raise ConfigError(f"{where}.eval_pooling: an evaluation-only pooling is a variant of an STS or transfer evaluation "
                          f"(rules evaluate_sts_eval_pooling, evaluate_transfer_eval_pooling); table kind {kind_name!r} has "
                          "none: drop the key or move the row to a table of kind sts7, stsb, ablation or transfer")
    if row.objective == PRETRAINED:
        raise ConfigError(f"{where}.eval_pooling: a backbone as downloaded has no evaluation-only pooling; give it "
                          "another pooling as a pretrained variant (evaluation.pretrained_variants, the row's variant)")
    if row.objective == RELEASED:
        known = released_checkpoints(config)
        for ts in row.trainsets:
            # a checkpoint's own pooling is what the row without eval_pooling scores (its sts.json / transfer.json)
            if ts in known and known[ts].get("pooling") == row.eval_pooling:
                raise ConfigError(f"{where}.eval_pooling: {row.eval_pooling!r} is checkpoint {ts!r}'s own pooling "
                                  f"(released.checkpoints.{ts}.pooling), which the row without eval_pooling scores; "
                                  "drop the key or name another pooling")
    try:
        scored, _ = split_senteval_batch(row.eval_pooling)
    except ValueError as err:
        raise ConfigError(f"{where}.{err}") from None
    if suite == "sts" and scored in OFFICIAL_POOLING_NAMES and config["evaluation"]["backend"] == "senteval":
        raise ConfigError(f"{where}.eval_pooling: {row.eval_pooling!r} depends on the batch, and evaluation.backend senteval "
                          "(SimCSE's SentEval) batches STS12-16 in another order than the official copy "
                          "(aoe.evaluate.senteval_batches); set evaluation.backend builtin or drop the key")


def _check_eval_gold(where: str, kind_name: str, row: TableRow) -> None:
    """A row's eval_gold reads the other gold of its cells' in-domain files (their by_gold): an in-domain table's row.
    The backbone as downloaded has both too (its headline is the float gold): its int-gold row is what an int-gold row's
    gain is set against (issue 69)."""
    if not table_kind(kind_name).read_gold:
        raise ConfigError(f"{where}.eval_gold: a gold variant reads the by_gold of in-domain evaluations (rule evaluate_indomain); "
                          f"table kind {kind_name!r} has none: drop the key or move the row to a table of kind indomain")
