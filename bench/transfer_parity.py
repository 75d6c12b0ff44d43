"""Transfer-task parity with SimCSE's SentEval on the real data mirror, in test mode (minutes).

    .venv/bin/python bench/transfer_parity.py                  # test mode: CR, SST2, TREC, MRPC
    .venv/bin/python bench/transfer_parity.py --modes fasttest test

The suite checks the mirror in fasttest mode (tests/test_evaluate_transfer.py); test mode's 10-fold
cross-validation and larger grids take ~6 minutes on 2 cores, so it is checked here. Every
(mode, task) runs our ``aoe.evaluate.transfer`` with one torch thread on the hash embeddings
SentEval was run on, and every number must equal SentEval's (tests/senteval_reference.py)
exactly. Prints a table, writes ``bench/results/transfer_parity.json`` (committed: a reader
checks the parity there), and exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, default_mirror, print_table, write_json  # noqa: E402

from aoe.data.transfer import read_transfer, resolve_transfer_root  # noqa: E402
from aoe.evaluate.transfer import evaluate_transfer  # noqa: E402
from tests.senteval_reference import SENTEVAL_MIRROR, encoder  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", nargs="+", choices=sorted(SENTEVAL_MIRROR), default=["test"])
    parser.add_argument("--tasks", nargs="+", default=None, help="default: every task with a SentEval reference")
    parser.add_argument("--mirror", default=default_mirror())
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "transfer_parity.json"))
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(1)  # SentEval's reference runs used one thread
    downstream = resolve_transfer_root(args.mirror)
    rows, records = [], []
    for mode in args.modes:
        for task, expected in SENTEVAL_MIRROR[mode].items():
            if args.tasks and task not in args.tasks:
                continue
            start = time.perf_counter()
            data = {task: read_transfer(downstream, task)}
            ours = evaluate_transfer(encoder(), [task], mode=mode, data=data)["tasks"][task]
            seconds = time.perf_counter() - start
            diffs = {k: round(ours[k] - v, 6) for k, v in expected.items()}
            equal = all(ours[k] == v for k, v in expected.items())
            records.append({"mode": mode, "task": task, "senteval": expected, "ours": ours, "equal": equal, "seconds": round(seconds, 1)})
            shown = ", ".join(f"{k} {ours[k]:.2f}" for k in expected)
            rows.append([mode, task, shown, "yes" if equal else f"NO {diffs}", round(seconds, 1)])
            print(f"{mode} {task}: {shown} ({'equal' if equal else 'DIFFERENT'}, {seconds:.1f} s)", flush=True)
    print_table("Transfer tasks, ours vs SimCSE's SentEval (hash embeddings, real mirror)", ["mode", "task", "ours", "equal to SentEval", "seconds"], rows)
    mismatches = [r for r in records if not r["equal"]]
    path = write_json(
        "transfer_parity",
        {
            "command": " ".join(["bench/transfer_parity.py", *(argv if argv is not None else sys.argv[1:])]),
            "reference": "tests/senteval_reference.py (SimCSE's SentEval, commit 49fa580)",
            "torch_threads": 1,
            "results": records,
            "all_equal": not mismatches,
        },
        out=args.out,
    )
    print(f"wrote {path}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
