"""LLM-supervised training data (AnglE arXiv 2309.12871, §4.5, Figure 5, Table 4).

The paper takes the "sentence1" texts of STS-B train, has an LLM write a
same-meaning and an opposite-meaning sentence for each (Figure 5's prompt), and
trains AnglE on the resulting pairs: (text, similar) labelled 1 and (text,
dissimilar) labelled 0. Its Table 4 compares that model with unsupervised
contrastive models on STS-B test.

The chain (rules/llm_supervised.smk):

1. :func:`aoe.llm_supervised.pairs.sample_texts`: the unique texts of a source
   table column (a seeded sample when ``llm_supervised.n_texts`` is set);
2. :func:`aoe.llm_supervised.generate.generate_all`: batched, seeded generation
   with a local causal LM, cached per text, so a rerun generates nothing;
3. :func:`aoe.llm_supervised.pairs.build_llm_pairs`: parse the outputs, count and
   drop malformed ones by reason, write the labelled pair table ``stsb_llm``;
   :func:`aoe.llm_supervised.pairs.build_self_pairs`: each text paired with
   itself (``stsb_self``), the unsupervised SimCSE-style baseline on the same texts.

Both tables are prepared tables like the others (``results/data/<name>/train.parquet``
with a manifest), so ``trainsets`` entries train on them through the usual rules.

Several generators can label the same texts (``llm_supervised.generators``: AnglE Table 4's
LLaMA and ChatGLM), each into its own table: ``stsb_llm`` and ``stsb_llm_<name>``.

The tables' names and :func:`generated_splits` live in :mod:`aoe.data.generated` (the data
catalog lists these tables, and no data module imports a feature package); this package
re-exports them. It stays import-light (no torch, no pandas): the workflow reads them when
it checks the config.

May import: ``aoe.util``, ``aoe.data``.
"""

from __future__ import annotations

from aoe.data.generated import (
    GENERATED_SPLITS,
    LLM_DATASET,
    LLM_DATASET_PATTERN,
    SELF_DATASET,
    SPLIT,
    generated_splits,
    generators,
)

__all__ = ["GENERATED_SPLITS", "LLM_DATASET", "LLM_DATASET_PATTERN", "SELF_DATASET", "SPLIT", "KINDS", "generated_splits", "generators"]

# what each prompt asks for, and the label its pairs get (AnglE Figure 5: positive / negative pairs)
KINDS: dict[str, float] = {"similar": 1.0, "dissimilar": 0.0}
