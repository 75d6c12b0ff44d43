"""Data loading: STS evaluation/training sets, mirror resolution and upstream downloads."""
