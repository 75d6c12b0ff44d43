"""Rule train: fine-tune one (backbone, objective, train set, seed) cell; several GPUs via accelerate launch."""

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.config.cells import Cell
from aoe.config.checkpoint_selection import selection_split
from aoe.training.checkpoints import checkpoint_dir
from aoe.training.interruption import RESUMABLE_EXIT, clear_interrupted, read_interrupted
from aoe.util.joblog import forget_kept, start_log

# a job that resumes a checkpoint keeps the log of the run it resumes (issue 71): steps 0..N stay readable
KEPT_LOG = checkpoint_dir(snakemake.output[0]) / "job.log"
start_log(snakemake.log[0], kept=KEPT_LOG)
# this job is no longer the interrupted one: a failure from here on is reported as one (aoe.plan.interruptions)
clear_interrupted(checkpoint_dir(snakemake.output[0]))

from aoe.config.hparams import RUN_ONLY, resolve_cell
from aoe.losses import get_objective
from aoe.training.train import TrainConfig, train

w = snakemake.wildcards
cell = Cell.from_wildcards(w)  # a rerun trains with its cell's seed
# from the config, not params: neither the key behind a value (a moved key) nor how often a run logs
# and checkpoints may rerun a training
resolved = resolve_cell(snakemake.config, cell.backbone, cell.objective, cell.trainset, cell.seed)
params = {**snakemake.params.train, **{k: resolved.params[k] for k in RUN_ONLY}}
cfg = TrainConfig(**params)
# the loss this job trains is the one Snakemake planned (its params), built-in defaults included
built = asdict(get_objective(cfg.objective, cfg.objective_overrides, format=cfg.format))
if {k: built[k] for k in snakemake.params.loss} != dict(snakemake.params.loss):
    raise RuntimeError(f"the objective built here {built} differs from the planned loss settings {dict(snakemake.params.loss)}")
record = {"cell": dict(w), "slurm_job_id": os.environ.get("SLURM_JOB_ID"), "provenance": resolved.provenance()}
args = (snakemake.input.tokens, snakemake.input.table, snakemake.input.backbone, snakemake.output[0])
init_dir = snakemake.input.get("init") or None  # trainsets.<t>.train.init: a trained model to start from
# select_checkpoint best: the planned table (an input), and whether the cell is also evaluated on it
selection = selection_split(snakemake.config, cell)
select = {"select_table": snakemake.input.select[0], "select_is_test": selection["split_is_test"]} if selection else {}
processes = int(snakemake.params.processes)
if processes <= 1:
    print(json.dumps(train(*args, cfg, extra_record=record, init_dir=init_dir, **select), indent=2))
else:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(params))
        (Path(tmp) / "record.json").write_text(json.dumps(record))
        launch = [
            str(Path(sys.executable).parent / "accelerate"), "launch", "--multi_gpu", "--num_machines", "1",
            "--num_processes", str(processes), "--mixed_precision", cfg.mixed_precision, "--dynamo_backend", "no",
            "-m", "aoe.training.train", "--cache", args[0], "--table", args[1], "--backbone", args[2], "--out", args[3],
            "--config", str(Path(tmp) / "config.json"), "--record", str(Path(tmp) / "record.json"),
            *(["--init", init_dir] if init_dir else []),
            *(["--select-table", select["select_table"]] if select else []),
            *(["--select-is-test"] if select.get("select_is_test") else []),
        ]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(snakemake.scriptdir).parent), os.environ.get("PYTHONPATH", "")])}
        launched = subprocess.run(launch, env=env)
        # a signal stopped it with a checkpoint, not an error: torch's elastic launcher reports any child's exit
        # as 1, the record says which (each run clears it as it starts)
        if launched.returncode != 0 and read_interrupted(checkpoint_dir(args[3])) is not None:
            sys.exit(RESUMABLE_EXIT)
        launched.check_returncode()
forget_kept(KEPT_LOG)  # trained: a later run of this job (forced, another setting) starts its own log
