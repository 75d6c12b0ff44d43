#!/usr/bin/env bash
# An old bench/ path, from before issue 72 grouped the scripts by question (bench/_moved.py says the same for .py)
name=$(basename "$0"); new=$(cd "$(dirname "$(readlink -f "$0")")/.." && ls bench/*/"$name" 2>/dev/null | head -1)
echo "bench/$name moved to ${new:-nowhere} (bench/ is grouped by question: bench/README.md); run that" >&2
exit 2
