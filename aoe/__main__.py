"""The ``aoe`` command (console script, or ``python -m aoe``): ``aoe embed MODEL_DIR --in texts.txt --out emb.npy``."""

from __future__ import annotations

import importlib
import sys

# command -> module with main(argv, prog); imported only when run (torch is slow to import)
COMMANDS = {"embed": ("aoe.embed", "embed texts with a model folder into a .npy file")}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    usage = "usage: aoe COMMAND [ARGS]\n\ncommands:\n" + "".join(
        f"  {name:<8} {help_}\n" for name, (_, help_) in COMMANDS.items()
    )
    if not argv:
        print(usage, end="", file=sys.stderr)
        return 2
    if argv[0] in ("-h", "--help"):
        print(usage, end="")
        return 0
    if argv[0] not in COMMANDS:
        print(f"{usage}\naoe: error: unknown command {argv[0]!r}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[argv[0]][0])
    return module.main(argv[1:], prog=f"aoe {argv[0]}")


if __name__ == "__main__":
    sys.exit(main())
