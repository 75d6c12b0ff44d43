# MTEB evaluation (rule evaluate_mteb): being written.
