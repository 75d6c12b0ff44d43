"""Evaluation protocols: each turns an encoder and prepared test tables into a JSON-able result.

May import: ``aoe.util``, ``aoe.data``, ``aoe.config``, ``aoe.model``.
"""
