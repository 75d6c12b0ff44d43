"""What each prepared table must hold, written once per kind, and the one check every reader calls.

A table enters the pipeline at a handful of places: the token cache (:func:`aoe.model.tokens.build_token_cache`,
the only way training reads a train table), the checkpoint selection's pair table, the evaluations,
the LLM text sample. Each reads it with :func:`read_table`, which refuses a table that breaks its
kind's :class:`Contract` with one :class:`~aoe.data.io.DataError` naming the file, the column, the
first offending rows (0-based, with their values) and the fix. With ``manifest`` (every evaluation),
the table must first be the one its prepare rule wrote: the sha256 and row count its manifest records.

The kind of a table follows from its path, ``results/data/<dataset>/<split>[.<format>].parquet``:

========== ============================================ ================================================
kind       tables                                       contract beyond non-empty text columns
========== ============================================ ================================================
sts        STS12-16, STS-B, SICK-R (``aoe.data.sts``)   score within the dataset's gold scale, split and
                                                        subset columns, the published row count
pairs      NLI pairs, MRPC, QNLI, QQP, GIS              score 0 or 1; the published rows where the
                                                        source table is the pair table (MRPC, QNLI v1)
triplets   NLI (premise, entailment, contradiction)     three texts
nli3       NLI 3-way classes                            score 0, 1 or 2 (entailment, neutral,
                                                        contradiction); the published labelled rows
captions   Flickr30k                                    caption_index 0-4, one row per (image,
                                                        caption_index), the published row count
generated  ``stsb_llm*``, ``stsb_self`` (LLM pairs)     score 0 or 1, split and subset columns
gis_pairs  the GIS collector's ``pairs.jsonl``          text1, text2, label 0 or 1 (:data:`GIS_PAIRS`)
========== ============================================ ================================================

The SentEval transfer tasks (MR, CR, SUBJ, MPQA, SST2, TREC, MRPC) are read from SentEval's own files, not from
prepared tables: their contract (:data:`TRANSFER_CONTRACTS`: the labels a file may hold, non-empty sentences but
for the blank lines the published files keep, the published sample count) is checked by
:func:`check_transfer_file`, which :func:`aoe.data.transfer.read_transfer` calls on every file it reads.

Any other table (a test's, a user's own) gets the contract of its format alone: the text columns
``sentence1 .. sentenceK`` non-empty and a score, where it has one, finite. A train set's declared
``score_range`` is a property of the cell, not of the table: the trainer checks the scores against it
with :func:`check_score_range`.

``pair_id`` is not a key: in MultiNLI's published dev_mismatched file, 27 labelled rows repeat an earlier row's pair id.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from aoe.data.catalog import SOURCES
from aoe.data.flickr import CAPTIONS_PER_IMAGE
from aoe.data.generated import LLM_DATASET_PATTERN, SELF_DATASET, SPLIT as GENERATED_SPLIT
from aoe.data.io import DataError, sha256_file
from aoe.data.nli import NLI_CLASSES
from aoe.data.sts import EXPECTED_ROWS, SCORE_RANGE, SPLITS as STS_SPLITS

__all__ = ["Contract", "GIS_PAIRS", "contract_of", "score_scale", "check_table", "read_table", "manifest_of", "read_manifest", "check_manifest", "check_score_range", "refuse_empty_texts",
           "TransferContract", "TRANSFER_CONTRACTS", "check_transfer_file"]

SHOWN_ROWS = 5  # offending rows named in a message; the count says how many more
_REMAKE = "delete it and rerun snakemake, which prepares it again from its source (its prepare rule)"
_BINARY = (0.0, 1.0)
_NLI3 = tuple(float(v) for v in sorted(NLI_CLASSES.values()))  # entailment, neutral, contradiction


@dataclass(frozen=True)
class Contract:
    """What a table of one kind holds: ``columns`` (name -> ``text``, ``number`` or ``integer``), the text
    columns that must not be empty, the score's allowed ``values`` or inclusive ``score_range``, the
    columns that together identify a row (``key``) and the published row count."""

    kind: str
    columns: dict[str, str]
    texts: tuple[str, ...]
    optional: dict[str, str] = field(default_factory=dict)
    values: dict[str, tuple[float, ...]] = field(default_factory=dict)
    score_range: tuple[float, float] | None = None
    key: tuple[str, ...] = ()
    rows: int | None = None
    scale: str = ""  # where score_range comes from, for the message
    fix: str = _REMAKE


# the GIS collector's pairs (aoe.gis.collect), read back by aoe.gis.stats.load_pairs: the published dataset's
# columns before aoe.data.glue.hub_pairs names them; issues with an empty body make no pair
GIS_PAIRS = Contract(
    "gis_pairs", {"text1": "text", "text2": "text", "label": "integer"}, ("text1", "text2"), values={"label": _BINARY},
    fix="collect the pairs again (snakemake gis_collect, or python -m aoe.gis) or fix those lines",
)


def _texts(k: int) -> dict[str, str]:
    return {f"sentence{i}": "text" for i in range(1, k + 1)}


def _parse(path: Path) -> tuple[str, str, str | None]:
    """(dataset, split, format) of ``results/data/<dataset>/<split>[.<format>].parquet``; format None for the plain table."""
    stem = path.name[: -len(".parquet")] if path.name.endswith(".parquet") else path.stem
    split, _, fmt = stem.partition(".")
    return path.parent.name, split, fmt or None


def contract_of(path: str | os.PathLike) -> Contract:
    """The contract of the table at ``path``, from the dataset, split and format its path names."""
    dataset, split, fmt = _parse(Path(path))
    if split in STS_SPLITS.get(dataset, ()) and fmt is None:
        lo, hi = SCORE_RANGE[dataset]
        return Contract(
            "sts", {**_texts(2), "score": "number", "split": "text", "subset": "text"}, ("sentence1", "sentence2"),
            score_range=(lo, hi), rows=EXPECTED_ROWS.get((dataset, split)), scale=f"the {dataset} gold scale",
        )
    if (re.fullmatch(LLM_DATASET_PATTERN, dataset) or dataset == SELF_DATASET) and split == GENERATED_SPLIT and fmt is None:
        return Contract(
            "generated", {**_texts(2), "score": "number", "split": "text", "subset": "text"}, ("sentence1", "sentence2"),
            values={"score": _BINARY}, fix="delete it and rerun snakemake, which builds it again from the generations (rule llm_pairs / llm_self_pairs)",
        )
    src = SOURCES.get(dataset, {}).get(split)
    fmt_known = fmt or ("captions" if src is not None and "captions" in src.formats else "pairs")
    if src is not None and fmt_known in src.formats:
        # NLI's published count is of labelled rows (the nli3 table's, not the pairs'); a hub split's is of its
        # rows before the pairs with an empty text are dropped (aoe.data.glue.hub_pairs checks that one)
        counted = "nli3" not in src.formats and src.kind != "hub"
        if fmt_known == "captions":
            return Contract(
                "captions", {"image": "integer", "caption_index": "integer", "caption": "text"}, ("caption",),
                values={"caption_index": tuple(float(i) for i in range(CAPTIONS_PER_IMAGE))}, key=("image", "caption_index"), rows=src.rows,
            )
        if fmt_known == "triplets":
            return Contract("triplets", _texts(3), tuple(_texts(3)), optional={"pair_id": "text"})
        if fmt_known == "nli3":
            return Contract("nli3", {**_texts(2), "score": "number"}, ("sentence1", "sentence2"), optional={"pair_id": "text"},
                            values={"score": _NLI3}, rows=src.rows)
        return Contract("pairs", {**_texts(2), "score": "number"}, ("sentence1", "sentence2"), optional={"pair_id": "text"},
                        values={"score": _BINARY}, rows=src.rows if counted else None)
    # a table of no catalogued dataset: what its format alone says
    k = 3 if fmt == "triplets" else 2
    return Contract(fmt or "pairs", _texts(k), tuple(_texts(k)), optional={"score": "number", "pair_id": "text"},
                    values={"score": _NLI3} if fmt == "nli3" else {},
                    fix="fix those rows in the table (or in the data it was prepared from) and rerun")


def score_scale(dataset: str, split: str) -> tuple[tuple[float, float], str] | None:
    """The span a catalogued pair table's scores keep by its contract, and what sets it (``the stsb gold scale``,
    ``its labels 0, 1``); None for a table the catalogue does not know. The planner holds a train set's
    ``score_range`` against it, before any job runs."""
    c = contract_of(Path(dataset) / f"{split}.parquet")
    if c.score_range is not None:
        return c.score_range, c.scale
    if "score" in c.values:
        labels = c.values["score"]
        return (min(labels), max(labels)), f"its labels {', '.join(f'{v:g}' for v in labels)}"
    return None


def _rows(mask: np.ndarray, values: pd.Series | None = None) -> str:
    """The first offending rows, 0-based, and their values where they say something."""
    rows = np.flatnonzero(mask)
    shown = ", ".join(map(str, rows[:SHOWN_ROWS])) + (", ..." if len(rows) > SHOWN_ROWS else "")
    if values is None:
        return f"0-based rows {shown}"
    return f"0-based rows {shown}: values {', '.join(repr(_plain(v)) for v in values.iloc[rows[:SHOWN_ROWS]])}"


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def _fits(series: pd.Series, dtype: str) -> bool:
    if dtype == "text":
        if isinstance(series.dtype, pd.StringDtype):  # pandas' str columns hold nothing else: no need to look
            return True
        return pd.api.types.is_object_dtype(series) and all(isinstance(v, str) for v in series.dropna())
    if pd.api.types.is_bool_dtype(series):
        return False
    return pd.api.types.is_integer_dtype(series) if dtype == "integer" else pd.api.types.is_numeric_dtype(series)


def check_table(df: pd.DataFrame, path: str | os.PathLike, contract: Contract | None = None, *, written: bool = False) -> None:
    """Raise :class:`DataError` at the first way ``df`` (read from or, ``written``, about to be written to ``path``)
    breaks its contract (:func:`contract_of`).

    The published row count is checked where a table is written (the prepare rules): a reader
    compares the rows with the table's manifest instead (:func:`check_manifest`), which also holds
    for the small tables a test writes under a real data set's name.
    """
    c = contract or contract_of(path)
    where = f"{path} (a {c.kind} table)"
    missing = [col for col in c.columns if col not in df.columns]
    if missing:
        raise DataError(f"{where}: no column {', '.join(missing)} (it has {', '.join(map(str, df.columns))}); {c.fix}")
    if df.empty:  # before the types: a table built from no rows has object columns whatever it was meant to hold
        raise DataError(f"{path}: the table has no rows; check the table (or the data it was prepared from) and rerun")
    for col, dtype in {**c.columns, **{k: v for k, v in c.optional.items() if k in df.columns}}.items():
        if not _fits(df[col], dtype):
            raise DataError(f"{where}: column {col} holds {df[col].dtype} values, not {dtype} ones; {c.fix}")
    blank = {col: (df[col].isna() | (df[col].astype(str).str.strip() == "")).to_numpy() for col in c.texts}
    refuse_empty_texts(path, len(df), blank, "is empty or whitespace-only")
    numbers = [col for col, dtype in {**c.columns, **c.optional}.items() if dtype in ("number", "integer") and col in df.columns]
    for col in numbers:
        values = df[col].astype("float64")
        if values.isna().any():
            nan = values.isna().to_numpy()
            raise DataError(
                f"{path}: {int(nan.sum())} of {len(df)} rows have no {col} (NaN in column {col}; {_rows(nan)}); "
                "they would train as negative pairs: fill in or remove those rows and rerun"
            )
        infinite = ~np.isfinite(values.to_numpy())
        if infinite.any():
            raise DataError(f"{where}: {int(infinite.sum())} of {len(df)} rows have a {col} that is not a finite number "
                            f"(column {col}; {_rows(infinite, df[col])}); {c.fix}")
        if col in c.values:
            outside = ~values.isin(c.values[col]).to_numpy()
            if outside.any():
                allowed = ", ".join(f"{v:g}" for v in c.values[col])
                raise DataError(f"{where}: {int(outside.sum())} of {len(df)} rows have a {col} that is not one of {allowed} "
                                f"(column {col}; {_rows(outside, df[col])}); {c.fix}")
    if c.score_range is not None:
        lo, hi = c.score_range
        outside = ~df["score"].between(lo, hi).to_numpy()
        if outside.any():
            raise DataError(f"{where}: {int(outside.sum())} of {len(df)} rows have a score outside {c.scale} [{lo:g}, {hi:g}] "
                            f"(column score; {_rows(outside, df['score'])}); {c.fix}")
    if c.key:
        repeated = df.duplicated(list(c.key), keep="first").to_numpy()
        if repeated.any():
            raise DataError(f"{where}: {int(repeated.sum())} rows repeat an earlier row's {', '.join(c.key)} "
                            f"(columns {', '.join(c.key)}; {_rows(repeated)}); {c.fix}")
    if written and c.rows is not None and len(df) != c.rows:
        raise DataError(f"{where}: {len(df)} rows where the published data set has {c.rows}; {c.fix}")


def refuse_empty_texts(path: str | os.PathLike, n_rows: int, empty: dict[str, np.ndarray], how: str) -> None:
    """Raise :class:`DataError` naming the rows (per text column, ``empty``: column -> row mask) whose text the
    model would see as nothing; ``how`` says why (``is empty or whitespace-only`` here, ``is dropped whole by the
    tokenizer`` in :mod:`aoe.model.tokens`, which sees what ``str.strip`` cannot)."""
    rows = np.logical_or.reduce(list(empty.values()))
    if not rows.any():
        return
    # the model would see such a text as its special tokens alone, the same for every one: the losses drop the
    # pairs as identical texts and a table of them trains on a zero loss without a word
    per_column = ", ".join(f"{col}: {int(m.sum())}" for col, m in empty.items() if m.any())
    raise DataError(
        f"{path}: {int(rows.sum())} of {n_rows} rows have a text that {how} ({per_column}; {_rows(rows)}); the model "
        "would see only special tokens, the same for every such text, and the losses would drop these pairs as "
        "identical texts: remove or fix those rows in the table (or in the data it was prepared from) and rerun"
    )


def manifest_of(table: str | os.PathLike) -> Path:
    """The manifest its prepare rule writes beside a table: ``<split>.manifest.json``."""
    table = Path(table)
    return table.parent / f"{_parse(table)[1]}.manifest.json"


def read_manifest(manifest: str | os.PathLike, table: str | os.PathLike | None = None) -> dict:
    """The manifest a prepare rule wrote (beside ``table``), as a dict; :class:`DataError` naming it and the fix
    where it is missing or cannot be read (a copy cut short: every evaluation that reads it failed in a bare
    JSONDecodeError)."""
    manifest = Path(manifest)
    table = table if table is not None else "its table"
    try:
        return json.loads(manifest.read_text())
    except FileNotFoundError:
        raise DataError(f"{table}: its manifest {manifest} is missing, so nothing says the table is the one its prepare rule "
                        f"wrote; {_REMAKE}") from None
    except (OSError, ValueError) as exc:
        raise DataError(f"{manifest}: not a readable manifest ({exc}); delete it and {table}, and rerun snakemake") from exc


def _recorded(table: Path, manifest: Path) -> tuple[str, int]:
    """(sha256, rows) that ``manifest`` records for ``table``: an STS or generated table's own, or the
    entry of a pair set's format (``tables.<format>``)."""
    meta = read_manifest(manifest, table)
    if "table_sha256" in meta:
        return meta["table_sha256"], int(meta["rows"])
    fmt = _parse(table)[2] or ("captions" if "captions" in meta.get("tables", {}) else "pairs")
    entry = meta.get("tables", {}).get(fmt)
    if entry is None:
        raise DataError(f"{table}: its manifest {manifest} records no {fmt} table (it records {', '.join(meta.get('tables', {})) or 'none'}); "
                        f"{_REMAKE}")
    return entry["sha256"], int(entry["rows"])


def check_manifest(table: str | os.PathLike, manifest: str | os.PathLike | None = None) -> None:
    """Raise :class:`DataError` unless ``table`` has the sha256 and row count its manifest (default :func:`manifest_of`) records.

    A table edited, replaced or cut short after its prepare rule wrote it would be evaluated as if it
    were the published data, and its numbers compared with the paper's.
    """
    import pyarrow.parquet as pq

    table = Path(table)
    manifest = Path(manifest) if manifest is not None else manifest_of(table)
    sha, rows = _recorded(table, manifest)
    found = sha256_file(table)
    try:
        found_rows = pq.ParquetFile(table).metadata.num_rows
    except Exception as exc:  # pyarrow's ArrowInvalid for a file cut short, among others
        found_rows = f"unreadable ({type(exc).__name__})"
    if found != sha or found_rows != rows:
        raise DataError(
            f"{table} is not the table its manifest {manifest} records: sha256 {found} where {sha} was written, "
            f"{found_rows} rows where {rows} were written; it changed after it was prepared: {_REMAKE}"
        )


def read_table(path: str | os.PathLike, manifest: str | os.PathLike | bool | None = None, contract: Contract | None = None) -> pd.DataFrame:
    """The prepared table at ``path``, checked against its contract; with ``manifest`` (a path, or True for
    :func:`manifest_of`'s) first checked to be the table its manifest records."""
    if manifest is not None and manifest is not False:
        check_manifest(path, None if manifest is True else manifest)
    df = pd.read_parquet(path)
    check_table(df, path, contract)
    return df


def check_score_range(scores: Sequence[float] | np.ndarray, score_range: tuple[float, float], table: str | os.PathLike, key: str) -> None:
    """Raise :class:`DataError` if a train table's ``scores`` are not finite or leave the ``score_range`` its train set declares.

    The labels are the scores rescaled by that range (or truncated to integers): a score outside it
    becomes a label the losses were never meant to see (below 0, above 1), and the training runs on
    without a word. ``key`` names the setting (``trainsets.<name>.score_range``).
    """
    scores = np.asarray(scores, dtype="float64")
    lo, hi = score_range
    series = pd.Series(scores)
    infinite = ~np.isfinite(scores)
    if infinite.any():
        raise DataError(f"{table}: {int(infinite.sum())} of {len(scores)} rows have a score that is not a finite number "
                        f"(column score; {_rows(infinite, series)}); fix or remove those rows and rerun")
    outside = (scores < lo) | (scores > hi)
    if outside.any():
        raise DataError(
            f"{table}: {int(outside.sum())} of {len(scores)} rows have a score outside the train set's score_range "
            f"[{lo:g}, {hi:g}] ({key}; column score; {_rows(outside, series)}; the table's scores run from "
            f"{scores.min():g} to {scores.max():g}): the labels would leave the scale the losses expect; set {key} to the "
            "table's scale, or fix those rows"
        )



# ---------------------------------------------------------------------------------- SentEval transfer tasks


@dataclass(frozen=True)
class TransferContract:
    """What SentEval's files of one transfer task hold: the ``labels`` a sample's label field may take, as the
    file writes it (``label_field`` says where it stands; none for the binary tasks, whose label is the file
    a sentence is in), the published samples per file (``rows``, paths relative to the downstream root) and
    the blank lines a published file holds (``blank``): SentEval encodes those as empty samples, and dropping
    them would change the cross-validation folds, so they are kept, and any other empty sentence is refused."""

    task: str
    rows: dict[str, int]
    labels: tuple[str, ...] = ()
    label_field: str = ""
    blank: dict[str, int] = field(default_factory=dict)

    @property
    def n_classes(self) -> int:
        return len(self.labels) or 2


_TRANSFER_FIX = ("restore the published file: delete it and rerun snakemake, which lays it out again from the data mirror "
                 "or SentEval's download (rule download_file)")

# the published sizes (MRPC without its header line) and blank lines, counted on SentEval's files (sha256 in the mirror's
# manifest): a different count means another distribution of the data, and results that are not comparable
TRANSFER_CONTRACTS: dict[str, TransferContract] = {c.task: c for c in (
    TransferContract("MR", {"MR/rt-polarity.pos": 5331, "MR/rt-polarity.neg": 5331}),
    TransferContract("CR", {"CR/custrev.pos": 2407, "CR/custrev.neg": 1368}, blank={"CR/custrev.pos": 2, "CR/custrev.neg": 2}),
    TransferContract("SUBJ", {"SUBJ/subj.objective": 5000, "SUBJ/subj.subjective": 5000}),
    TransferContract("MPQA", {"MPQA/mpqa.pos": 3312, "MPQA/mpqa.neg": 7294}, blank={"MPQA/mpqa.pos": 1, "MPQA/mpqa.neg": 2}),
    TransferContract("SST2", {"SST/binary/sentiment-train": 67349, "SST/binary/sentiment-dev": 872, "SST/binary/sentiment-test": 1821},
                     labels=("0", "1"), label_field="the label after the tab"),
    # the coarse classes, in the order SentEval numbers them 0..5; the fine label after ':' is discarded
    TransferContract("TREC", {"TREC/train_5500.label": 5452, "TREC/TREC_10.label": 500},
                     labels=("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"), label_field="the coarse label before ':'"),
    TransferContract("MRPC", {"MRPC/msr_paraphrase_train.txt": 4076, "MRPC/msr_paraphrase_test.txt": 1725},
                     labels=("0", "1"), label_field="the Quality field"),
)}


def _lines(lines: Sequence[int], mask: np.ndarray, values: Sequence | None = None) -> str:
    rows = np.flatnonzero(mask)
    shown = ", ".join(str(lines[i]) for i in rows[:SHOWN_ROWS]) + (", ..." if len(rows) > SHOWN_ROWS else "")
    if values is None:
        return f"lines {shown}"
    return f"lines {shown}: values {', '.join(repr(values[i]) for i in rows[:SHOWN_ROWS])}"


def check_transfer_file(path: str | os.PathLike, rel: str, task: str, *, texts: dict[str, Sequence[str]], lines: Sequence[int],
                        labels: Sequence[str] | None = None, rows: int | None = None) -> None:
    """Raise :class:`DataError` at the first way one SentEval file of ``task`` (``rel``: its path under the downstream
    root) breaks :data:`TRANSFER_CONTRACTS`: a label outside the task's classes, an empty sentence the published
    file does not have, a sample count other than ``rows`` (the published one; None for a synthetic corpus).

    ``texts``: the sentences by field (``sentence``, or ``sentence1`` and ``sentence2``), as SentEval would encode
    them; ``lines``: each sample's 1-based line in the file; ``labels``: each sample's label field as written.
    One message names the file, the field, the count, the first offending lines with their values, and the fix.
    """
    c = TRANSFER_CONTRACTS[task]
    n = len(lines)
    where = f"{path} (SentEval {task})"
    if labels is not None and c.labels:
        outside = ~np.isin(np.asarray(labels, dtype=object), np.asarray(c.labels, dtype=object))
        if outside.any():
            raise DataError(f"{where}: {int(outside.sum())} of {n} samples have a label that is not one of {', '.join(c.labels)} "
                            f"({c.label_field}; {_lines(lines, outside, labels)}); {_TRANSFER_FIX}")
    empty = {name: np.array([not t for t in ts], dtype=bool) for name, ts in texts.items()}
    any_empty = np.logical_or.reduce(list(empty.values())) if empty else np.zeros(n, dtype=bool)
    kept = c.blank.get(rel, 0)
    if any_empty.sum() > kept:
        per_field = ", ".join(f"{name}: {int(m.sum())}" for name, m in empty.items() if m.any())
        published = f"the published file has {kept} (blank lines SentEval keeps)" if kept else "the published file has none"
        raise DataError(f"{where}: {int(any_empty.sum())} of {n} samples have an empty sentence ({per_field}; {_lines(lines, any_empty)}), "
                        f"where {published}: each would be encoded as the special tokens alone, the same vector for every one; "
                        f"{_TRANSFER_FIX}")
    if rows is not None and n != rows:
        raise DataError(f"{where}: {n} samples where the published file has {rows} (a copy cut short, or another version); "
                        f"{_TRANSFER_FIX}")
