"""An old bench/ path, from before issue 72 grouped the scripts by the question each answers: one line naming where
the script is now, and exit 2. Each ``bench/<name>.py`` the docs once named links here (tests/test_bench_layout.py)."""

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent  # the link's target's folder: bench/
name = Path(sys.argv[0]).name
new = sorted(str(p.relative_to(BENCH.parent)) for p in BENCH.glob(f"*/{name}"))
print(f"bench/{name} moved to {new[0]} (bench/ is grouped by question: bench/README.md); run that" if new
      else f"bench/{name}: no such script (bench/README.md lists them)", file=sys.stderr)
sys.exit(2)
