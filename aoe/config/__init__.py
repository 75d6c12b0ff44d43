"""The configuration's model, torch-free, so the workflow plans with it: the objectives' recipes
(recipes), one cell's hyperparameters and where each comes from (hparams), cells and their result paths
(cells), a model scored as downloaded (pretrained), what a cell's jobs read of its settings (cell_settings),
checkpoint selection (checkpoint_selection), a table's rows (rows) and its captions (captions), what the
workflow builds and reads (workflow), the config error (errors), table kinds (table_kinds), what a row is
measured under (measures), the GPU memory a job needs (memory).

May import: ``aoe.util``, ``aoe.data``.
"""
