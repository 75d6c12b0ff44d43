"""The loss math against hand-computed 3-pair examples."""

import math

import pytest
import torch

from aoe.config.hparams import YAML_LOADER
from aoe.losses import (
    OBJECTIVES,
    angle_loss,
    angle_scores,
    contrastive_loss,
    contrastive_targets,
    cosent_ranking_loss,
    filter_duplicates,
    get_objective,
    objective_formats,
    resolve_format,
)
from aoe.losses.baselines import SoftmaxHead, cosine_mse_loss, sbert_softmax_loss, simcse_loss

# d = 1: each embedding is one complex number (real, imaginary).
U = torch.tensor([[3.0, 4.0], [1.0, 0.0], [2.0, 0.0]], dtype=torch.float64)
V = torch.tensor([[3.0, 4.0], [1.0, 1.0], [1.0, -1.0]], dtype=torch.float64)
Y = torch.tensor([1.0, 0.2, 0.6], dtype=torch.float64)


def test_angle_scores_by_hand():
    # pair 0: re = 9 + 16, im = 12 - 12, norms 5 * 5        -> 1
    # pair 1: re = 1, im = 0*1 - 1*1, norms 1 * sqrt(2)       -> 0
    # pair 2: re = 2, im = 0*1 - 2*(-1), norms 2 * sqrt(2)    -> sqrt(2)
    expected = torch.tensor([1.0, 0.0, math.sqrt(2)], dtype=torch.float64)
    torch.testing.assert_close(angle_scores(U, V), expected)


def test_angle_scores_equal_vectors_score_one():
    x = torch.randn(4, 8, dtype=torch.float64)
    torch.testing.assert_close(angle_scores(x, x), torch.ones(4, dtype=torch.float64))


@pytest.mark.parametrize("tau", [1.0, 20.0])
def test_angle_loss_by_hand(tau):
    s = [1.0, 0.0, math.sqrt(2)]
    # ordered pairs with y_i > y_j: (0, 1), (0, 2), (2, 1); term exp(tau (s_j - s_i))
    terms = [tau * (s[1] - s[0]), tau * (s[2] - s[0]), tau * (s[1] - s[2])]
    m = max(0.0, *terms)  # stable log(1 + sum exp) for tau = 20
    expected = m + math.log(math.exp(-m) + sum(math.exp(t - m) for t in terms))
    assert angle_loss(U, V, Y, tau=tau).item() == pytest.approx(expected, rel=1e-12)


def test_ranking_loss_zero_when_labels_tie_and_sign_convention():
    scores = torch.tensor([0.9, 0.1])
    assert cosent_ranking_loss(scores, torch.tensor([0.5, 0.5])).item() == 0.0
    # the more similar pair (label 1) scoring higher must cost less than the reverse
    good = cosent_ranking_loss(scores, torch.tensor([1.0, 0.0]))
    bad = cosent_ranking_loss(scores, torch.tensor([0.0, 1.0]))
    assert good < bad


# Six unit texts [u0, u1, u2, v0, v1, v2] at these angles (degrees); v2 repeats u0's text.
ANGLES = [0.0, 90.0, 180.0, 60.0, 120.0, 30.0]
TEXT_IDS = torch.tensor([10, 11, 12, 13, 14, 10])
LABELS = torch.tensor([1.0, 0.0, 0.8], dtype=torch.float64)
POSITIVES_WITH_DETECTION = {0: {3, 5}, 2: {0, 5}, 3: {0, 5}, 5: {0, 2}}
POSITIVES_WITHOUT_DETECTION = {0: {3}, 2: {5}, 3: {0}, 5: {2}}


def _unit_texts():
    rad = [math.radians(a) for a in ANGLES]
    x = torch.tensor([[math.cos(r), math.sin(r)] for r in rad], dtype=torch.float64)
    return x[:3], x[3:]


def _reference_contrastive(positives, tau):
    losses = []
    for r, pos in positives.items():
        logits = {k: tau * math.cos(math.radians(ANGLES[r] - ANGLES[k])) for k in range(6) if k != r}
        log_z = math.log(sum(math.exp(c) for c in logits.values()))
        losses.append(sum(log_z - logits[p] for p in pos) / len(pos))
    return sum(losses) / len(losses)


def _positives(target):
    return {r: set(torch.nonzero(target[r]).flatten().tolist()) for r in range(target.shape[0]) if target[r].any()}


def test_contrastive_targets_by_hand():
    target = contrastive_targets(LABELS, TEXT_IDS, threshold=0.5, identical_texts="detect", graded_labels="score")
    assert _positives(target) == POSITIVES_WITH_DETECTION and set(target.unique().tolist()) == {0.0, 1.0}
    assert not target.diagonal().any()
    target = contrastive_targets(LABELS, TEXT_IDS, threshold=0.5, identical_texts="ignore", graded_labels="score")
    assert _positives(target) == POSITIVES_WITHOUT_DETECTION


def test_official_targets_binary_labels_and_similar_matrix():
    # int labels 1, 0, 1 (LABELS truncated): the partners of pairs 0 and 2; "positive" adds the
    # identical texts u0 = v2 (rows 0 and 5) whatever their labels, on top of the partner target
    y = torch.tensor([1.0, 0.0, 1.0])
    plain = contrastive_targets(y, TEXT_IDS, identical_texts="ignore", graded_labels="int")
    assert _positives(plain) == {0: {3}, 2: {5}, 3: {0}, 5: {2}}
    extra = contrastive_targets(y, TEXT_IDS, identical_texts="positive", graded_labels="int")
    assert _positives(extra) == {0: {3, 5}, 2: {5}, 3: {0}, 5: {0, 2}}
    assert extra[0, 5] == 1.0 and extra.sum() == plain.sum() + 2


def test_official_targets_graded_labels_index_collisions():
    # Official zigzag numbering: pair p's texts are 2p and 2p + 1, labels 1, 3, 0, 1. Column k's key
    # is k * y_k (-2 when y_k = 0): 0, 1, 6, 9, -2, -2, 6, 7. Row i's key is (i ^ 1) * y_i (-1 when
    # y_i = 0): 1, 0, 9, 6, -1, -1, 7, 6. Equal keys are targets: besides each partner, text 3 also
    # targets text 6 and text 7 also targets text 2 (2 * 3 == 6 * 1), an index collision.
    y = torch.tensor([1.0, 3.0, 0.0, 1.0])
    target = contrastive_targets(y, None, identical_texts="ignore", graded_labels="int")
    zig = {0: 0, 1: 2, 2: 4, 3: 6, 4: 1, 5: 3, 6: 5, 7: 7}  # our row ([u; v]) -> official index
    got = {zig[r]: {zig[k] for k in ks} for r, ks in _positives(target).items()}
    assert got == {0: {1}, 1: {0}, 2: {3}, 3: {2, 6}, 6: {7}, 7: {2, 6}}


def test_filter_duplicates_follows_the_official_collator():
    # example 0 keeps; 1 repeats text 5 in its second text: dropped, but its first text 7 is now
    # seen, so example 2 (7, 8) is dropped; 3 repeats its own text (9, 9): dropped; 4 repeats a
    # first text (5): dropped before reading 10, so example 5 (10, 11) keeps
    ids = torch.tensor([[4, 5], [7, 5], [7, 8], [9, 9], [5, 10], [10, 11]])
    assert filter_duplicates(ids).tolist() == [True, False, False, False, False, True]


def test_filter_drops_examples_from_every_component():
    torch.manual_seed(0)
    u, v = torch.randn(4, 6, dtype=torch.float64), torch.randn(4, 6, dtype=torch.float64)
    ids = torch.tensor([[0, 1], [2, 3], [0, 4], [5, 6]])  # example 2 repeats text 0
    y = torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=torch.float64)
    obj = get_objective("angle_arxiv", {"identical_texts": "filter"})
    _, parts = obj((u, v), y, ids)
    keep = torch.tensor([0, 1, 3])
    _, kept = get_objective("angle_arxiv", {"identical_texts": "ignore"})((u[keep], v[keep]), y[keep], ids[keep])
    for name in ("cosine", "contrastive", "angle"):
        torch.testing.assert_close(parts[name], kept[name])
    with pytest.raises(ValueError, match="needs the texts' ids"):
        obj((u, v), y)


@pytest.mark.parametrize("detect", [True, False])
@pytest.mark.parametrize("tau", [1.0, 20.0])
def test_contrastive_loss_anchored_by_hand(detect, tau):
    u, v = _unit_texts()
    expected = _reference_contrastive(POSITIVES_WITH_DETECTION if detect else POSITIVES_WITHOUT_DETECTION, tau)
    got = contrastive_loss(u, v, LABELS, tau=tau, text_ids=TEXT_IDS, threshold=0.5,
                           identical_texts="detect" if detect else "ignore", graded_labels="score", reduction="anchored")
    assert got.item() == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("tau", [1.0, 20.0])
def test_contrastive_loss_all_rows_by_hand(tau):
    # the official mean: the 4 anchored rows' cross-entropies (summed over their targets) over all 6 texts
    u, v = _unit_texts()
    per_row = []
    for r, pos in POSITIVES_WITH_DETECTION.items():
        logits = {k: tau * math.cos(math.radians(ANGLES[r] - ANGLES[k])) for k in range(6) if k != r}
        log_z = math.log(sum(math.exp(c) for c in logits.values()))
        per_row.append(sum(log_z - logits[p] for p in pos))
    got = contrastive_loss(u, v, LABELS, tau=tau, text_ids=TEXT_IDS, threshold=0.5, identical_texts="detect",
                           graded_labels="score", reduction="all_rows")
    assert got.item() == pytest.approx(sum(per_row) / 6, rel=1e-12)


def test_all_rows_is_anchored_times_share_of_anchored_texts():
    # one target per anchored text (distinct texts, binary labels): official = ours x anchored / 2B,
    # the 9-of-16 batch of the issue gives the ratio 16 / 9
    torch.manual_seed(0)
    u, v = torch.randn(16, 8, dtype=torch.float64), torch.randn(16, 8, dtype=torch.float64)
    y = torch.tensor([1.0] * 9 + [0.0] * 7, dtype=torch.float64)
    ids = torch.arange(32)
    kw = dict(tau=20.0, text_ids=ids, identical_texts="ignore", graded_labels="int")
    official = contrastive_loss(u, v, y, reduction="all_rows", **kw)
    anchored = contrastive_loss(u, v, y, reduction="anchored", **kw)
    assert (anchored / official).item() == pytest.approx(16 / 9, rel=1e-12)


def test_contrastive_loss_no_positive_rows_is_zero_with_gradient():
    for reduction in ("all_rows", "anchored"):
        u = torch.randn(3, 4, requires_grad=True)
        v = torch.randn(3, 4, requires_grad=True)
        loss = contrastive_loss(u, v, torch.zeros(3), text_ids=torch.arange(6), threshold=0.5, reduction=reduction)
        loss.backward()
        assert loss.item() == 0.0 and u.grad is not None


def test_contrastive_settings_are_checked():
    with pytest.raises(ValueError, match="text_ids"):
        contrastive_loss(torch.randn(2, 4), torch.randn(2, 4), torch.ones(2), identical_texts="positive")
    with pytest.raises(ValueError, match="identical_texts must be one of"):
        get_objective("aoe", {"identical_texts": "dedupe"})
    with pytest.raises(ValueError, match="graded_labels must be one of"):
        get_objective("aoe", {"graded_labels": "float"})
    with pytest.raises(ValueError, match="contrastive_reduction must be one of"):
        get_objective("aoe", {"contrastive_reduction": "sum"})


def test_train_labels():
    raw = torch.tensor([0.0, 0.99, 1.0, 3.8, 5.0])
    assert get_objective("angle_arxiv").train_labels(raw, (0.0, 5.0)).tolist() == [0.0, 0.0, 1.0, 3.0, 5.0]
    torch.testing.assert_close(get_objective("cosent").train_labels(raw, (0.0, 5.0)), raw / 5)


def test_recipes_follow_the_official_version_of_their_paper():
    # ACL-era code (0.4.6) for AoE, paper-era (0.1.1) for AnglE (arXiv), the baselines their own
    for name in ("aoe", "only_angle", "only_contrastive"):
        o = get_objective(name)
        assert (o.graded_labels, o.identical_texts, o.contrastive_reduction) == ("int", "filter", "all_rows")
    for name in ("angle_arxiv", "angle_only_angle", "only_cosine", "only_ibn", "wo_ibn", "wo_angle"):
        o = get_objective(name)
        assert (o.graded_labels, o.identical_texts, o.contrastive_reduction) == ("int", "positive", "all_rows")
    assert get_objective("ibn_without_isp").identical_texts == "ignore"
    for name in ("cosent", "sbert", "simcse_sup"):
        o = get_objective(name, format="pairs")
        assert (o.graded_labels, o.identical_texts) == ("score", "ignore")


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_objectives_have_finite_gradients_on_each_format(name):
    for fmt in objective_formats(name):
        torch.manual_seed(0)
        obj = get_objective(name, format=fmt)
        embs = [torch.randn(8, 16, requires_grad=True) for _ in range(obj.n_texts)]
        # raw 0-5 scores as a graded train set gives them (simcse_sup on pairs needs anchors: score >= 3)
        raw = (5 * torch.rand(8)).clamp(min=3.0 if name == "simcse_sup" else 0.0)
        labels = torch.randint(0, 3, (8,)) if fmt == "nli3" else obj.train_labels(raw, (0.0, 5.0))
        head = obj.make_head(16)
        total, parts = obj(tuple(embs), labels, torch.arange(8 * obj.n_texts).reshape(8, -1), head)
        total.backward()
        assert torch.isfinite(total) and parts, (name, fmt)
        assert all(torch.isfinite(e.grad).all() for e in embs) and embs[0].grad.abs().sum() > 0, (name, fmt)


def test_aoe_is_weighted_sum_of_components():
    u, v = _unit_texts()
    obj = get_objective("aoe", {"weights": {"angle": 2.0, "contrastive": 30.0}, "identical_texts": "detect"})
    total, parts = obj((u, v), LABELS, TEXT_IDS.reshape(2, 3).T)  # (B, 2): column 0 the u texts
    expected = 2.0 * angle_loss(u, v, LABELS) + 30.0 * contrastive_loss(u, v, LABELS, text_ids=TEXT_IDS, graded_labels="int")
    torch.testing.assert_close(total, expected)
    assert set(parts) == {"angle", "contrastive"}


def test_unknown_objective_and_component_rejected():
    with pytest.raises(ValueError, match="unknown objective 'nope'"):
        get_objective("nope")
    with pytest.raises(ValueError, match="unknown loss component"):
        get_objective("custom", {"weights": {"angel": 1.0}})


def test_format_resolution():
    assert resolve_format("aoe", ["pairs", "triplets"]) == "pairs"
    assert resolve_format("simcse_sup", ["pairs", "triplets"]) == "triplets"
    assert resolve_format("simcse_sup", ["pairs"]) == "pairs"
    assert resolve_format("sbert", ["pairs", "nli3"]) == "nli3"
    assert resolve_format("sbert", ["pairs"]) == "pairs"
    with pytest.raises(ValueError, match="objective 'aoe' trains on \\['pairs'\\], the train set provides \\['triplets'\\]"):
        resolve_format("aoe", ["triplets"])
    assert get_objective("sbert", format="pairs").weights == {"cosine_mse": 1.0}
    assert get_objective("sbert", format="nli3").weights == {"softmax": 1.0}
    with pytest.raises(ValueError, match="cannot train on 'triplets'"):
        get_objective("aoe", format="triplets")


def test_cosine_mse_by_hand():
    u = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    v = torch.tensor([[1.0, 0.0], [0.0, 1.0]])  # cos 1 and 0
    labels = torch.tensor([0.5, 0.25])
    assert cosine_mse_loss(u, v, labels).item() == pytest.approx(((1 - 0.5) ** 2 + (0 - 0.25) ** 2) / 2)


def test_sbert_softmax_by_hand():
    head = SoftmaxHead(1, num_labels=3)
    with torch.no_grad():
        head.linear.weight.copy_(torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
        head.linear.bias.zero_()
    u, v = torch.tensor([[2.0]]), torch.tensor([[-1.0]])  # features [u; v; |u - v|] = [2, -1, 3]
    logits = [2.0, -1.0, 3.0]
    log_z = math.log(sum(math.exp(x) for x in logits))
    assert sbert_softmax_loss(u, v, torch.tensor([0]), head).item() == pytest.approx(log_z - 2.0)


def test_simcse_by_hand():
    # unit vectors at angles (degrees); two anchors, their positives, two hard negatives
    def unit(deg):
        return [math.cos(math.radians(deg)), math.sin(math.radians(deg))]

    a = torch.tensor([unit(0), unit(90)], dtype=torch.float64)
    p = torch.tensor([unit(10), unit(80)], dtype=torch.float64)
    n = torch.tensor([unit(45), unit(180)], dtype=torch.float64)
    tau = 20.0

    def row(anchor_deg, cands_deg, target):
        logits = [tau * math.cos(math.radians(anchor_deg - c)) for c in cands_deg]
        return math.log(sum(math.exp(x - max(logits)) for x in logits)) + max(logits) - logits[target]

    with_neg = (row(0, [10, 80, 45, 180], 0) + row(90, [10, 80, 45, 180], 1)) / 2
    assert simcse_loss(a, p, n, tau=tau).item() == pytest.approx(with_neg, rel=1e-12)
    pairs_only = (row(0, [10, 80], 0) + row(90, [10, 80], 1)) / 2
    assert simcse_loss(a, p, None, tau=tau).item() == pytest.approx(pairs_only, rel=1e-12)
    only_first = row(0, [10, 80], 0)
    assert simcse_loss(a, p, None, tau=tau, anchor_mask=torch.tensor([True, False])).item() == pytest.approx(only_first, rel=1e-12)


def test_every_loss_component_is_wired_in_each_place():
    """docs/objective.md "Adding an objective": a component of aoe/config/recipes.py COMPONENTS has its weight in the
    schema and its branch in Objective.components (aoe/losses/objectives.py), which computes it on every format it names."""
    import yaml

    from aoe.config.recipes import COMPONENTS, N_TEXTS
    from aoe.losses.objectives import Objective
    from tests.workflow_utils import REPO

    schema = yaml.load((REPO / "schemas" / "config.schema.yaml").read_text(), Loader=YAML_LOADER)
    weights = schema["properties"]["objectives"]["additionalProperties"]["properties"]["weights"]["properties"]
    assert set(weights) == set(COMPONENTS), "schemas/config.schema.yaml objectives.*.weights and aoe/config/recipes.py COMPONENTS differ"
    torch.manual_seed(0)
    for name, (formats, _) in COMPONENTS.items():
        for fmt in formats:
            objective = Objective(name="t", format=fmt, weights={name: 1.0})
            embs = tuple(torch.randn(4, 8) for _ in range(N_TEXTS[fmt]))
            labels = torch.tensor([0.0, 1.0, 2.0, 1.0]) if fmt == "nli3" else torch.tensor([1.0, 0.0, 1.0, 0.0])
            parts = objective.components(embs, labels, torch.arange(4 * N_TEXTS[fmt]).view(4, -1), objective.make_head(8))
            assert set(parts) == {name} and torch.isfinite(parts[name]), (name, fmt)
    # a component named in COMPONENTS but given no branch fails, instead of computing another loss under its name
    unwired = Objective(name="t", weights={"angle": 1.0})
    object.__setattr__(unwired, "weights", {"angle": 1.0, "new_term": 1.0})
    with pytest.raises(ValueError, match="'new_term' has no branch in Objective.components"):
        unwired.components((torch.randn(4, 8), torch.randn(4, 8)), torch.tensor([1.0, 0.0, 1.0, 0.0]), torch.arange(8).view(4, 2))
