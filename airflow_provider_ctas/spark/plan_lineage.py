"""What an analysed query reads, table by table and column by column, read from its logical plan
through the driver's JVM: lineage a Spark job's own plan can give at no extra Spark work.

Column lineage follows each output column's expression id down the plan: an alias depends on
the columns its expression references, a union's column on that column of every branch, a CTE
reference on its definition's, a generator's output on the generator's input; a relation's
columns are its own. Plan shapes not followed here (``Expand`` for grouping sets, for example)
leave a column without inputs rather than with wrong ones.
"""

from __future__ import annotations

from typing import Any

InputEntry = str | dict[str, str]
"""``database.table`` of the session catalog, or ``{"catalog", "name"}``, ``{"path"}``,
``{"jdbc", "table"}``."""

# Strongest last: a column computed by an aggregate from one that was transformed is an aggregation.
SUBTYPES = ("IDENTITY", "TRANSFORMATION", "AGGREGATION")
Source = tuple[int, str, int]
"""(the input's index, its column, the index of the subtype in ``SUBTYPES``)."""


def _seq(scala: Any) -> list[Any]:
    items, iterator = [], scala.iterator()
    while iterator.hasNext():
        items.append(iterator.next())
    return items


def leaf_inputs(leaf: Any) -> list[InputEntry]:
    """What one leaf of an analysed plan reads (nothing for ``range``, ``VALUES``, ...)."""
    kind = leaf.getClass().getSimpleName()
    relation: Any = leaf.relation() if kind == "LogicalRelation" else None
    relation_kind = relation.getClass().getSimpleName() if relation is not None else ""
    if relation_kind == "JDBCRelation":  # the source, even under a catalog table USING jdbc
        table = str(relation.jdbcOptions().tableOrQuery())
        # A pushed-down query names no table.
        return [] if table.startswith("(") else [{"jdbc": str(relation.jdbcOptions().url()), "table": table}]
    if kind == "HiveTableRelation":
        identifier = leaf.tableMeta().identifier()
    elif kind == "LogicalRelation" and leaf.catalogTable().isDefined():
        identifier = leaf.catalogTable().get().identifier()
    elif kind == "DataSourceV2Relation" and leaf.catalog().isDefined() and leaf.identifier().isDefined():
        catalog, ident = str(leaf.catalog().get().name()), leaf.identifier().get()
        return [
            {"catalog": catalog, "name": ".".join([*(str(p) for p in ident.namespace()), str(ident.name())]).lower()}
        ]
    elif relation_kind == "HadoopFsRelation":
        return [{"path": str(root.toUri().toString())} for root in _seq(relation.location().rootPaths())]
    else:
        return []
    database = identifier.database().get() if identifier.database().isDefined() else "default"
    return [f"{database}.{identifier.table()}".lower()]


def _has_aggregate(expression: Any) -> bool:
    if expression.getClass().getSimpleName() == "AggregateExpression":
        return True
    return any(_has_aggregate(child) for child in _seq(expression.children()))


class _Walk:
    def __init__(self, inputs: list[InputEntry]) -> None:
        self.inputs = inputs
        self.sources: dict[int, set[Source]] = {}
        self.ctes: dict[int, list[int]] = {}

    def of(self, attribute: Any) -> set[Source]:
        return self.sources.get(int(attribute.exprId().id()), set())

    def visit(self, node: Any) -> None:
        children = _seq(node.children())
        for child in children:
            self.visit(child)
        kind, output = node.getClass().getSimpleName(), _seq(node.output())
        if not children:
            self._leaf(node, kind, output)
            return
        if kind == "CTERelationDef":
            self.ctes[int(node.id())] = [int(a.exprId().id()) for a in output]
        elif kind == "Union":
            branches = [_seq(child.output()) for child in children[1:]]
            for i, attribute in enumerate(output):
                merged = set().union(*(self.of(branch[i]) for branch in branches if i < len(branch)))
                self.sources[int(attribute.exprId().id())] = self.of(attribute) | merged
        elif kind == "Generate":
            used = set().union(*(self.of(r) for r in _seq(node.generator().references())))
            for attribute in _seq(node.generatorOutput()):
                self.sources[int(attribute.exprId().id())] = {(i, c, max(s, 1)) for i, c, s in used}
        for expression in _seq(node.expressions()):
            if expression.getClass().getSimpleName() == "Alias":
                self._alias(expression)

    def _leaf(self, node: Any, kind: str, output: list[Any]) -> None:
        if kind == "CTERelationRef":
            defined = self.ctes.get(int(node.cteId()), [])
            for attribute, source in zip(output, defined, strict=False):
                self.sources[int(attribute.exprId().id())] = set(self.sources.get(source, set()))
            return
        entries = [self.inputs.index(e) for e in leaf_inputs(node) if e in self.inputs]
        for attribute in output:
            self.sources[int(attribute.exprId().id())] = {(i, str(attribute.name()), 0) for i in entries}

    def _alias(self, alias: Any) -> None:
        child = alias.child()
        used = set().union(*(self.of(r) for r in _seq(alias.references())))
        if child.getClass().getSimpleName() != "AttributeReference":
            floor = 2 if _has_aggregate(child) else 1
            used = {(i, c, max(s, floor)) for i, c, s in used}
        self.sources[int(alias.exprId().id())] = used


def plan_column_lineage(plan: Any, inputs: list[InputEntry]) -> dict[str, list[list[Any]]]:
    """Per output column, ``[input index, input column, subtype]`` for every input column its
    values come from (OpenLineage's DIRECT transformations)."""
    walk = _Walk(inputs)
    walk.visit(plan)
    lineage = {}
    for attribute in _seq(plan.output()):
        strongest: dict[tuple[int, str], int] = {}
        for i, c, s in walk.of(attribute):  # one entry per input column, by its strongest subtype
            strongest[(i, c)] = max(s, strongest.get((i, c), 0))
        lineage[str(attribute.name())] = [[i, c, SUBTYPES[s]] for (i, c), s in sorted(strongest.items())]
    return lineage
