"""The papers' tables and figures from result files, never training or embedding: the table model and
its build (tables), loading result files (load), rendering LaTeX, Markdown and HTML (render), the
statistics behind every flag and p-value (stats), the verdict on a paper's claim about its own study
(studies), the figures (figures/).

May import: ``aoe.util``, ``aoe.data``, ``aoe.config``, ``aoe.losses``, ``aoe.model``, ``aoe.evaluate``.
"""
