"""The rule graph of Snakemake's HTML report (``snakemake --report``), one node per rule. Import-light: the Snakefile
hands it to Snakemake's reporter while it plans (rules/report.smk)."""

from __future__ import annotations

__all__ = ["draw_each_rule_once", "rule_graph_spec"]


def rule_graph_spec(dag) -> tuple[dict, int, int]:
    """The rule graph of Snakemake's HTML report with one node per rule, as ``snakemake --rulegraph`` draws it.

    Snakemake's report (snakemake.report.rulegraph_spec, 9.x) keeps one job of each rule per level of the job graph,
    so a rule whose jobs run at two depths is drawn twice (evaluate_sts scores the backbone as downloaded before any
    training and the trained models after it; issue 62). Here the rules are put in a topological order of the rule
    graph (ties by where each first runs, then by name) and every rule-to-rule dependency is one link; the same
    return value as Snakemake's (nodes, links between non-adjacent and adjacent nodes; its x and y extent).
    ``dag``: Snakemake's DAG (``toposorted()`` levels of jobs, ``dependencies[job]``), read only. A rule graph with a
    cycle between rules (none here) has no such order: None, and the caller keeps Snakemake's."""
    first: dict[str, int] = {}
    edges: set[tuple[str, str]] = set()
    for depth, level in enumerate(dag.toposorted()):
        for job in level:
            first.setdefault(job.rule.name, depth)
            edges.update((dep.rule.name, job.rule.name) for dep in dag.dependencies[job] if dep.rule.name != job.rule.name)
    waiting = {rule: {a for a, b in edges if b == rule} for rule in first}
    order: list[str] = []
    while waiting:
        ready = sorted((rule for rule, before in waiting.items() if not before), key=lambda r: (first[r], r))
        if not ready:
            return None  # type: ignore[return-value]
        order.append(ready[0])
        del waiting[ready[0]]
        for before in waiting.values():
            before.discard(ready[0])
    nodes = [{"rule": rule, "fx": 10, "fy": i * 50} for i, rule in enumerate(order)]
    at = {rule: i for i, rule in enumerate(order)}
    links = [{"target": at[b], "source": at[a], "sourcerule": a, "targetrule": b, "value": 1} for a, b in sorted(edges, key=lambda e: (at[e[1]], at[e[0]]))]
    spec = {"nodes": nodes, "links": [x for x in links if x["target"] - x["source"] != 1],
            "links_direct": [x for x in links if x["target"] - x["source"] == 1]}
    return spec, 100, max((n["fy"] for n in nodes), default=0)


def draw_each_rule_once() -> None:
    """Hand :func:`rule_graph_spec` to Snakemake's HTML reporter (under ``--report`` only: importing the reporter
    costs a plan 0.8 s). Snakemake 9's reporter calls its module's ``rulegraph_spec(dag)``; a version without it
    keeps its own graph, as does a graph this one cannot order."""
    import snakemake.report.html_reporter as html_reporter

    snakemakes = getattr(html_reporter, "rulegraph_spec", None)
    if snakemakes is not None:
        html_reporter.rulegraph_spec = lambda dag: rule_graph_spec(dag) or snakemakes(dag)
