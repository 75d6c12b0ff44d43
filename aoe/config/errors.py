"""The one error of a configuration that the schema accepts but the rest of it contradicts. The checks
(aoe.plan.check), the resolvers that find it only when they resolve (a backbone folder's pooling, a checkpoint
selection) and the figures and cards that read the config raise it with one line naming the key and the fix;
the Snakefile says it as a planning error. A module of its own so that each of them imports it from below.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
]


class ConfigError(ValueError):
    """A config value that is valid for the schema but inconsistent with the rest of the config."""
