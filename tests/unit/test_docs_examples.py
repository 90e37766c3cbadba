"""What the documentation promises about itself, checked without building it.

- Every ```python block of README.md (which GitHub shows without any include mechanism) and of the
  package's long description is an excerpt of a file in ``example_dags/``, which the integration
  tests run: the same lines, in order, up to a common indentation (a block is dedented; trailing
  whitespace is ignored).
- Every other ```python block of the docs (those that do not include an example DAG with
  ``--8<--``) runs as a DAG file would: operators are built, so their names, mode, format and conf
  pass the checks a DAG parse makes.
- The package's long description links only absolutely (relative links break on the package index),
  and pyproject.toml points at it.
- The reference tables ``docs/hooks.py`` generates at build time come out of the code as it is, and
  the troubleshooting page documents every error code, marked "no retry" exactly when it is not
  retried (the docs build checks the same; this fails in the unit gate, without mkdocs).
"""

from __future__ import annotations

import importlib.util
import re
import sys
import textwrap
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PACKAGE_README = REPO / "docs" / "package-readme.md"
EXAMPLES = sorted((REPO / "example_dags").rglob("*.py"))
PYTHON_BLOCK = re.compile(r"^(?P<indent>[ \t]*)```python\n(?P<body>.*?)^(?P=indent)```", re.MULTILINE | re.DOTALL)
MARKDOWN_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)")
REFERENCE_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
HTML_LINK = re.compile(r"""(?:href|src)\s*=\s*["']([^"']+)""")


def python_blocks(markdown: str) -> list[str]:
    return [textwrap.dedent(m.group("body")).strip("\n") for m in PYTHON_BLOCK.finditer(markdown)]


def is_excerpt(block: str, source: str) -> bool:
    """``block``'s lines appear consecutively in ``source``, all shifted by the same indentation."""
    want = [line.rstrip() for line in block.splitlines()]
    lines = [line.rstrip() for line in source.splitlines()]
    for start in range(len(lines) - len(want) + 1):
        window = lines[start : start + len(want)]
        indent = window[0][: len(window[0]) - len(window[0].lstrip())]
        shifted = [line[len(indent) :] if line.startswith(indent) else (None if line else "") for line in window]
        if shifted == want:
            return True
    return False


def test_excerpt_matching():
    source = "def f():\n    x = 1\n\n    return x\n"
    assert is_excerpt("x = 1\n\nreturn x", source)
    assert not is_excerpt("x = 2", source)
    assert not is_excerpt("return x\nx = 1", source)


@pytest.mark.parametrize("document", [README, PACKAGE_README], ids=lambda p: p.name)
def test_python_examples_are_excerpts_of_example_dags(document: Path):
    blocks = python_blocks(document.read_text())
    assert blocks, f"{document.name} has no Python example to check"
    sources = {path.relative_to(REPO): path.read_text() for path in EXAMPLES}
    for block in blocks:
        found = [str(path) for path, text in sources.items() if is_excerpt(block, text)]
        assert found, f"this Python block of {document.name} is in no file of example_dags/:\n{block}"


def test_package_description_links_absolutely():
    text = PACKAGE_README.read_text()
    links = MARKDOWN_LINK.findall(text) + REFERENCE_LINK.findall(text) + HTML_LINK.findall(text)
    assert links, "expected links to the documentation"
    relative = [link for link in links if not link.startswith(("https://", "http://", "mailto:"))]
    assert relative == [], f"relative links break on the package index: {relative}"


def test_package_description_is_the_project_readme():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["readme"] == {"file": "docs/package-readme.md", "content-type": "text/markdown"}


def load_hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ctas_docs_hooks", REPO / "docs" / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_generated_reference_builds_from_the_code():
    hooks = load_hooks()
    pages = sorted((REPO / "docs").rglob("*.md"))
    markers = [m for page in pages for m in hooks.MARKER.finditer(page.read_text())]
    assert {m.group(1) for m in markers} == set(hooks.GENERATORS), "every generated section is used by a page"
    for marker in markers:
        rendered = hooks.render(marker.group(0))
        assert rendered.strip() and "<!-- generated" not in rendered


def test_troubleshooting_documents_every_error_code():
    hooks = load_hooks()
    hooks.check_troubleshooting((REPO / "docs" / hooks.TROUBLESHOOTING).read_text())


DOC_PAGES = sorted((REPO / "docs").rglob("*.md"))
INLINE_BLOCKS = [
    pytest.param(block, id=f"{page.relative_to(REPO)}#{n}")
    for page in DOC_PAGES
    if page != PACKAGE_README
    for n, block in enumerate(python_blocks(page.read_text()))
    if not block.startswith("--8<--")
]


@pytest.mark.parametrize("block", INLINE_BLOCKS)
def test_inline_doc_examples_run_as_a_dag_file_would(block: str):
    """A block that is not an example DAG still builds: an operator in it passes every check a DAG
    parse makes (a renamed parameter, an unknown mode or format, a bad target fail here)."""
    from datetime import timedelta

    from airflow_provider_ctas.operators import AtomicCtasOperator

    namespace: dict[str, object] = {"AtomicCtasOperator": AtomicCtasOperator, "timedelta": timedelta}
    exec(compile(block, "<docs example>", "exec"), namespace)


def test_the_docs_hold_inline_examples_to_check():
    assert len(INLINE_BLOCKS) >= 3
