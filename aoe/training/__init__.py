"""Training a cell: the trainer (train) and its checkpoints, resume and survival (checkpoints).

May import: ``aoe.util``, ``aoe.data``, ``aoe.config``, ``aoe.losses``, ``aoe.model``, ``aoe.evaluate``.
"""
