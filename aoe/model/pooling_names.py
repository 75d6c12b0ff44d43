"""The pooling names, import-light: the workflow plans with them without importing torch.

:data:`aoe.model.pooling.POOLINGS` and :data:`aoe.model.pooling.OFFICIAL_POOLINGS` hold the functions under
these names (a test keeps the two in step).
"""

# masked poolings: one embedding per text whatever it is batched with
TRAIN_POOLINGS = ("cls", "avg", "max", "last", "cls_avg", "cls_last_avg", "first_last_avg", "cls_mlp")
# poolings that read the backbone's own pooler (BERT's dense + tanh over [CLS]): a backbone without one
# (the decoders) cannot train or embed with them (aoe.plan.check.check_pooler_poolings)
POOLER_POOLINGS = ("cls_mlp",)
# the official angle-emb arithmetic over padded batches (0.1.1 Pooler, 0.4.x get_pooling): evaluation
# variants of any model, and the training pooling of the pooling-ablation cells whose papers' numbers it
# produced (AnglE Table 3, AoE Table 4), trained one padded pass per micro-batch (length_buckets 1)
OFFICIAL_POOLING_NAMES = ("cls_avg_padded", "avg_padded", "max_padded", "last_position",
                          "cls_avg_batchsum", "avg_batchsum", "max_zeroed", "cls_max_zeroed")
EVAL_POOLING_NAMES = TRAIN_POOLINGS + OFFICIAL_POOLING_NAMES
# what a cell may train with (objectives.<name>.pooling, backbones.<name>.pooling)
TRAINABLE_POOLINGS = EVAL_POOLING_NAMES
