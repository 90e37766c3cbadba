"""MkDocs hook (``hooks:`` in mkdocs.yml): reference tables generated from the code at build time.

A page asks for a table with a line of its own, ``<!-- generated: NAME -->``; the build replaces it.
What the tables come from:

- the operators' parameters: ``__init__``'s signature, ``template_fields`` and the class docstring's
  ``:param`` lines, read as source (``ast``): the operators' modules import Airflow, which a docs
  build does not start;
- error codes and whether each is retried: the classes of ``core/errors.py`` (imported: the core
  imports neither Airflow nor Spark); the Airflow exception each raises: ``operators/exceptions.py``,
  read as source;
- the XCom transaction: built with the pure transaction classes and serialized by their own
  ``to_dict``; the XCom key and the return value's keys read as source;
- formats and modes: the catalog registry (pure), asked which requests it accepts;
- checks: the classes of ``core/checks.py``; the GC command lines: their ``add_argument`` calls.

The build fails (``PluginError``) when code and a hand-written page disagree where this can tell:
a parameter without a ``:param`` line, or an error code missing from the troubleshooting table or
marked retried there when it is not.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

try:
    from mkdocs.exceptions import PluginError
except ImportError:  # imported by a unit test without mkdocs
    PluginError = RuntimeError  # type: ignore[misc,assignment]

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

MARKER = re.compile(r"^<!-- generated: ([a-z-]+)(?: ([A-Za-z_]+))? -->$", re.MULTILINE)
TROUBLESHOOTING = "operations/troubleshooting.md"
# BaseOperator's arguments the operator wraps: its own callback runs first, then yours.
WRAPPED_CALLBACKS = ("on_execute_callback", "on_success_callback", "on_failure_callback", "on_retry_callback")
OPERATOR_MODULES = {
    "AtomicCtasOperator": "airflow_provider_ctas/operators/atomic_ctas.py",
    "AtomicCtasGcOperator": "airflow_provider_ctas/operators/gc.py",
}


# -- reading source ------------------------------------------------------------------------------


def _tree(relative: str) -> ast.Module:
    return ast.parse((REPO / relative).read_text(), filename=relative)


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise PluginError(f"class {name} not found")


def _function(body: list[ast.stmt], name: str) -> ast.FunctionDef:
    for node in body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise PluginError(f"function {name} not found")


def _assigned(body: list[ast.stmt], name: str) -> ast.expr | None:
    for node in body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node.value
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return node.value
    return None


def _md(text: str) -> str:
    """reST inline literals as Markdown code spans, on one line."""
    return " ".join(text.replace("``", "`").split())


def _cell(text: str) -> str:
    """Text for a table cell: a pipe is escaped outside code spans (inside one, the table keeps it)."""
    parts = text.split("`")
    return "`".join(part if i % 2 else part.replace("|", "\\|") for i, part in enumerate(parts))


def docstring_params(doc: str) -> dict[str, str]:
    """The ``:param name: text`` entries of a docstring (continuation lines indented)."""
    params: dict[str, str] = {}
    current = None
    for line in doc.splitlines():
        match = re.match(r"\s*:param (\w+):\s*(.*)", line)
        if match:
            current = match.group(1)
            params[current] = match.group(2)
        elif current and line.strip() and line[:1].isspace():
            params[current] += " " + line.strip()
        else:
            current = None
    return {name: _md(text) for name, text in params.items()}


class Parameter(NamedTuple):
    name: str
    annotation: str
    default: str | None
    templated: bool
    description: str


def operator_parameters(class_name: str) -> list[Parameter]:
    """An operator's keyword parameters as its source declares them."""
    cls = _class(_tree(OPERATOR_MODULES[class_name]), class_name)
    init = _function(cls.body, "__init__")
    fields_node = _assigned(cls.body, "template_fields")
    templated = set(ast.literal_eval(fields_node)) if fields_node is not None else set()
    described = docstring_params(ast.get_docstring(cls) or "")
    params = []
    for arg, default in zip(init.args.kwonlyargs, init.args.kw_defaults, strict=True):
        params.append(
            Parameter(
                name=arg.arg,
                annotation=ast.unparse(arg.annotation) if arg.annotation else "",
                default=None if default is None else ast.unparse(default),
                templated=arg.arg in templated,
                description=described.get(arg.arg, ""),
            )
        )
    unknown = set(described) - {p.name for p in params}
    if unknown:
        raise PluginError(f"{class_name}'s docstring describes parameters it does not take: {sorted(unknown)}")
    return params


def _parameter_table(class_name: str, *, require_descriptions: bool) -> str:
    rows = ["| parameter | type | default | templated | description |", "|---|---|---|---|---|"]
    for p in operator_parameters(class_name):
        description = p.description
        if p.name in WRAPPED_CALLBACKS:
            description = description or "Airflow's callback argument; the operator's own callback runs first."
        if not description and require_descriptions:
            raise PluginError(f"{class_name}.__init__ takes {p.name!r}, which its docstring has no :param line for")
        default = "required" if p.default is None else f"`{p.default}`"
        rows.append(
            f"| `{p.name}` | {_cell(f'`{p.annotation}`')} | {_cell(default)} | {'yes' if p.templated else ''} "
            f"| {_cell(description)} |"
        )
    rows.append("")
    rows.append("Other keyword arguments go to Airflow's `BaseOperator` (`retries`, `execution_timeout`, `pool`, ...).")
    return "\n".join(rows)


def operator_reference(class_name: str | None) -> str:
    if class_name not in OPERATOR_MODULES:
        raise PluginError(f"operator-parameters needs one of {sorted(OPERATOR_MODULES)}, got {class_name!r}")
    return _parameter_table(class_name, require_descriptions=class_name == "AtomicCtasOperator")


# -- error codes ------------------------------------------------------------------------------


class Code(NamedTuple):
    code: str
    retryable: bool
    error_class: str
    meaning: str


def error_codes() -> list[Code]:
    """Every code of the provider's error classes (``core/errors.py``), in definition order."""
    from airflow_provider_ctas.core import errors

    def family(cls: type[errors.CtasError]) -> Iterator[type[errors.CtasError]]:
        yield cls
        for sub in cls.__subclasses__():
            yield from family(sub)

    found: dict[str, Code] = {}
    for cls in family(errors.CtasError):
        if cls.__module__ != errors.__name__ or cls.code in found:
            continue
        doc = (cls.__doc__ or "").strip()
        meaning = _md(doc.split("\n\n")[0]) or "(no docstring in the code: see Troubleshooting)"
        if cls is errors.CtasError:
            meaning = "An error the driver could not classify."
        found[cls.code] = Code(cls.code, cls.retryable, cls.__name__, meaning)
    return list(found.values())


def airflow_exceptions() -> dict[str, tuple[str, str | None]]:
    """For each code: the ``operators.exceptions`` class raised when it is not retried (or is), as
    ``airflow_exception`` picks it: the family's own class from ``_RETRYABLE``/``_FAILURES``, else the
    family's base; and the class raised for a retried ``AUDIT_FAILED`` (``retry_on_failed_checks``)."""
    tree = _tree("airflow_provider_ctas/operators/exceptions.py")
    codes: dict[str, str] = {}
    bases: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bases[node.name] = [ast.unparse(base) for base in node.bases]
            value = _assigned(node.body, "code")
            if value is not None:
                codes[node.name] = ast.literal_eval(value)
    families: dict[str, dict[str, str]] = {}
    for name in ("_RETRYABLE", "_FAILURES"):
        comprehension = _assigned(tree.body, name)
        if not isinstance(comprehension, ast.DictComp) or not isinstance(comprehension.generators[0].iter, ast.Tuple):
            raise PluginError(f"operators/exceptions.py: {name} is no longer a dict over a tuple of classes")
        members = [elt.id for elt in comprehension.generators[0].iter.elts if isinstance(elt, ast.Name)]
        families[name] = {codes[member]: member for member in members}
    audit_retry = next((n for n, c in codes.items() if c == "AUDIT_FAILED" and "AtomicCtasRetryable" in bases[n]), None)
    table: dict[str, tuple[str, str | None]] = {}
    for code in error_codes():
        if code.retryable:
            table[code.code] = (families["_RETRYABLE"].get(code.code, "AtomicCtasRetryable"), None)
        else:
            retried = audit_retry if code.code == "AUDIT_FAILED" else None
            table[code.code] = (families["_FAILURES"].get(code.code, "AtomicCtasFailure"), retried)
    return table


def error_code_table() -> str:
    raised = airflow_exceptions()
    rows = ["| code | retried | raised as | meaning |", "|---|---|---|---|"]
    for code in error_codes():
        cls, retried_cls = raised[code.code]
        retried = "yes" if code.retryable else "no"
        shown = f"`{cls}`"
        if retried_cls:
            retried += " (yes with `retry_on_failed_checks=True`)"
            shown += f" (`{retried_cls}` when retried)"
        rows.append(f"| `{code.code}` | {retried} | {shown} | {_cell(code.meaning)} |")
    gc_error = _class(_tree("airflow_provider_ctas/gc.py"), "GcFailedError")
    gc_code = _assigned(gc_error.body, "code")
    if gc_code is not None:
        base = ", ".join(ast.unparse(b) for b in gc_error.bases)
        rows.append(
            f"| `{ast.literal_eval(gc_code)}` | as the task's `retries` allow (a `{base}`) | `GcFailedError` "
            "(garbage collection only: `airflow ctas gc` and `airflow-ctas-gc` exit with status 2) "
            "| The GC pass itself failed in Spark. |"
        )
    return "\n".join(rows)


def check_troubleshooting(markdown: str) -> None:
    """Every code is in the troubleshooting table, marked ``(no retry...)`` exactly when not retried."""
    documented = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([A-Z_]+)`([^|]*)\|", markdown, re.MULTILINE)}
    for code in error_codes():
        if code.code not in documented:
            raise PluginError(f"{TROUBLESHOOTING}: error code {code.code} is missing from the table")
        says_no_retry = documented[code.code].strip().startswith("(no retry")
        if says_no_retry == code.retryable:
            raise PluginError(
                f"{TROUBLESHOOTING}: {code.code} is {'retried' if code.retryable else 'not retried'} "
                f"(core/errors.py), the table says otherwise"
            )


# -- the transaction in XCom ----------------------------------------------------------------------

TOP_LEVEL = {
    "schema_version": "integer: the JSON layout's version; a provider refuses a newer one (`CORRUPT_STATE`)",
    "kind": "string: which strategy's transaction this is (see below)",
    "txn_id": "string: derived from `key`, the same for every try and callback",
    "key": "object: `dag_id`, `task_id`, `run_id`, `map_index` of the task instance",
    "conn_id": "string: the Spark connection's id (never its credentials)",
    "target": "string: the fully qualified target table",
    "try_number": "integer: the try that owns the transaction now (the fence)",
    "state": "string: one of the states below",
    "outcome": "string or null: one of the outcomes below, once decided",
    "last_committed_try": "integer or null: the try that published",
    "details": "object: what the runs reported (keys below)",
    "history": "array of `{try_number, state, at, note}`: the state changes, oldest first",
    "spec": "object: the request's settings, by kind (below)",
}
OUTCOMES = {
    "published": "this try published the target",
    "already_published": "an earlier try of the same transaction had published the target; nothing was re-run",
    "target_exists": "`create_if_not_exists` found a target and left it alone",
    "aborted": "nothing was published",
}
SAMPLE_KEY = ("example_atomic_ctas", "daily_orders", "scheduled__2024-01-01T00:00:00+00:00")
SAMPLES = (
    ("parquet", "analytics.daily_orders_20240101", "create", ["country"]),
    ("iceberg", "lake.analytics.daily_orders", "replace", None),
    ("delta", "analytics.daily_orders", "replace", None),
)


def sample_tables() -> list[Any]:
    """One committed transaction per kind, built and serialized by the provider's own classes."""
    from airflow_provider_ctas.catalogs import create_two_phase_table
    from airflow_provider_ctas.core.transaction import Outcome, TransactionKey

    key = TransactionKey(*SAMPLE_KEY)
    tables = []
    for table_format, target, mode, partition_by in SAMPLES:
        table = create_two_phase_table(
            key=key,
            conn_id="spark_default",
            target=target,
            mode=mode,
            table_format=table_format,
            partition_by=partition_by,
            table_properties={"team": "data-eng"},
        )
        table.begin(1, "2024-01-02T00:00:04+00:00")
        table.mark_prepared(1, "2024-01-02T00:00:31+00:00")
        table.commit(1, "2024-01-02T00:00:32+00:00", Outcome.PUBLISHED, {"row_count": 10000})
        tables.append(table)
    return tables


def _source_constant(relative: str, name: str) -> Any:
    value = _assigned(_tree(relative).body, name)
    if value is None:
        raise PluginError(f"{relative}: {name} not found")
    return ast.literal_eval(value)


def _summary_keys() -> list[str]:
    summary = _function(_tree("airflow_provider_ctas/operators/state.py").body, "summary")
    for node in ast.walk(summary):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Dict):
            return [ast.literal_eval(k) for k in node.value.keys if k is not None]
    raise PluginError("operators/state.py: summary() no longer returns a dict literal")


def xcom_reference() -> str:
    from airflow_provider_ctas.core.transaction import MAX_HISTORY, SCHEMA_VERSION, TxnState

    tables = sample_tables()
    top = list(tables[0].to_dict())
    if set(top) != set(TOP_LEVEL):
        raise PluginError(f"the transaction's JSON fields changed ({top}); update TOP_LEVEL in docs/hooks.py")
    states = [s.value for s in TxnState]
    from airflow_provider_ctas.core.transaction import Outcome

    if {o.value for o in Outcome} != set(OUTCOMES):
        raise PluginError("the outcomes changed; update OUTCOMES in docs/hooks.py")
    key = _source_constant("airflow_provider_ctas/operators/state.py", "XCOM_KEY")
    lines = [
        f"XCom key **`{key}`** (`airflow_provider_ctas.operators.XCOM_KEY`), pushed at every state change;",
        "the same JSON is kept in the task state store under the same key.",
        f"Current `schema_version`: **{SCHEMA_VERSION}**. `history` keeps the last {MAX_HISTORY} entries.",
        "",
        "| field | value |",
        "|---|---|",
        *(f"| `{name}` | {_cell(TOP_LEVEL[name])} |" for name in top),
        "",
        "`state`: " + ", ".join(f"`{s}`" for s in states) + " (`new` only before the first begin).",
        "",
        "`outcome`: " + "; ".join(f"`{o}` ({meaning})" for o, meaning in OUTCOMES.items()) + ".",
        "",
        "`kind` and its `spec`:",
        "",
        "| kind | `spec` fields |",
        "|---|---|",
        *(f"| `{t.kind}` | {', '.join(f'`{f}`' for f in t.to_dict()['spec'])} |" for t in tables),
        "",
        "`execute` returns (the `return_value` XCom): " + ", ".join(f"`{k}`" for k in _summary_keys()) + ".",
        "",
        "A committed `create` as the provider serializes it (the `details` shortened to `row_count`; a real",
        "run adds the keys listed below):",
        "",
        "```json",
        json.dumps(tables[0].to_dict(), indent=2),
        "```",
    ]
    return "\n".join(lines)


def details_reference() -> str:
    from airflow_provider_ctas.core.details import reference

    rows = [f"| `{key}` | {_cell(kind)} | {_cell(meaning)} |" for key, kind, meaning in reference()]
    return "\n".join(["| key | type | meaning |", "|---|---|---|", *rows])


# -- formats and modes ------------------------------------------------------------------------------

MODES = ("create", "create_if_not_exists", "replace", "overwrite_partitions")
PROBE_TARGETS = ("analytics.t", "lake.analytics.t")


def _accepts(**request: Any) -> bool:
    from airflow_provider_ctas.catalogs import create_two_phase_table
    from airflow_provider_ctas.core.errors import InvalidInputError
    from airflow_provider_ctas.core.transaction import TransactionKey

    try:
        create_two_phase_table(key=TransactionKey(*SAMPLE_KEY), conn_id="spark_default", **request)
    except InvalidInputError:
        return False
    return True


def format_table() -> str:
    from airflow_provider_ctas.catalogs import STRATEGIES

    rows = [
        "| strategy (`kind`) | `table_format` | catalog | modes | `allow_swap` | `checks=` |",
        "|---|---|---|---|---|---|",
    ]
    for strategy in STRATEGIES:
        fmt = sorted(strategy.formats)[0]
        target = next((t for t in PROBE_TARGETS if _accepts(target=t, mode="create", table_format=fmt)), None)
        if target is None:
            raise PluginError(f"no probe target is accepted for {fmt}")
        base = {"target": target, "table_format": fmt, "partition_by": ["p"]}
        modes = [m for m in MODES if _accepts(mode=m, **base)]
        swap = _accepts(mode="replace", allow_swap=True, **base)
        rows.append(
            f"| `{strategy.kind}` | {', '.join(f'`{f}`' for f in sorted(strategy.formats))} "
            f"| {', '.join(f'`{c}`' for c in sorted(strategy.catalogs))} | {', '.join(f'`{m}`' for m in modes)} "
            f"| {'yes' if swap else 'no'} | {'yes' if strategy.audits else 'no'} |"
        )
    return "\n".join(rows)


# -- checks -----------------------------------------------------------------------------------------


def checks_table() -> str:
    from airflow_provider_ctas.core import checks

    rows = [
        "| class | dict `type` | fields of the dict form | passes when | measured by the write itself |",
        "|---|---|---|---|---|",
    ]
    for name in sorted(checks.__all__ if hasattr(checks, "__all__") else dir(checks)):
        cls = getattr(checks, name)
        if not (isinstance(cls, type) and issubclass(cls, checks.Check) and cls is not checks.Check):
            continue
        doc = _md((cls.__doc__ or "").strip().split("\n\n")[0])
        in_write = "yes" if cls.measured_in_write else "no: a query after the write"
        fields = ", ".join(f"`{f}`" for f in cls.fields)
        rows.append(f"| `{name}` | `{cls.type}` | {fields} | {_cell(doc)} | {in_write} |")
    rows.append("")
    rows.append(
        "Every check also takes `name=` and `scope=` (" + ", ".join(f"`{s}`" for s in checks.SCOPES) + "); "
        f"at most {checks.MAX_CHECKS} checks per task."
    )
    return "\n".join(rows)


# -- garbage-collection command lines ---------------------------------------------------------------


def _option_rows(calls: list[ast.Call], flags_of: Callable[[ast.Call], list[str]]) -> list[str]:
    rows = []
    for call in calls:
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        flags = flags_of(call)
        default = keywords.get("default")
        shown = "" if default is None else f"`{ast.literal_eval(default)}`"
        if "required" in keywords:
            shown = "required"
        action = keywords.get("action")
        if isinstance(action, ast.Constant) and action.value == "append":
            shown = (shown + ", repeatable").lstrip(", ") if shown != "`[]`" else "repeatable"
        help_text = ast.literal_eval(keywords["help"]) if "help" in keywords else ""
        rows.append(f"| {', '.join(f'`{f}`' for f in flags)} | {_cell(shown)} | {_cell(help_text)} |")
    return rows


def gc_cli_table() -> str:
    header = ["| option | default | meaning |", "|---|---|---|"]
    main = _function(_tree("airflow_provider_ctas/gc.py").body, "main")
    standalone = [
        n
        for n in ast.walk(main)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument"
    ]
    commands = _function(_tree("airflow_provider_ctas/cli.py").body, "get_cli_commands")
    airflow_args = [
        n for n in ast.walk(commands) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "arg"
    ]
    rows = [
        "`airflow ctas gc` (asks Airflow's database which task instances are still active):",
        "",
        *header,
        *_option_rows(airflow_args, lambda c: list(ast.literal_eval(c.args[0]))),
        "",
        "`airflow-ctas-gc` (no Airflow database: relies on `--min-age` alone):",
        "",
        *header,
        *_option_rows(standalone, lambda c: [ast.literal_eval(a) for a in c.args]),
    ]
    return "\n".join(rows)


# -- the hook ---------------------------------------------------------------------------------------

GENERATORS: dict[str, Callable[[str | None], str]] = {
    "operator-parameters": operator_reference,
    "error-codes": lambda _: error_code_table(),
    "xcom": lambda _: xcom_reference(),
    "xcom-details": lambda _: details_reference(),
    "formats": lambda _: format_table(),
    "checks": lambda _: checks_table(),
    "gc-cli": lambda _: gc_cli_table(),
}


def render(markdown: str) -> str:
    """Replace every ``<!-- generated: NAME [ARG] -->`` line with its table."""

    def replace(match: re.Match[str]) -> str:
        generator = GENERATORS.get(match.group(1))
        if generator is None:
            raise PluginError(f"unknown generated section {match.group(1)!r}; known: {sorted(GENERATORS)}")
        return generator(match.group(2))

    return MARKER.sub(replace, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri == TROUBLESHOOTING:
        check_troubleshooting(markdown)
    return render(markdown)
