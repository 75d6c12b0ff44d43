"""The pooling names, import-light: the workflow plans with them without importing torch.

:data:`aoe.model.pooling.POOLINGS` and :data:`aoe.model.pooling.OFFICIAL_POOLINGS` hold the functions under
these names (a test keeps the two in step).
"""

# masked poolings: one embedding per text whatever it is batched with
TRAIN_POOLINGS = ("cls", "avg", "max", "last", "cls_avg", "cls_last_avg", "first_last_avg", "cls_mlp")
# poolings that read the backbone's own pooler (BERT's dense + tanh over [CLS]): a backbone without one
# (the decoders) cannot train or embed with them (aoe.plan.cell_checks.check_pooler_poolings)
POOLER_POOLINGS = ("cls_mlp",)
# the official angle-emb arithmetic over padded batches (0.1.1 Pooler, 0.4.x get_pooling): evaluation
# variants of any model, and the training pooling of the pooling-ablation cells whose papers' numbers it
# produced (AnglE Table 3, AoE Table 4), trained one padded pass per micro-batch (length_buckets 1)
OFFICIAL_POOLING_NAMES = ("cls_avg_padded", "avg_padded", "max_padded", "last_position",
                          "cls_avg_batchsum", "avg_batchsum", "max_zeroed", "cls_max_zeroed")
EVAL_POOLING_NAMES = TRAIN_POOLINGS + OFFICIAL_POOLING_NAMES
# what a cell may train with (objectives.<name>.pooling, backbones.<name>.pooling)
TRAINABLE_POOLINGS = EVAL_POOLING_NAMES

# An evaluation-only variant row may score an official arithmetic in SentEval batches of another size than the
# one its release's script used in --mode test (aoe.evaluate.senteval_batches.OFFICIAL_MODE_BATCH_SIZES):
# "<pooling>-bs<N>", e.g. cls_avg_padded-bs32. Which evaluation made the released AnglE-BERT's 82.37 and ACL's 82.43
# is not settled (issue 69 §4; config.yaml tables.released): its variant rows score the candidates.
SENTEVAL_BATCH_SEP = "-bs"
# the wildcard pattern of such a name (rules/common.smk), and the schema's (schemas/config.schema.yaml)
BATCHED_EVAL_POOLING_RE = "(?:" + "|".join(OFFICIAL_POOLING_NAMES) + ")" + SENTEVAL_BATCH_SEP + "[1-9][0-9]*"


def split_senteval_batch(name: str) -> tuple[str, int | None]:
    """(pooling, SentEval batch size) of an evaluation pooling name: ``cls_avg_padded-bs32`` -> (cls_avg_padded, 32);
    a name without the suffix -> (name, None), its release's script's batch size. ValueError for a suffix on a
    pooling that does not depend on the batch (a masked one embeds each text alone: the batch changes nothing)."""
    base, sep, size = name.rpartition(SENTEVAL_BATCH_SEP)
    if not sep or not size.isdigit():
        return name, None
    if base not in OFFICIAL_POOLING_NAMES or int(size) < 1:
        raise ValueError(f"eval_pooling {name!r}: a SentEval batch size ({SENTEVAL_BATCH_SEP}<N>, N >= 1) is given only to an "
                         f"official arithmetic that depends on the batch ({', '.join(OFFICIAL_POOLING_NAMES)})")
    return base, int(size)
