"""What produced a result: library versions and the code revision."""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["library_versions", "git_commit"]

_LIBRARIES = ("aoe-repro", "torch", "transformers", "tokenizers", "accelerate", "datasets", "numpy", "scipy", "pandas", "snakemake")
_PACKAGE_REPO = Path(__file__).resolve().parents[2]


def git_commit(repo: str | Path = _PACKAGE_REPO) -> str | None:
    """The HEAD commit of ``repo`` (default: this package's checkout), with '+dirty' when a tracked file differs
    from it; None outside a git checkout. The one reading of the commit: a model's versions.json, each result's
    ``versions`` and REPORT.md say the same (issue 70: versions.json had the commit without '+dirty')."""
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=20, check=False)
        if head.returncode or not head.stdout.strip():
            return None
        # untracked files are left out: results/ and a venv sit in the checkout without being code
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")


def library_versions() -> dict:
    """Versions of Python, the platform, the libraries that shape the numbers, and the git commit (:func:`git_commit`)."""
    versions = {"python": sys.version.split()[0], "platform": platform.platform()}
    for lib in _LIBRARIES:
        try:
            versions[lib] = version(lib)
        except PackageNotFoundError:
            versions[lib] = None
    versions["git_commit"] = git_commit()
    return versions
