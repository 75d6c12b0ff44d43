"""Versions of the pipeline's on-disk formats, import-light so the workflow can key reruns on them.

A rule that writes such a format passes its version as a Snakemake param: bumping it here
reruns exactly those jobs (Snakemake's params trigger), not every job whose code was edited.
"""

# 2: token and text ids stored as int32 (1: int64), half the disk and page cache
# 3: text ids identify token sequences, not strings (the official collators' identity)
TOKEN_CACHE_FORMAT = 3
