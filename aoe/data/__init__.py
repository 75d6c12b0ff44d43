"""Data loading, in layers that import only the ones before them (no module here imports a feature package):

io (DataError, sha256, atomic writes, decoding) -> mirror (the published sha256 table, upstream URLs,
SentEval's folder in a mirror, MANIFEST.tsv checks) -> download -> readers (sts, transfer, nli, glue,
flickr, hub) and generated (names of the tables the workflow generates) -> catalog (SOURCES, dataset
splits, table paths) -> prepare (prepared tables with their manifests), contracts (what each prepared
table holds, checked where it is read, and against its manifest), published (regenerates the sha256 table).

May import: ``aoe.util``.
"""
