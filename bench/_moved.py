"""An old bench/ path, from before issue 72 grouped the scripts by the question each answers: one line naming where
the script is now, and exit 2. Each ``bench/<name>.py`` the docs once named links here (tests/test_bench_layout.py).

Imported rather than run, it refuses with the same line: an importer that puts ``bench/`` before the script's group
folder on ``sys.path`` would otherwise get this notice in the script's place (the group folder goes first; ``bench/``
is on the path for ``_common`` only)."""

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent  # the link's target's folder: bench/
name = Path(__file__ if __name__ != "__main__" else sys.argv[0]).name
new = sorted(str(p.relative_to(BENCH.parent)) for p in BENCH.glob(f"*/{name}"))
line = (f"bench/{name} moved to {new[0]} (bench/ is grouped by question: bench/README.md)" if new
        else f"bench/{name}: no such script (bench/README.md lists them)")
if __name__ != "__main__":
    raise ImportError(f"{line}; this import found the old path's notice: put bench/{Path(new[0]).parent.name if new else '<group>'}/ "
                      "before bench/ on sys.path")
print(f"{line}; run that", file=sys.stderr)
sys.exit(2)
