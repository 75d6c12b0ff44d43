"""What is checked and explained before Snakemake plans: the config against its schema and every stage's
registry (check), the recipe ledger of ``snakemake recipe`` (ledger), why a target cannot be built (targets).
May import every stage below it; only ``aoe.publish`` imports it.
"""
