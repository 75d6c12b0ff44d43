"""Input files in another encoding or cut short (issue 53's second sweep, bench/faults/fault_sweep.py): each names
itself and the fix, where it failed in a bare UnicodeDecodeError or EOFError naming no file."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from aoe.data.io import DataError
from aoe.data.nli import read_allnli
from aoe.gis.stats import load_pairs

ROWS = [{"text1": f"Résumé of café issue {i}", "text2": f"naïve fix {i}", "label": i % 2} for i in range(6)]
JSONL = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (JSONL.encode("utf-16"), r"pairs\.jsonl: UTF-16 .* save it as UTF-8"),
        (JSONL.encode("latin-1"), r"pairs\.jsonl, line 1: not UTF-8 \(invalid continuation byte at byte 12: Latin-1"),
    ],
    ids=["utf16", "latin1"],
)
def test_gis_pairs_in_another_encoding_name_the_file_line_and_fix(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_bytes(data)
    with pytest.raises(DataError, match=message):
        load_pairs(path)


@pytest.mark.parametrize("data", [b"\xef\xbb\xbf" + JSONL.encode(), JSONL.replace("\n", "\r\n").encode()], ids=["bom", "crlf"])
def test_gis_pairs_with_a_utf8_bom_or_crlf_read_as_written(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_bytes(data)
    assert load_pairs(path) == ROWS


def _allnli(rows: int = 2000, encoding: str = "utf-8") -> bytes:
    lines = ["split\tdataset\tfilename\tsentence1\tsentence2\tlabel"]
    labels = ["entailment", "neutral", "contradiction"]
    lines += [f"train\tSNLI\tx\tA café {i}\tNaïve {i}\t{labels[i % 3]}" for i in range(rows)]
    return gzip.compress(("\n".join(lines) + "\n").encode(encoding))


def test_allnli_gzip_cut_short_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "AllNLI.tsv.gz"
    whole = _allnli()
    path.write_bytes(whole)
    assert len(read_allnli(path)) == 2000
    path.write_bytes(whole[: len(whole) * 6 // 10])
    with pytest.raises(DataError, match=r"AllNLI\.tsv\.gz: not a whole gzip file \(EOFError.*a copy cut short; delete it"):
        read_allnli(path)


def test_allnli_in_latin1_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "AllNLI.tsv.gz"
    path.write_bytes(_allnli(encoding="latin-1"))
    with pytest.raises(DataError, match=r"AllNLI\.tsv\.gz: not UTF-8 after line 1 .*delete it and rerun"):
        read_allnli(path)
