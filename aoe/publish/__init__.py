"""What a run hands its reader: REPORT.md beside the papers (report), a model card per trained model
(modelcard), RUNTIMES (runtimes), a trained model as a Hugging Face hub repository (hub).
The top of the package: may import every other part, and none imports it.
"""
