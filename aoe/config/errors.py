"""The error of a configuration that the schema accepts but the rest of it contradicts: every check
(aoe.plan.check) and every resolver of aoe.config raises it with one line naming the key, its file and the fix,
and the Snakefile turns it into a planning error.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
]


class ConfigError(ValueError):
    """A config value that is valid for the schema but inconsistent with the rest of the config."""
