"""The pooling names, import-light: the workflow plans with them without importing torch.

:data:`aoe.model.pooling.POOLINGS` and :data:`aoe.model.pooling.OFFICIAL_POOLINGS` hold the functions under
these names (a test keeps the two in step).
"""

# masked poolings: what a model trains and is evaluated with
TRAIN_POOLINGS = ("cls", "avg", "max", "last", "cls_avg", "cls_last_avg", "first_last_avg")
# the official angle-emb arithmetic over padded batches (0.1.1 Pooler, 0.4.x get_pooling): evaluation only
OFFICIAL_POOLING_NAMES = ("cls_avg_padded", "avg_padded", "max_padded", "last_position",
                          "cls_avg_batchsum", "avg_batchsum", "max_zeroed", "cls_max_zeroed")
EVAL_POOLING_NAMES = TRAIN_POOLINGS + OFFICIAL_POOLING_NAMES
