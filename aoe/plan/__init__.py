"""What is checked and explained before Snakemake plans: the config against its schema and every stage's
registry (check, which runs schema_check and the cross-key checks of training_checks, cell_checks, table_checks and
evaluation_checks; key_sources: where a key was set), the recipe ledger of ``snakemake recipe`` (ledger), why a
target cannot be built (targets), which config file a results tree belongs to (trees), an interrupted training said
as one on Snakemake's terminal (interruptions).

May import: ``aoe.util``, ``aoe.data``, ``aoe.config``, ``aoe.losses``, ``aoe.model``, ``aoe.gis``, ``aoe.llm_supervised``, ``aoe.evaluate``, ``aoe.training``, ``aoe.results``.
"""
