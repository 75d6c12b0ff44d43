"""Transfer-task parity with SimCSE's SentEval: every task with a reference, on the real data mirror and the synthetic corpus (minutes).

    .venv/bin/python bench/parity/transfer_parity.py                                # all of it (~8 min on 2 cores)
    .venv/bin/python bench/parity/transfer_parity.py --corpora mirror --modes test  # test mode on the mirror only

The suite (tests/test_evaluate_transfer.py) checks one task of each of SentEval's classifier paths, at the
smallest size that still shows a difference: on the mirror in fasttest mode CR (nested k-fold, binary), TREC
(k-fold, six classes) and MRPC (k-fold on pair features, F1); on the synthetic corpus every task in fasttest
mode and, in test mode, one nested k-fold task, SST2 (the dev-split path), TREC and MRPC, with both
classifiers. This script runs every task SentEval was run on: the mirror in fasttest mode (the seven tasks;
MR, SUBJ, MPQA and SST2 take 25-50 CPU-seconds each on a 2-core EPYC, so the suite leaves them here) and in
test mode (CR, SST2, TREC, MRPC: 10-fold cross-validation, minutes a task), and the synthetic corpus in
both modes with both classifiers (seconds). Every (corpus, mode, classifier, task) runs our
``aoe.evaluate.transfer`` with one torch thread and one BLAS thread on the hash embeddings SentEval was run
on; every number must equal SentEval's (tests/senteval_reference.py) exactly, and the task's ``ndev`` /
``ntest`` the split sizes its protocol classifies (on the mirror the published ones, MIRROR_SIZES). Prints a
table, writes ``bench/parity/results/transfer_parity.json`` (committed: a reader checks the parity there), and
exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench/, after the group folders: _common (bench/_moved.py)
from _common import default_mirror, print_table, write_json  # noqa: E402

from aoe.data.transfer import TransferData, read_transfer, resolve_transfer_root  # noqa: E402
from aoe.evaluate.transfer import evaluate_transfer  # noqa: E402
from tests.senteval_reference import MIRROR_SIZES, SENTEVAL_MIRROR, SENTEVAL_SYNTHETIC, encoder, write_synthetic_senteval  # noqa: E402

CORPORA = ("mirror", "synthetic")


def protocol_sizes(data: TransferData) -> tuple[int, int]:
    """(ndev, ntest) SentEval reports for a task, from the split sizes of ``data``: the nested k-fold tasks
    (one split, "all") cross-validate all of it; SST2 picks on dev and scores test; TREC and MRPC
    cross-validate train and score test."""
    n = {name: len(split) for name, split in data.splits.items()}
    if "all" in n:
        return n["all"], n["all"]
    return (n["dev"] if "dev" in n else n["train"]), n["test"]


def mirror_sizes(task: str) -> tuple[int, int]:
    """protocol_sizes on the mirror, from the published split sizes (MIRROR_SIZES), not from the files read."""
    sizes = MIRROR_SIZES[task]
    if "all" in sizes:
        return sizes["all"], sizes["all"]
    return (sizes["dev"] if "dev" in sizes else sizes["train"]), sizes["test"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", nargs="+", choices=CORPORA, default=list(CORPORA))
    parser.add_argument("--modes", nargs="+", choices=sorted(SENTEVAL_MIRROR), default=["fasttest", "test"])
    parser.add_argument("--tasks", nargs="+", default=None, help="default: every task with a SentEval reference")
    parser.add_argument("--mirror", default=default_mirror())
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "transfer_parity.json"))
    args = parser.parse_args(argv)

    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)  # SentEval's reference runs used one thread
    limits = threadpool_limits(1)  # noqa: F841 - one BLAS thread too, as the suite's workers (tests/conftest.py)
    # (corpus, mode, classifier, task, SentEval's numbers, the data, the sizes expected)
    cases = []
    if "mirror" in args.corpora:
        downstream = resolve_transfer_root(args.mirror)
        for mode in args.modes:
            for task, expected in SENTEVAL_MIRROR[mode].items():
                cases.append(("mirror", mode, "pytorch", task, expected, lambda t=task: read_transfer(downstream, t), mirror_sizes(task)))
    if "synthetic" in args.corpora:
        root = write_synthetic_senteval(Path(tempfile.mkdtemp(prefix="senteval-synthetic-")) / "downstream")
        synthetic = {t: read_transfer(root, t, expected_rows=None, published=False) for t in MIRROR_SIZES}
        for (mode, backend), tasks in SENTEVAL_SYNTHETIC.items():
            if mode in args.modes:
                for task, expected in tasks.items():
                    cases.append(("synthetic", mode, backend, task, expected, lambda t=task: synthetic[t], protocol_sizes(synthetic[task])))
    rows, records = [], []
    for corpus, mode, backend, task, expected, load, sizes in cases:
        if args.tasks and task not in args.tasks:
            continue
        start = time.perf_counter()
        data = {task: load()}
        ours = evaluate_transfer(encoder(), [task], mode=mode, usepytorch=backend == "pytorch", data=data)["tasks"][task]
        seconds = time.perf_counter() - start
        diffs = {k: round(ours[k] - v, 6) for k, v in expected.items()}
        sizes_equal = (ours["ndev"], ours["ntest"]) == sizes
        equal = all(ours[k] == v for k, v in expected.items()) and sizes_equal
        records.append({"corpus": corpus, "mode": mode, "classifier": backend, "task": task, "senteval": expected, "ours": ours,
                        "sizes": {"ndev": sizes[0], "ntest": sizes[1]}, "equal": equal, "seconds": round(seconds, 1)})
        shown = ", ".join(f"{k} {ours[k]:.2f}" for k in expected)
        verdict = "yes" if equal else f"NO {diffs}" + ("" if sizes_equal else f" sizes {(ours['ndev'], ours['ntest'])} != {sizes}")
        rows.append([corpus, mode, backend, task, shown, verdict, round(seconds, 1)])
        print(f"{corpus} {mode} {backend} {task}: {shown} ({'equal' if equal else 'DIFFERENT'}, {seconds:.1f} s)", flush=True)
    print_table("Transfer tasks, ours vs SimCSE's SentEval (hash embeddings)",
                ["corpus", "mode", "classifier", "task", "ours", "equal to SentEval", "seconds"], rows)
    mismatches = [r for r in records if not r["equal"]]
    path = write_json(
        "transfer_parity",
        {
            "command": " ".join(["bench/parity/transfer_parity.py", *(argv if argv is not None else sys.argv[1:])]),
            "reference": "tests/senteval_reference.py (SimCSE's SentEval, commit 49fa580)",
            "torch_threads": 1,
            "blas_threads": 1,
            "results": records,
            "all_equal": not mismatches,
        },
        out=args.out,
    )
    print(f"wrote {path}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
