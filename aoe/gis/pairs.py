"""GIS: pairs and issue-disjoint splits from the harvested repositories.

Rules in :mod:`aoe.gis.collect`'s docstring ("Pairs", "Splits, issue-disjoint", "Negatives").
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aoe.gis.harvest import RepoHarvest

__all__ = ["PAPER_SPLIT_SIZES", "SPLITS", "build_pairs"]

SPLITS = ("train", "valid", "test")
# Table 7 of the paper: train / validation / test sizes (positives + negatives).
PAPER_SPLIT_SIZES: Mapping[str, int] = {"train": 18565, "valid": 1547, "test": 1548}


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[Any, Any] = {}

    def find(self, node: Any) -> Any:
        self.parent.setdefault(node, node)
        root = node
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[node] != root:
            self.parent[node], node = root, self.parent[node]
        return root

    def union(self, a: Any, b: Any) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # The smaller node becomes the root, so roots do not depend on union order.
            lo, hi = sorted((ra, rb))
            self.parent[hi] = lo


def _fractions(split_sizes: Mapping[str, float]) -> list[float]:
    if set(split_sizes) != set(SPLITS) or any(v < 0 for v in split_sizes.values()) or sum(split_sizes.values()) <= 0:
        raise ValueError(f"split_sizes needs non-negative weights for exactly {SPLITS}, got {dict(split_sizes)}")
    total = float(sum(split_sizes.values()))
    return [split_sizes[s] / total for s in SPLITS]


def _greedy_assign(items: Sequence[Any], weight: Callable[[Any], int], fractions: Sequence[float]) -> dict[Any, int]:
    """Each item to the split furthest below its share of the weight assigned so far (first split on ties)."""
    assigned = [0.0] * len(fractions)
    total = 0.0
    out: dict[Any, int] = {}
    for item in items:
        w = weight(item)
        total += w
        deficits = [f * total - a for f, a in zip(fractions, assigned)]
        best = max(range(len(fractions)), key=lambda s: (deficits[s], -s))
        assigned[best] += w
        out[item] = best
    return out


def build_pairs(
    harvests: Sequence[RepoHarvest],
    *,
    seed: int = 0,
    split_sizes: Mapping[str, float] = PAPER_SPLIT_SIZES,
    negative_ratio: float = 1.0,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Positive and sampled negative pairs with issue-disjoint splits (rules in :mod:`aoe.gis.collect`'s docstring).

    Returns the rows (``text1, text2, label, repo, issue1, issue2, split``),
    ordered by split, repository (in ``harvests`` order), issue numbers and label,
    and counts describing the construction. Deterministic for a given ``seed``.
    """
    fractions = _fractions(split_sizes)
    if negative_ratio < 0:
        raise ValueError("negative_ratio must be non-negative")
    if len({h.repo for h in harvests}) != len(harvests):
        raise ValueError("each repository may appear only once")
    info: Counter[str] = Counter()
    uf = _UnionFind()
    positives: list[tuple[str, int, int]] = []
    for h in harvests:
        directed = set(h.duplicates)
        for dup, orig in sorted(directed):
            if dup == orig:
                continue
            if (orig, dup) in directed:
                if dup < orig:
                    continue  # marked both ways: keep one pair, the newer issue as the duplicate
                info["mutual_markings_merged"] += 1
            if not h.texts[dup].strip() or not h.texts[orig].strip():
                info["positives_dropped_empty_text"] += 1
                continue
            positives.append((h.repo, dup, orig))
            uf.union((h.repo, dup), (h.repo, orig))
    pools: dict[str, list[int]] = {}
    for h in harvests:
        eligible = sorted(n for n in h.window if n not in h.no_negative and h.texts[n].strip())
        info["issues_with_empty_text"] += sum(1 for n in h.window if not h.texts[n].strip())
        pools[h.repo] = eligible
        for n in eligible:
            uf.find((h.repo, n))
    texts = {h.repo: h.texts for h in harvests}
    # Identical texts must share a split, or the same text would be seen in training and test.
    by_text: dict[str, tuple[str, int]] = {}
    for node in sorted(uf.parent):
        first = by_text.setdefault(texts[node[0]][node[1]], node)
        if first != node:
            uf.union(first, node)
            info["identical_text_links"] += 1
    weight: Counter[Any] = Counter(uf.find((repo, dup)) for repo, dup, _ in positives)
    size: Counter[Any] = Counter(uf.find(node) for node in list(uf.parent))
    rng = random.Random(seed)
    roots = sorted(size)
    tiebreak = {root: rng.random() for root in roots}
    with_pos = sorted((r for r in roots if weight[r] > 0), key=lambda r: (-weight[r], tiebreak[r]))
    split_of_root = _greedy_assign(with_pos, lambda r: weight[r], fractions)
    # Issues without positives only matter as negatives, which follow each repository's
    # positives; spreading them like those positives gives every (repository, split) a pool.
    repo_pos: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(SPLITS))
    for root in with_pos:
        repo_pos[root[0]][split_of_root[root]] += weight[root]
    without: dict[str, list[Any]] = defaultdict(list)
    for root in sorted((r for r in roots if weight[r] == 0), key=lambda r: tiebreak[r]):
        without[root[0]].append(root)
    for repo, items in sorted(without.items()):
        shares = repo_pos[repo] if sum(repo_pos[repo]) > 0 else fractions
        split_of_root.update(_greedy_assign(items, lambda r: size[r], [x / sum(shares) for x in shares]))

    def split_of(repo: str, number: int) -> int:
        return split_of_root[uf.find((repo, number))]

    rows: list[dict[str, Any]] = []
    per_split: dict[str, Counter[str]] = {s: Counter() for s in SPLITS}
    grouped: dict[tuple[int, str], list[tuple[int, int, int]]] = defaultdict(list)
    for repo, dup, orig in positives:
        grouped[(split_of(repo, dup), repo)].append((dup, orig, 1))
    for s_index, split in enumerate(SPLITS):
        for h in harvests:
            n_pos = len(grouped[(s_index, h.repo)])
            need = round(negative_ratio * n_pos)
            pool = [n for n in pools[h.repo] if split_of(h.repo, n) == s_index]
            local = random.Random(f"{seed}/{h.repo}/{split}")
            chosen: dict[tuple[int, int], None] = {}
            attempts, max_attempts = 0, 50 * need + 100
            while len(chosen) < need and len(pool) >= 2 and attempts < max_attempts:
                attempts += 1
                a, b = local.sample(pool, 2)
                if uf.find((h.repo, a)) == uf.find((h.repo, b)):
                    continue
                chosen.setdefault((max(a, b), min(a, b)))
            info["negatives_shortfall"] += need - len(chosen)
            grouped[(s_index, h.repo)].extend((a, b, 0) for a, b in chosen)
            texts_h = h.texts
            for first, second, label in sorted(grouped[(s_index, h.repo)], key=lambda t: (t[0], t[1], -t[2])):
                rows.append(
                    {
                        "text1": texts_h[first],
                        "text2": texts_h[second],
                        "label": label,
                        "repo": h.repo,
                        "issue1": first,
                        "issue2": second,
                        "split": split,
                    }
                )
                per_split[split]["positive" if label else "negative"] += 1
    info["positives"] = len(positives)
    info["components_with_positives"] = len(with_pos)
    info["largest_component_positives"] = max(weight.values(), default=0)
    summary: dict[str, Any] = dict(sorted(info.items()))
    summary["per_split"] = {s: {"positive": c["positive"], "negative": c["negative"]} for s, c in per_split.items()}
    return rows, summary
