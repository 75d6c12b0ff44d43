"""What a run hands its reader: REPORT.md beside the papers (report), a model card per trained model
(modelcard), RUNTIMES (runtimes), a trained model as a Hugging Face hub repository (hub).

May import: ``aoe.util``, ``aoe.data``, ``aoe.config``, ``aoe.losses``, ``aoe.model``, ``aoe.gis``, ``aoe.llm_supervised``, ``aoe.evaluate``, ``aoe.training``, ``aoe.results``, ``aoe.plan``: the top, which no other part imports.
"""
