"""Every config key is documented: a description, and a default unless the key is required or an identity."""

import copy

import yaml

from aoe.config.hparams import YAML_LOADER
from tests.workflow_utils import REPO

def _train_fields():
    from dataclasses import fields

    from aoe.config.hparams import TrainSettings

    schema = yaml.load((REPO / "schemas" / "config.schema.yaml").read_text(), Loader=YAML_LOADER)
    return [f for f in fields(TrainSettings) if f.name in schema["$defs"]["train"]["properties"]]


# Keys whose absence means something (which source a backbone comes from, which weights an
# objective has): a default would be wrong, not missing. By path, so that a new key of the same
# name elsewhere is still checked ("*": any name under additionalProperties, "[]": a list item).
NO_DEFAULT = {
    "config.backbones.*.hf_id", "config.backbones.*.package", "config.backbones.*.gguf_package", "config.backbones.*.path",
    # absent = aoe.config.hparams.TrainSettings.pooling (CLS), written there once with its source
    "config.backbones.*.pooling",
    # absent = "not a variant" / "the backbone's pooling" / "no in-domain evaluation"
    "config.objectives.*.base", "config.objectives.*.pooling", "config.trainsets.*.eval_split",
    # absent = the train set's length_buckets (TrainSettings' default below them all)
    "config.objectives.*.length_buckets",
    "config.objectives.*.weights", "config.objectives.*.by_format",
    *(f"config.objectives.*.weights.{k}" for k in ("angle", "contrastive", "cosine", "cosine_mse", "softmax", "simcse")),
    *(f"config.objectives.*.{k}" for k in ("angle_tau", "cosine_tau", "contrastive_tau", "simcse_tau",
                                           "contrastive_threshold", "graded_labels", "contrastive_reduction",
                                           "identical_texts")),
    # a table's rows and references: absent = none, or the table's own value
    *(f"config.tables.*.{k}" for k in ("trainset", "trainsets", "backbones", "objectives", "rows", "paper", "reproduction",
                                       "ttest.treatment")),
    # absent = that difference of measurement is refused between the table's rows (aoe.results.likeness)
    *(f"config.tables.*.compare_across.{k}" for k in ("gold", "protocol", "pooling", "recipe")),
    # absent = not a study table; a study's row the paper chose (test increasing has none) and its column (the table's last)
    "config.tables.*.study", "config.tables.*.study.best", "config.tables.*.study.column",
    # absent = not an objective comparison (its kind requires one: aoe.plan.check); no row that separates the objective from the labels
    "config.tables.*.comparison", "config.tables.*.comparison.separates",
    *(f"config.tables.*.rows[].{k}" for k in ("trainset", "trainsets", "seeds", "reruns", "label", "paper", "reproduction",
                                              "variant", "eval_pooling", "eval_gold")),
    # absent = the backbone's own pooling / prompt (a null prompt is a value: no prompt)
    "config.evaluation.pretrained_variants.*.pooling", "config.evaluation.pretrained_variants.*.prompt",
    # a released checkpoint's source (the hub id, or a local copy) and an adapter's base: absent = not that source
    *(f"config.released.checkpoints.*.{k}" for k in ("hf_id", "path", "base", "base.hf_id", "base.path")),
    # training keys: absent = the default of aoe.config.hparams.TrainSettings, written there once with its source
    *(f"$defs.train.{f.name}" for f in _train_fields()),
    "$defs.train.init.objective",  # absent = the cell's own objective (a two-stage run of one objective)
}


def _walk(node, path):
    if not isinstance(node, dict):
        return
    for key, sub in node.get("properties", {}).items():
        yield f"{path}.{key}", sub, key in node.get("required", ())
        yield from _walk(sub, f"{path}.{key}")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}.*")
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}[]")


def _problems(schema: dict) -> list[str]:
    defs = schema.get("$defs", {})
    problems, exempted = [], set()
    for path, sub, required in [*_walk(schema, "config"), *(x for d, s in defs.items() for x in _walk(s, f"$defs.{d}"))]:
        if "$ref" in sub:
            continue
        if not sub.get("description"):
            problems.append(f"{path}: no description")
        if "default" not in sub and not required:
            if path in NO_DEFAULT:
                exempted.add(path)
            else:
                problems.append(f"{path}: no default")
    # a stale exemption would silently cover whatever later appears at that path
    problems += [f"{path}: exempt from a default but not a key without one" for path in sorted(NO_DEFAULT - exempted)]
    return problems


def _schema() -> dict:
    return yaml.load((REPO / "schemas" / "config.schema.yaml").read_text(), Loader=YAML_LOADER)


def test_every_key_has_description_and_default():
    problems = _problems(_schema())
    assert not problems, "\n".join(problems)


def test_exemptions_hold_only_at_their_path():
    schema = _schema()
    # exempt under objectives, not under evaluation
    schema["properties"]["evaluation"]["properties"]["pooling"] = {"type": "string", "description": "a new key"}
    schema["properties"]["tables"]["additionalProperties"]["properties"]["rows"]["items"]["properties"]["seeds"]["default"] = [1]
    assert _problems(schema) == [
        "config.evaluation.pooling: no default",
        "config.tables.*.rows[].seeds: exempt from a default but not a key without one",
    ]
    # the same name nested one level deeper than its exempt place is not exempt either
    schema = _schema()
    objective = schema["properties"]["objectives"]["additionalProperties"]
    objective["properties"]["weights"]["properties"]["pooling"] = copy.deepcopy(objective["properties"]["pooling"])
    assert _problems(schema) == ["config.objectives.*.weights.pooling: no default"]


def test_the_schema_names_llm_tables_as_the_package_does():
    """JSON Schema cannot import aoe.llm_supervised.LLM_DATASET_PATTERN: its two copies must equal it."""
    from aoe.llm_supervised import LLM_DATASET_PATTERN

    llm = _schema()["properties"]["llm_supervised"]["properties"]["generators"]
    dataset = _schema()["properties"]["trainsets"]["additionalProperties"]["properties"]["dataset"]
    assert llm["propertyNames"]["pattern"] == f"^{LLM_DATASET_PATTERN}$"
    assert [alt["pattern"] for alt in dataset["anyOf"] if "pattern" in alt] == [f"^{LLM_DATASET_PATTERN}$"]


def test_the_build_lists_name_what_the_package_builds():
    """build.figures / build.analyses: the schema's enums and defaults are aoe.config.workflow's names, which are the
    figures aoe.results.figures plots and the training curves; config.yaml builds everything it defines (the paper grid)."""
    from aoe.config.workflow import ANALYSIS_NAMES, FIGURE_NAMES
    from aoe.results.figures import FIGURES
    from aoe.results.figures.curves import CURVES

    build = _schema()["properties"]["build"]["properties"]
    assert FIGURE_NAMES == (*FIGURES, CURVES)
    assert build["figures"]["items"]["enum"] == build["figures"]["default"] == list(FIGURE_NAMES)
    assert build["analyses"]["items"]["enum"] == build["analyses"]["default"] == list(ANALYSIS_NAMES)
    config = yaml.load((REPO / "config.yaml").read_text(), Loader=YAML_LOADER)
    # a table defined in config.yaml but left out of its build.tables would be built by no configuration
    assert config["build"]["tables"] == list(config["tables"])
    assert config["build"]["figures"] == list(FIGURE_NAMES) and config["build"]["analyses"] == list(ANALYSIS_NAMES)


# `.get(KEY, literal)` in aoe/ where KEY is not the config key the schema defaults, only a name it shares:
# (file, key, what .get is called on)
NOT_CONFIG_KEYS = {
    ("aoe/config/hparams.py", "source", "f.metadata"),  # a dataclass field's metadata
    ("aoe/plan/ledger.py", "source", "off_entry"),  # an official recipe's entry (aoe/resources/official_recipes.yaml)
    ("aoe/publish/modelcard.py", "source", "backbone"),  # a materialised backbone's record
    ("aoe/results/tables.py", "backbone", "r"),  # a table row's paper mapping
    ("aoe/results/tables.py", "objective", "r"),
    ("aoe/results/load.py", "batch_size", "train"),  # a trained model's recorded settings
    ("aoe/results/figures/__init__.py", "objective", "cell"),  # a cell given as a dict
    ("aoe/results/figures/__init__.py", "trainset", "cell"),
    ("aoe/results/figures/__init__.py", "split", "spec"),  # trainsets.<name>.split, which the schema leaves to the code
    ("aoe/results/figures/curves.py", "split", "spec"),
    ("aoe/results/figures/sts_geometry.py", "dataset", "(data.get('meta') or {}).get('data', {})"),  # a pairs file's meta
}


def _schema_defaults() -> dict[str, list[str]]:
    """Key name -> the paths ("backbones.*.eval_text") where the schema gives it a default."""
    defaults: dict[str, list[str]] = {}

    def walk(node, path):
        if not isinstance(node, dict):
            return
        if "default" in node and path:
            defaults.setdefault(path[-1], []).append(".".join(path))
        for name, sub in (node.get("properties") or {}).items():
            walk(sub, [*path, name])
        for key in ("additionalProperties", "items"):
            walk(node.get(key), [*path, "*"])

    walk(yaml.load((REPO / "schemas" / "config.schema.yaml").read_text(), Loader=YAML_LOADER), [])
    return defaults


def test_no_schema_default_is_written_again_in_the_code():
    # a config no schema filled (a bench, a hand-made dict) reads the default with aoe.config.hparams.schema_default
    import ast

    defaults, repeated = _schema_defaults(), []
    for path in sorted((REPO / "aoe").rglob("*.py")):
        rel = str(path.relative_to(REPO))
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                    and len(node.args) == 2 and isinstance(node.args[0], ast.Constant) and node.args[0].value in defaults
                    and isinstance(node.args[1], ast.Constant)
                    and (rel, node.args[0].value, ast.unparse(node.func.value)) not in NOT_CONFIG_KEYS):
                repeated.append(f"{rel}:{node.lineno}: .get({node.args[0].value!r}, {node.args[1].value!r}) "
                                f"(the schema's default of {', '.join(defaults[node.args[0].value])})")
    assert not repeated, "schema defaults written again in code; read them with schema_default(...):\n" + "\n".join(repeated)


def test_schema_default_reads_under_any_name_and_list_entry():
    from aoe.config.hparams import schema_default

    assert schema_default("backbones", "*", "eval_text") == "raw"
    assert schema_default("tables", "*", "rows", "*", "section") == ""
    assert schema_default("figures", "sts_geometry", "tsne", "perplexity") == 30
