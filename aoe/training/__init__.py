"""Training a cell: the story of a run (train) and what it calls, each in a file of its own: what trains (finetuning),
what the processes share (gathers), the best checkpoint's choice (selection), the curves (curves), a stop by a signal
told from a failure (interruption), checkpoints, resume and survival (checkpoints), the code's fingerprint (fingerprint).

May import: ``aoe.util``, ``aoe.data``, ``aoe.config``, ``aoe.losses``, ``aoe.model``, ``aoe.evaluate``.
"""
