"""Rule gis_stats: Table 7 and the Fig. 8/9 data of the published GIS dataset, lengths in backbone tokens."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))
from aoe.util.joblog import start_log

start_log(snakemake.log[0])

from transformers import AutoTokenizer

from aoe.data.contracts import read_table
from aoe.gis.stats import compute_stats
from aoe.util.jsonio import write_json_atomic

tokenizer = AutoTokenizer.from_pretrained(snakemake.input.backbone)
rows = []
for path in snakemake.input.tables:
    split = Path(path).stem
    df = read_table(path, manifest=True)
    rows += [
        {"text1": a, "text2": b, "label": int(s), "split": split}
        for a, b, s in zip(df["sentence1"], df["sentence2"], df["score"])
    ]
stats = compute_stats(
    rows,
    # with [CLS]/[SEP], as a BERT input of 512 positions counts them
    tokenizer=lambda text: tokenizer(text, add_special_tokens=True, truncation=False)["input_ids"],
    tokenizer_name=str(snakemake.input.backbone),
)
write_json_atomic(stats, snakemake.output[0])
