"""Training a cell: the trainer (train) and its checkpoints, resume and survival (checkpoints), a stop by a signal
told from a failure (interruption).

May import: ``aoe.util``, ``aoe.data``, ``aoe.config``, ``aoe.losses``, ``aoe.model``, ``aoe.evaluate``.
"""
