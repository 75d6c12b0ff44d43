"""What produced a result: library versions and the code revision."""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["library_versions"]

_LIBRARIES = ("aoe-repro", "torch", "transformers", "tokenizers", "accelerate", "datasets", "numpy", "scipy", "pandas", "snakemake")


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def library_versions() -> dict:
    """Versions of Python, the platform, the libraries that shape the numbers, and the git commit."""
    versions = {"python": sys.version.split()[0], "platform": platform.platform()}
    for lib in _LIBRARIES:
        try:
            versions[lib] = version(lib)
        except PackageNotFoundError:
            versions[lib] = None
    versions["git_commit"] = _git_commit()
    return versions
