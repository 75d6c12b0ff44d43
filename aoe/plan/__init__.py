"""What is checked and explained before Snakemake plans: the config against its schema and every stage's
registry (check), the recipe ledger of ``snakemake recipe`` (ledger), why a target cannot be built (targets), which
config file a results tree belongs to (trees), an interrupted training said as one on Snakemake's terminal (interruptions).

May import: ``aoe.util``, ``aoe.data``, ``aoe.config``, ``aoe.losses``, ``aoe.model``, ``aoe.gis``, ``aoe.llm_supervised``, ``aoe.evaluate``, ``aoe.training``, ``aoe.results``.
"""
