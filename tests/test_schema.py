"""Every config key is documented: a description, and a default unless the key is required or an identity."""

import yaml

from tests.workflow_utils import REPO

# Keys whose absence means something (which source a backbone comes from, which weights an
# objective has): a default would be wrong, not missing.
NO_DEFAULT = {"hf_id", "package", "gguf_package", "path", "weights", "angle", "contrastive", "cosine", "angle_tau", "cosine_tau",
              "contrastive_tau", "contrastive_threshold", "detect_identical", "cosine_mse", "softmax", "simcse",
              "simcse_tau", "by_format",
              # absent = "not a variant" / "the backbone's pooling" / "no in-domain evaluation"
              "base", "pooling", "eval_split",
              # a table's rows and references: absent = none, or the table's own value
              "trainset", "trainsets", "backbones", "objectives", "rows", "seeds", "label", "paper", "treatment"}


def _walk(node, path, required=()):
    if not isinstance(node, dict):
        return
    for key, sub in node.get("properties", {}).items():
        yield f"{path}.{key}", key, sub, key in node.get("required", ())
        yield from _walk(sub, f"{path}.{key}")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}.*")
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}[]")


def test_every_key_has_description_and_default():
    schema = yaml.safe_load((REPO / "schemas" / "config.schema.yaml").read_text())
    defs = schema.get("$defs", {})
    problems = []
    for path, key, sub, required in [*_walk(schema, "config"), *(x for d, s in defs.items() for x in _walk(s, f"$defs.{d}"))]:
        if "$ref" in sub:
            continue
        if not sub.get("description"):
            problems.append(f"{path}: no description")
        if "default" not in sub and not required and key not in NO_DEFAULT:
            problems.append(f"{path}: no default")
    assert not problems, "\n".join(problems)
