# Figures from trained models' embeddings: being written.
FIGURE_RESULTS = []
