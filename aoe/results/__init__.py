"""The papers' tables and figures from result files, never training or embedding: how a table is built
(tables), what a built table is (table_model), the papers' numbers set beside ours (paper_numbers), the
t-tests between a table's rows (ttests), a table's verdict on a study or an objective comparison (verdicts),
loading result files (load), rendering LaTeX, Markdown and HTML (render), the statistics behind every flag
and p-value (stats), the judging of a paper's claim about its own study (studies), the one gate of every
comparison of two numbers (likeness), the figures (figures/).

May import: ``aoe.util``, ``aoe.data``, ``aoe.config``, ``aoe.losses``, ``aoe.model``, ``aoe.evaluate``.
"""
