"""SentEval's classifiers, as SimCSE runs them: what the transfer tasks and the NLI probe fit.

The classifier is SentEval's PyTorch logistic regression (``usepytorch=True``,
what SimCSE uses): a linear layer trained with cross-entropy in mini-batches,
``epoch_size`` passes per "epoch", early stopping on validation accuracy with
``tenacity``, L2 penalty as the optimiser's weight decay over
``[1e-5, 1e-4, 1e-3, 1e-2]``. Everything random is seeded as in SentEval: each
classifier reseeds NumPy's legacy generator and torch with ``seed`` before it is
built, so data shuffles and weight initialisation match. Alternatively
(``usepytorch=False``) scikit-learn's LogisticRegression over SentEval's grids
of C. Accuracies are x100 and rounded to 2 decimals at the same places as
SentEval (per penalty, per fold, and the final mean), with the same rounding
functions (Python's ``round`` for Python floats, NumPy's for NumPy floats).

Three protocols choose the penalty: :func:`inner_kfold_classifier` (SentEval's
``InnerKFoldClassifier``), :func:`kfold_classifier` (``KFoldClassifier``) and
:func:`fit_split_classifier` (``SplitClassifier``); :mod:`aoe.evaluate.transfer` says
which task runs which, :mod:`aoe.evaluate.nli_probe` runs the split one.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from torch import nn

from aoe.util.progress import Progress

__all__ = [
    "MODES",
    "TORCH_REGS",
    "SKLEARN_REGS",
    "SKLEARN_KFOLD_REGS",
    "NOREG_TORCH",
    "NOREG_SKLEARN",
    "INNER_KFOLD_SHUFFLE_SEED",
    "VALIDATION_SPLIT",
    "ClassifierParams",
    "TorchClassifier",
    "classifier_fits",
    "fit_split_classifier",
    "inner_kfold_classifier",
    "kfold_classifier",
]

# SimCSE evaluation.py: "fasttest" (and "dev") and "test" settings, SentEval's
# other defaults left as they are (usepytorch True, seed 1111, max_epoch 200).
MODES: dict[str, dict[str, Any]] = {
    "fasttest": {"kfold": 5, "nhid": 0, "optim": "rmsprop", "batch_size": 128, "tenacity": 3, "epoch_size": 2},
    "test": {"kfold": 10, "nhid": 0, "optim": "adam", "batch_size": 64, "tenacity": 5, "epoch_size": 4},
}

# Penalty grids: weight decay for the PyTorch classifier, C for scikit-learn.
# SentEval's KFoldClassifier uses a different C grid than the other two.
TORCH_REGS: tuple[float, ...] = tuple(10**t for t in range(-5, -1))
SKLEARN_REGS: tuple[float, ...] = tuple(2**t for t in range(-2, 4))
SKLEARN_KFOLD_REGS: tuple[float, ...] = tuple(2**t for t in range(-1, 6))
# SentEval's "noreg": one nearly unregularised model instead of the grid.
NOREG_TORCH, NOREG_SKLEARN = 1e-9, 1e9

# InnerKFoldClassifier shuffles both of its k-folds with 1111 whatever the seed
# parameter says (KFoldClassifier uses the seed); kept so results match.
INNER_KFOLD_SHUFFLE_SEED = 1111
# Share of the training data held out for early stopping when no dev set is given.
VALIDATION_SPLIT = 0.05

_OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    "adadelta": torch.optim.Adadelta,
    "adagrad": torch.optim.Adagrad,
    "adam": torch.optim.Adam,
    "adamax": torch.optim.Adamax,
    "asgd": torch.optim.ASGD,
    "rmsprop": torch.optim.RMSprop,
    "rprop": torch.optim.Rprop,
    "sgd": torch.optim.SGD,
}
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)$")


@dataclass(frozen=True)
class ClassifierParams:
    """Classifier settings, named as in SentEval's params / ``params['classifier']``.

    ``nhid`` 0 is logistic regression (SimCSE's setting); above 0 SentEval's MLP
    (linear, dropout, sigmoid, linear). ``optim`` is SentEval's optimiser string,
    e.g. ``"adam"`` or ``"sgd,lr=0.1"``. ``kfold`` only matters to the
    cross-validated tasks and ``noreg`` only to the split classifier.
    """

    usepytorch: bool = True
    nhid: int = 0
    optim: str = "adam"
    batch_size: int = 64
    tenacity: int = 5
    epoch_size: int = 4
    max_epoch: int = 200
    dropout: float = 0.0
    kfold: int = 5
    noreg: bool = False

    @classmethod
    def from_mode(cls, mode: str, usepytorch: bool = True) -> ClassifierParams:
        """SimCSE's settings for ``mode`` ("test" or "fasttest")."""
        if mode not in MODES:
            raise ValueError(f"unknown transfer mode {mode!r}; valid: {', '.join(MODES)}")
        return cls(usepytorch=usepytorch, **MODES[mode])

    @classmethod
    def from_mapping(cls, params: Mapping[str, Any]) -> ClassifierParams:
        """Accept SentEval-style params: flat, or with the classifier settings under ``"classifier"``.

        Keys SentEval ignores for classification (``task_path``, ``seed``,
        ``batch_size`` of the encoder at the top level) are ignored here too.
        """
        flat = {k: v for k, v in params.items() if k in ("usepytorch", "kfold", "noreg")}
        inner = params.get("classifier")
        if inner is None:
            inner = {k: v for k, v in params.items() if k not in ("usepytorch", "kfold", "noreg", "classifier")}
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(inner) - known - {"task_path", "seed", "cudaEfficient"})
        if unknown:
            raise KeyError(f"unknown classifier parameter(s) {unknown}; known: {sorted(known)}")
        flat.update({k: v for k, v in inner.items() if k in known})
        return cls(**flat)


def _as_params(params: ClassifierParams | Mapping[str, Any]) -> ClassifierParams:
    return params if isinstance(params, ClassifierParams) else ClassifierParams.from_mapping(params)


def _make_optimizer(spec: str, model: nn.Module, l2reg: float) -> torch.optim.Optimizer:
    """Build the optimiser from SentEval's "name,key=value,..." string, with weight decay = ``l2reg``."""
    name, _, rest = spec.partition(",")
    if name not in _OPTIMIZERS:
        raise ValueError(f"unknown optimiser {name!r} in {spec!r}; known: {', '.join(_OPTIMIZERS)}")
    kwargs: dict[str, float] = {}
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not _NUMBER.match(value):
            raise ValueError(f"optimiser option {item!r} in {spec!r} is not key=number")
        kwargs[key] = float(value)
    optim_cls = _OPTIMIZERS[name]
    accepted = set(inspect.signature(optim_cls.__init__).parameters) - {"self", "params"}
    if set(kwargs) - accepted:
        raise ValueError(f"{name} does not accept {sorted(set(kwargs) - accepted)}")
    if name == "sgd" and "lr" not in kwargs:
        raise ValueError("sgd needs a learning rate, e.g. 'sgd,lr=0.1'")
    optimizer = optim_cls(model.parameters(), **kwargs)
    # Set afterwards, as SentEval does, so the penalty wins over any weight_decay in the string.
    optimizer.param_groups[0]["weight_decay"] = l2reg
    return optimizer


def _float_tensor(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x)).to(torch.float32)


def _long_tensor(y: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(y)).to(torch.int64)


class TorchClassifier:
    """SentEval's PyTorch logistic regression / MLP with its seeding and early stopping.

    Construction seeds a private NumPy ``RandomState`` and torch's generator with
    ``seed``, exactly the state SentEval gets from ``np.random.seed`` and
    ``torch.manual_seed``, but without disturbing the caller's global generators.
    """

    def __init__(self, params: ClassifierParams, inputdim: int, nclasses: int, l2reg: float, seed: int):
        self.params = params
        self.rng = np.random.RandomState(seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            if params.nhid == 0:
                self.model = nn.Sequential(nn.Linear(inputdim, nclasses))
            else:
                self.model = nn.Sequential(
                    nn.Linear(inputdim, params.nhid),
                    nn.Dropout(p=params.dropout),
                    nn.Sigmoid(),
                    nn.Linear(params.nhid, nclasses),
                )
            # Dropout draws from the global generator during training; carry its
            # state into fit() so the draws continue from the seeded state.
            self._torch_state = torch.get_rng_state()
        self.optimizer = _make_optimizer(params.optim, self.model, l2reg)

    def fit(
        self,
        X: np.ndarray,
        y: np.ndarray,
        validation_data: tuple[np.ndarray, np.ndarray] | None = None,
        validation_split: float | None = None,
        heartbeat: Callable[..., None] | None = None,
    ) -> float:
        """Train with early stopping on ``validation_data`` (or a random ``validation_split`` of X).

        Returns the best validation accuracy (a fraction); the model keeps the
        weights that reached it. ``heartbeat(epoch=...)`` is called after each
        validation (:meth:`aoe.util.progress.Progress.beat`: progress within a long fit).
        """
        if validation_data is not None:
            train_x, train_y = X, y
            dev_x, dev_y = validation_data
        elif validation_split:
            perm = self.rng.permutation(len(X))
            n_dev = int(validation_split * len(X))
            train_x, train_y = X[perm[n_dev:]], y[perm[n_dev:]]
            dev_x, dev_y = X[perm[:n_dev]], y[perm[:n_dev]]
        else:
            raise ValueError("fit needs validation_data or a validation_split")
        if len(dev_y) == 0 or len(train_y) == 0:
            raise ValueError(f"cannot train on {len(train_y)} samples and validate on {len(dev_y)}")
        tx, ty, dx, dy = _float_tensor(train_x), _long_tensor(train_y), _float_tensor(dev_x), _long_tensor(dev_y)

        p = self.params
        epochs, best, best_state, misses, stop = 0, -1.0, None, 0, False
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(self._torch_state)
            while not stop and epochs <= p.max_epoch:
                self._train_passes(tx, ty, p.epoch_size)
                epochs += p.epoch_size
                accuracy = self._score_tensors(dx, dy)
                if heartbeat is not None:
                    heartbeat(epoch=epochs)
                if accuracy > best:
                    best = accuracy
                    best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
                else:
                    # SentEval never resets this count: it stops after tenacity + 1
                    # non-improving evaluations in total, not in a row.
                    if misses >= p.tenacity:
                        stop = True
                    misses += 1
            self._torch_state = torch.get_rng_state()
        self.model.load_state_dict(best_state)
        return best

    def _train_passes(self, x: torch.Tensor, y: torch.Tensor, passes: int) -> None:
        self.model.train()
        bs = self.params.batch_size
        for _ in range(passes):
            perm = self.rng.permutation(len(x))
            for start in range(0, len(x), bs):
                idx = torch.from_numpy(perm[start : start + bs]).long()
                loss = F.cross_entropy(self.model(x[idx]), y[idx])
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()

    def _logits_batches(self, x: torch.Tensor):
        # Same batch boundaries as SentEval: results of a matrix product can
        # depend on the number of rows in the last bit.
        self.model.eval()
        bs = self.params.batch_size
        with torch.no_grad():
            for start in range(0, len(x), bs):
                yield start, self.model(x[start : start + bs])

    def _score_tensors(self, x: torch.Tensor, y: torch.Tensor) -> float:
        correct = 0
        for start, logits in self._logits_batches(x):
            correct += logits.max(1)[1].eq(y[start : start + len(logits)]).sum().item()
        return correct / len(x)

    def score(self, X: np.ndarray, y: np.ndarray) -> float:
        """Accuracy (a fraction) on (X, y)."""
        return self._score_tensors(_float_tensor(X), _long_tensor(y))

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Predicted class per row."""
        return np.concatenate([logits.max(1)[1].numpy() for _, logits in self._logits_batches(_float_tensor(X))])


def _reg_grid(params: ClassifierParams, sklearn_grid: Sequence[float] = SKLEARN_REGS) -> tuple[float, ...]:
    return TORCH_REGS if params.usepytorch else tuple(sklearn_grid)


def _fit(
    params: ClassifierParams,
    reg: float,
    seed: int,
    n_classes: int,
    X: np.ndarray,
    y: np.ndarray,
    validation_data: tuple[np.ndarray, np.ndarray] | None = None,
    bar: Progress | None = None,
) -> tuple[TorchClassifier | LogisticRegression, float | None]:
    """A classifier fit with penalty ``reg``, and its validation accuracy when ``validation_data`` is given.

    Without validation data the PyTorch classifier early-stops on a random
    5 % of X (SentEval's refit); scikit-learn needs no validation data.
    ``bar`` counts the fit (one unit) and hears the PyTorch fit's epochs.
    """
    if bar is not None:
        bar.set_postfix(reg=reg)
    if params.usepytorch:
        clf = TorchClassifier(params, X.shape[1], n_classes, reg, seed)
        heartbeat = bar.beat if bar is not None else None
        if validation_data is not None:
            # The best validation accuracy is exactly what SentEval's rescoring of
            # the restored best model on the same data returns.
            fitted: tuple = (clf, clf.fit(X, y, validation_data=validation_data, heartbeat=heartbeat))
        else:
            clf.fit(X, y, validation_split=VALIDATION_SPLIT, heartbeat=heartbeat)
            fitted = (clf, None)
    else:
        clf = LogisticRegression(C=reg, random_state=seed)
        clf.fit(X, y)
        fitted = (clf, clf.score(*validation_data) if validation_data is not None else None)
    if bar is not None:
        bar.update(1)
    return fitted


def classifier_fits(kind: str, params: ClassifierParams | Mapping[str, Any]) -> int:
    """How many classifiers a protocol fits (the unit of its progress line).

    ``kind``: "inner_kfold" (MR, CR, SUBJ, MPQA), "kfold" (TREC, MRPC) or "split" (SST2, NLI probe).
    """
    params = _as_params(params)
    if kind == "inner_kfold":
        return params.kfold * (len(_reg_grid(params)) * params.kfold + 1)
    if kind == "kfold":
        return len(_reg_grid(params, SKLEARN_KFOLD_REGS)) * params.kfold + 1
    if kind == "split":
        return 1 if params.noreg else len(_reg_grid(params))
    raise ValueError(f"unknown classifier protocol {kind!r}; valid: inner_kfold, kfold, split")


def inner_kfold_classifier(
    X: np.ndarray,
    y: np.ndarray,
    n_classes: int,
    params: ClassifierParams | Mapping[str, Any],
    seed: int = 1111,
    bar: Progress | None = None,
) -> dict[str, float]:
    """SentEval's InnerKFoldClassifier: nested stratified k-fold, returns ``devacc`` and ``acc`` (x100).

    ``bar``: progress, one unit per classifier fit (:func:`classifier_fits` "inner_kfold").
    """
    params = _as_params(params)
    regs = _reg_grid(params)
    outer = StratifiedKFold(n_splits=params.kfold, shuffle=True, random_state=INNER_KFOLD_SHUFFLE_SEED)
    inner = StratifiedKFold(n_splits=params.kfold, shuffle=True, random_state=INNER_KFOLD_SHUFFLE_SEED)
    dev_results, test_results = [], []
    for train_idx, test_idx in outer.split(X, y):
        x_train, y_train = X[train_idx], y[train_idx]
        inner_folds = list(inner.split(x_train, y_train))
        scores = []
        for reg in regs:
            fold_scores = [
                _fit(params, reg, seed, n_classes, x_train[a], y_train[a], (x_train[b], y_train[b]), bar)[1]
                for a, b in inner_folds
            ]
            scores.append(round(100 * np.mean(fold_scores), 2))
        best = int(np.argmax(scores))
        dev_results.append(np.max(scores))
        clf, _ = _fit(params, regs[best], seed, n_classes, x_train, y_train, bar=bar)
        test_results.append(round(100 * clf.score(X[test_idx], y[test_idx]), 2))
    return {"devacc": float(round(np.mean(dev_results), 2)), "acc": float(round(np.mean(test_results), 2))}


def kfold_classifier(
    X_train: np.ndarray,
    y_train: np.ndarray,
    X_test: np.ndarray,
    y_test: np.ndarray,
    n_classes: int,
    params: ClassifierParams | Mapping[str, Any],
    seed: int = 1111,
    bar: Progress | None = None,
) -> dict[str, Any]:
    """SentEval's KFoldClassifier: penalty by stratified k-fold on train, refit, score on test.

    Returns ``devacc`` (best cross-validation accuracy), ``acc`` (test, x100),
    ``reg`` (chosen penalty) and ``yhat`` (test predictions). ``bar``: progress, one
    unit per classifier fit (:func:`classifier_fits` "kfold").
    """
    params = _as_params(params)
    regs = _reg_grid(params, SKLEARN_KFOLD_REGS)
    folds = list(StratifiedKFold(n_splits=params.kfold, shuffle=True, random_state=seed).split(X_train, y_train))
    scores = []
    for reg in regs:
        fold_scores = [
            _fit(params, reg, seed, n_classes, X_train[a], y_train[a], (X_train[b], y_train[b]), bar)[1] for a, b in folds
        ]
        scores.append(round(100 * np.mean(fold_scores), 2))
    best = int(np.argmax(scores))
    clf, _ = _fit(params, regs[best], seed, n_classes, X_train, y_train, bar=bar)
    return {
        "devacc": float(np.max(scores)),
        "acc": float(round(100 * clf.score(X_test, y_test), 2)),
        "reg": regs[best],
        "yhat": np.asarray(clf.predict(X_test)),
    }


def fit_split_classifier(
    X_train: np.ndarray,
    y_train: np.ndarray,
    X_dev: np.ndarray,
    y_dev: np.ndarray,
    X_test: np.ndarray,
    y_test: np.ndarray,
    params: ClassifierParams | Mapping[str, Any],
    seed: int = 1111,
    n_classes: int | None = None,
    bar: Progress | None = None,
) -> dict[str, Any]:
    """SentEval's SplitClassifier: penalty chosen on dev, test accuracy of that model.

    For SST2 and for an NLI probe (features of "premise [SEP] hypothesis",
    labels 0..n-1). ``n_classes`` defaults to the largest label + 1. Returns
    ``devacc`` and ``acc`` (x100, rounded as SentEval), the chosen ``reg`` and
    the split sizes.

    SentEval refits the chosen penalty from scratch; with the same seed and data
    on the CPU that refit reproduces the model found during the search bit for
    bit, so that model is kept instead (one fit fewer). ``bar``: progress, one unit
    per classifier fit (:func:`classifier_fits` "split").
    """
    params = _as_params(params)
    y_train, y_dev, y_test = (np.asarray(v) for v in (y_train, y_dev, y_test))
    if n_classes is None:
        n_classes = int(max(y_train.max(), y_dev.max(), y_test.max())) + 1
    if params.noreg:
        regs: tuple[float, ...] = (NOREG_TORCH if params.usepytorch else NOREG_SKLEARN,)
    else:
        regs = _reg_grid(params)
    best_score, best_reg, best_clf = -math.inf, regs[0], None
    for reg in regs:
        clf, dev = _fit(params, reg, seed, n_classes, X_train, y_train, (X_dev, y_dev), bar)
        score = round(100 * dev, 2)
        if score > best_score:  # strict: the first of equal scores wins, like np.argmax
            best_score, best_reg, best_clf = score, reg, clf
    return {
        "devacc": float(best_score),
        "acc": float(round(100 * best_clf.score(X_test, y_test), 2)),
        "reg": best_reg,
        "ndev": len(y_dev),
        "ntest": len(y_test),
    }
