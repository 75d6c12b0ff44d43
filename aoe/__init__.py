"""AoE / AnglE reproduction: angle-optimized text embeddings (Li & Li, ACL 2024)."""

__version__ = "0.1.0"
