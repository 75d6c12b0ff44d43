"""The configuration's model, torch-free, so the workflow plans with it: the objectives' recipes
(recipes), one cell's hyperparameters and where each comes from (hparams), cells, result paths and
resources (workflow), table kinds (table_kinds), the GPU memory a job needs (memory).

May import: ``aoe.util``, ``aoe.data``.
"""
