"""Best-checkpoint selection against the official angle-emb 0.1.1 ``EvaluateCallback`` on scripted scores.

    .venv/bin/python bench/parity/selection_parity.py [--random 200] [--seed 0] [--out PATH]

``select_checkpoint: best`` (aoe.training.selection) follows the official callback (fcb6223 angle_emb/angle.py:398-415):
``best_corrcoef = 0``; at each epoch end ``corrcoef, accuracy = evaluate_fn(valid_ds)`` and, if
``corrcoef > best_corrcoef``, ``model.save_pretrained(<output_dir>/best-checkpoint)``. Its corrcoef is
``AnglE.evaluate``'s ``scipy.stats.spearmanr(...).correlation`` (angle.py:133-134, 736-764), in [-1, 1]
or NaN. Both rules run here on the same score sequences:

- official: in its own venv (``_common.ensure_angle_venv("0.1.1")``) a worker builds the release's
  ``EvaluateCallback`` with a stub model whose ``save_pretrained`` records the epoch it holds and an
  ``evaluate_fn`` returning the scripted ``(numpy.float64 corrcoef, accuracy)``, and calls
  ``on_epoch_end`` once per epoch through transformers' ``CallbackHandler``, as ``Trainer`` does
  (transformers/trainer.py ``callback_handler.on_epoch_end(args, self.state, self.control)``).
  Its choice: the epoch of the last save (what best-checkpoint ends up holding), or none.
- ours: ``aoe.training.selection.select_at`` at each epoch end and ``aoe.training.selection.keep_best`` at the end, on a stub
  run whose encoder is a one-weight torch module holding its epoch number (``_Full.kept_weights``
  copies it), with ``validation_spearman`` replaced by the scripted value converted as the real
  scorer converts it (x100, None when not finite; its source is checked for that line). Its choice:
  the selected epoch (``selection.best``) or none, and the epoch whose weights the model folder gets.

Sequences: named cases (ties, NaN, all non-positive, rising, falling, ...), pairs of scores one ulp
apart at the top, and ``--random`` seeded random ones (negatives, zeros, NaN, repeated values).
Criterion: the same chosen epoch (or none) for every sequence, and our run finishing with a model
folder. One difference is known and allowed: we compare the scores x100, and two statistics one ulp
apart can round to the same x100 value (our tie, the earlier kept; the official keeps the later).
Distinct Spearman values of one validation set lie far more than an ulp apart, so only float noise
between equal values could meet it. The JSON (bench/parity/results/selection_parity.json) has every sequence (null = NaN), both
choices, the official saves and the venv's versions.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench/, after the group folders: _common (bench/_moved.py)
import _common as C  # noqa: E402

RESULT = C.committed(__file__, "selection_parity.json")
OFFICIAL = "0.1.1"
NAN = float("nan")
# our scorer's conversion of scipy's statistic; the bench fails if aoe.training.selection's scorer stops ending with it
OUR_CONVERSION = "return 100 * value if math.isfinite(value) else None"


def _ulp_pairs() -> list[tuple[str, list[float]]]:
    """[a, b] with b the next float above a: one pair whose x100 values collide, one whose do not."""
    import numpy as np

    found, a = {}, 0.8
    while len(found) < 2:
        b = float(np.nextafter(a, 2.0))
        found.setdefault(100 * a == 100 * b, [a, b])
        a = b
    return [("1 ulp apart, x100 equal", found[True]), ("1 ulp apart, x100 distinct", found[False])]


NAMED: list[tuple[str, list[float]]] = [
    ("best then a tie then lower", [0.3, 0.5, 0.5, 0.4]),
    ("falling", [0.2, 0.1]),
    ("falling, 4", [0.4, 0.3, 0.2, 0.1]),
    ("rising", [0.1, 0.2, 0.3, 0.4]),
    ("one epoch", [0.7]),
    ("tie at the top", [0.5, 0.6, 0.6, 0.3]),
    ("tie, two epochs", [0.6, 0.6]),
    ("NaN first", [NAN, 0.4]),
    ("NaN between", [0.4, NAN, 0.6]),
    ("NaN last", [0.4, 0.6, NAN]),
    ("all NaN", [NAN, NAN]),
    ("one NaN", [NAN]),
    ("all negative", [-0.1, -0.2]),
    ("all negative, rising", [-0.3, -0.2, -0.1]),
    ("all zero", [0.0, 0.0]),
    ("negative zero", [-0.0]),
    ("zero then negative", [0.0, -0.1]),
    ("negative and NaN", [-0.1, NAN, -0.05]),
    ("negative then positive", [-0.1, 0.3]),
    ("positive, negative, higher", [0.3, -0.5, 0.4]),
    ("zero then tiny positive", [0.0, 1e-12]),
    ("smallest subnormal", [5e-324]),
    ("extremes", [-1.0, 1.0]),
    ("perfect twice", [1.0, 1.0]),
]


def random_sequences(n: int, seed: int) -> list[list[float]]:
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        negative = rng.random() < 0.15  # whole sequences below 0: the official saves nothing
        seq: list[float] = []
        for _ in range(int(rng.integers(1, 9))):
            r = rng.random()
            if r < 0.15:
                seq.append(NAN)
            elif r < 0.35 and seq:
                seq.append(seq[int(rng.integers(len(seq)))])  # ties, NaN repeats too
            elif r < 0.40:
                seq.append(0.0)
            else:
                v = float(rng.uniform(-1.0, 0.0) if negative else rng.uniform(-0.3, 1.0))
                seq.append(round(v, 2) if rng.random() < 0.5 else v)  # rounded: more equal values
        out.append(seq)
    return out


def classify(seq: list[float]) -> str:
    finite = [x for x in seq if not math.isnan(x)]
    if not finite:
        return "all NaN"
    top = max(finite)
    if top <= 0:
        return "no score above 0"
    if len(finite) < len(seq):
        return "above 0, with NaN"
    if min(finite) <= 0:
        return "above 0, with scores <= 0"
    if finite.count(top) > 1:
        return "above 0, tie at the top"
    return "above 0, one maximum"


# --------------------------------------------------------------------------- official (its venv)


def worker_official(payload_path: str, out_path: str) -> None:
    """Run in angle-emb 0.1.1's venv: the release's EvaluateCallback over each scripted sequence."""
    import tempfile

    import numpy
    import scipy
    import torch
    import transformers
    from transformers import TrainerControl, TrainerState, TrainingArguments
    from transformers.trainer_callback import CallbackHandler

    import angle_emb
    from angle_emb.angle import EvaluateCallback

    class StubModel:
        """What the callback reads of a PreTrainedModel: save_pretrained."""

        def __init__(self):
            self.epoch, self.saves = None, []

        def save_pretrained(self, path):
            self.saves.append({"epoch": self.epoch, "path": os.path.basename(path)})

    sequences = json.loads(Path(payload_path).read_text())["sequences"]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(output_dir=tmp, report_to=[])
        for seq in sequences:
            model = StubModel()
            scripted = iter(seq)
            # evaluate_fn's corrcoef is scipy's statistic: a numpy float64, as AnglE.evaluate returns it
            callback = EvaluateCallback(model, valid_ds=None, evaluate_fn=lambda ds: (numpy.float64(next(scripted)), 0.5),
                                        save_dir=os.path.join(tmp, "best-checkpoint"))
            handler = CallbackHandler([callback], model, None, None, None)
            state, control = TrainerState(), TrainerControl()
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                for epoch in range(len(seq)):
                    model.epoch = epoch
                    state.epoch = float(epoch + 1)
                    control = handler.on_epoch_end(args, state, control)
            best = float(callback.best_corrcoef)
            results.append({"saves": [s["epoch"] for s in model.saves], "save_dirs": sorted({s["path"] for s in model.saves}),
                            "best_checkpoint": model.saves[-1]["epoch"] if model.saves else None,
                            "best_corrcoef": None if math.isnan(best) else best,
                            "new_best_lines": printed.getvalue().count("new best corrcoef!")})
    versions = {"angle_emb": angle_emb.__version__, "transformers": transformers.__version__, "torch": torch.__version__,
                "numpy": numpy.__version__, "scipy": scipy.__version__, "python": sys.version.split()[0]}
    Path(out_path).write_text(json.dumps({"versions": versions, "results": results}))


def official(sequences: list[list[float]]) -> dict:
    py = C.ensure_angle_venv(OFFICIAL)
    work = C.WORK_DIR / "selection-parity"
    work.mkdir(parents=True, exist_ok=True)
    payload, out = work / "payload.json", work / "official.json"
    payload.write_text(json.dumps({"sequences": sequences}))  # NaN as Python's json writes and reads it
    env = {**os.environ, "OMP_NUM_THREADS": "2", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([str(py), str(Path(__file__).resolve()), "--worker", str(payload), str(out)],
                          capture_output=True, text=True, env=env, cwd=C.REPO)
    if proc.returncode != 0:
        raise SystemExit(f"official worker ({OFFICIAL}) failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return json.loads(out.read_text())


# --------------------------------------------------------------------------- ours


def ours(seq: list[float]) -> dict:
    """aoe.training.selection's select_at at each epoch end and keep_best at the end, on a stub run."""
    import inspect
    from types import SimpleNamespace

    import torch

    import aoe.training.selection as S
    import aoe.training.train as T
    from aoe.training.finetuning import Full

    if OUR_CONVERSION not in inspect.getsource(S.validation_spearman):
        raise SystemExit(f"aoe.training.selection.validation_spearman no longer ends with {OUR_CONVERSION!r}: update this bench's scorer")
    cfg = T.TrainConfig(objective="aoe", select_checkpoint="best", select_split={"dataset": "bench", "split": "scripted"})
    sel = object.__new__(S.Selection)  # without its table: the scorer is scripted
    sel.split, sel.table, sel.table_sha256, sel.split_is_test = dict(cfg.select_split), None, None, False
    sel.scores, sel.best, sel.weights = [], None, None
    encoder = torch.nn.Linear(1, 1, bias=False)
    printed: list[str] = []
    accelerator = SimpleNamespace(unwrap_model=lambda m: m, print=lambda *a: printed.append(" ".join(map(str, a))))
    run = SimpleNamespace(selection=sel, finetuning=Full(cfg), accelerator=accelerator,
                          module=SimpleNamespace(encoder=encoder))
    scripted = iter(seq)
    real = S.validation_spearman

    def scorer(run):
        value = next(scripted)
        return 100 * value if math.isfinite(value) else None

    S.validation_spearman = scorer
    error = None
    try:
        for epoch in range(len(seq)):
            with torch.no_grad():
                encoder.weight.fill_(epoch)  # the weights "are" the epoch they were trained to
            S.select_at(run, {"epoch": epoch, "step": 5 * (epoch + 1)}, [])
        try:
            S.keep_best(run)
        except FloatingPointError as e:
            error = f"{type(e).__name__}: {e}"
    finally:
        S.validation_spearman = real
    record = None
    if error is None:
        record = sel.record()
        record = {k: record[k] for k in ("epoch", "step", "score") if k in record}
    return {"selected": sel.best["epoch"] if sel.best else None,
            "model_folder": None if error else int(encoder.weight.item()),
            "error": error, "scores_x100": [s["spearman"] for s in sel.scores], "record": record,
            **({"printed": printed} if sel.best is None else {})}  # the message of a run that selects none


# --------------------------------------------------------------------------- comparison


def _json_seq(seq: list[float]) -> list[float | None]:
    return [None if math.isnan(x) else x for x in seq]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--random", type=int, default=200, help="random sequences beside the named ones")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help=f"JSON path (default {RESULT.relative_to(C.REPO)})")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker_official(*args.worker)
        return

    cases = [{"name": n, "class": classify(s), "seq": s} for n, s in NAMED]
    cases += [{"name": n, "class": "1 ulp apart at the top", "seq": s} for n, s in _ulp_pairs()]
    cases += [{"name": f"random {i}", "class": classify(s), "seq": s} for i, s in enumerate(random_sequences(args.random, args.seed))]
    off = official([c["seq"] for c in cases])
    rows = []
    for c, o in zip(cases, off["results"]):
        u = ours(c["seq"])
        # equal: the same epoch chosen (or none), and our run still writes a model folder
        equal = u["selected"] == o["best_checkpoint"] and u["error"] is None
        a, b = o["best_checkpoint"], u["selected"]
        x100_tie = not equal and None not in (a, b) and 100 * c["seq"][a] == 100 * c["seq"][b]
        rows.append({"name": c["name"], "class": c["class"], "scores": _json_seq(c["seq"]), "official": o, "ours": u,
                     "equal": equal, "x100_tie": x100_tie})

    classes: dict[str, dict] = {}
    for r in rows:
        k = classes.setdefault(r["class"], {"sequences": 0, "equal": 0, "official_none": 0, "disagreements": {}})
        k["sequences"] += 1
        k["equal"] += r["equal"]
        k["official_none"] += r["official"]["best_checkpoint"] is None
        if not r["equal"]:
            o, u = r["official"]["best_checkpoint"], r["ours"]
            kind = (f"official {'none' if o is None else 'an epoch'}, ours "
                    f"{'fails' if u['error'] else 'none' if u['selected'] is None else 'another epoch'}"
                    f"{' (x100 equal)' if r['x100_tie'] else ''}")
            k["disagreements"][kind] = k["disagreements"].get(kind, 0) + 1
    # where the official keeps nothing, our model folder gets the last epoch, as the official's final model
    none_last = all(r["ours"]["model_folder"] == len(r["scores"]) - 1 for r in rows if r["official"]["best_checkpoint"] is None
                    and r["ours"]["error"] is None)
    venv = C.angle_venv_record(OFFICIAL)
    record = {
        "command": "python bench/parity/selection_parity.py " + " ".join(sys.argv[1:]),
        "criterion": "the epoch best-checkpoint ends up holding (the last save of angle-emb 0.1.1's EvaluateCallback) "
                     "equals the epoch aoe.training.train's selection keeps (none for none), and our run ends with a model folder; "
                     "allowed: a different epoch whose score x100 equals the official one's (x100_tie)",
        "pass": all(r["equal"] or r["x100_tie"] for r in rows) and none_last,
        "equal": sum(r["equal"] for r in rows), "x100_ties": sum(r["x100_tie"] for r in rows),
        "no_selection_writes_the_last_epoch": none_last,
        "classes": classes, "sequences": rows, "random": {"count": args.random, "seed": args.seed},
        "official_versions": off["versions"],
        "venv": {k: venv[k] for k in ("requirements", "built_with", "freeze")},
    }
    path = C.write_json("selection_parity", record, args.out or str(RESULT))
    C.print_table("Best-checkpoint choice: aoe.training.train against angle-emb 0.1.1's EvaluateCallback (same score sequences)",
                  ["sequence class", "count", "equal", "official saves none", "disagreements"],
                  [[name, k["sequences"], k["equal"], k["official_none"],
                    ", ".join(f"{v} {d}" for d, v in k["disagreements"].items()) or "-"] for name, k in classes.items()])
    total = sum(r["equal"] for r in rows)
    print(f"  all: {total}/{len(rows)} equal, {record['x100_ties']} x100 ties (allowed, see the docstring); where the official "
          f"saves none, our model folder holds the last epoch: {none_last}")
    print(f"wrote {path}")
    if not record["pass"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
