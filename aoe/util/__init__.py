"""Foundations every stage imports, importing nothing else of ``aoe``: folders and files that appear
complete or not at all (fsutil), JSON results (jsonio), what produced a result (provenance), the on-disk
formats' versions (formats), progress lines in a rule's log (progress).

May import: no other part of ``aoe``.
"""
