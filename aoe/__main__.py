"""The ``aoe`` command (console script, or ``python -m aoe``): ``aoe embed MODEL_DIR --in texts.txt --out emb.npy``."""

from __future__ import annotations

import importlib
import sys

# command -> (module, its function taking (argv, prog), help); imported only when run (torch is slow to import)
COMMANDS = {
    "embed": ("aoe.model.embed", "main", "embed texts with a model folder into a .npy file"),
    "card": ("aoe.publish.modelcard", "main", "write the model card (README.md) of a trained model folder"),
    "export": ("aoe.publish.hub", "main_export", "lay a trained model folder out as its hub repository (card, sentence-transformers files)"),
    "recipe-diff": ("aoe.plan.ledger", "main_diff", "the training values each cell changed between two recipe.json files"),
    "push": ("aoe.publish.hub", "main_push", "push a trained model folder and its card to the Hugging Face hub (token: HF_TOKEN)"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    usage = "usage: aoe COMMAND [ARGS]\n\ncommands:\n" + "".join(
        f"  {name:<8} {help_}\n" for name, (_, _, help_) in COMMANDS.items()
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
    module, function, _ = COMMANDS[argv[0]]
    return getattr(importlib.import_module(module), function)(argv[1:], prog=f"aoe {argv[0]}")


if __name__ == "__main__":
    sys.exit(main())
