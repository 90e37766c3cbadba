"""A generated report and its history.

A run writes its report under build/reports/ (ignored by git), never under docs/: the fault matrix
(``reliability.md``, tests/support/reliability.py), the benchmark (``benchmarks.md`` and its plot,
or ``formats.md`` for a run of the Iceberg/Delta approaches; benchmarks/ctas_benchmark.py) the
profile (``profile.md``, benchmarks/profile_phases.py) and where a test run's minutes went
(``test-times.md``, tests/support/test_times.py), what a durable try saves (``durable.md``,
benchmarks/durable_retry.py), the metastore calls per publish (``metastore-calls.md``,
benchmarks/metastore_calls.py) and the chaos soak (``soak.md``, tests/soak/test_soak.py). Each report
carries one history marker, an HTML comment with its history row's cells (run date, commit, key figures).

Publishing (``bash scripts/publish_reports.sh``, i.e. ``python -m ctas_devstack.reports``) is done on
purpose: for every report that exists under build/reports/, docs/<name>.md := the report's body
(the marker removed), the images it links copied beside it, then a ``## History`` table of the
published file's earlier rows and the report's own. Measurements live in these reports, one per
kind, never in dated copies or in prose.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILD_REPORTS = REPO / "build" / "reports"
DOCS = REPO / "docs"
HISTORY = "## History"
_MARKER = re.compile(r"<!-- history: (.*?) -->\n?")
_ROW = re.compile(r"^\| \d{4}-.*\|$", re.MULTILINE)
_IMAGE = re.compile(r"!\[[^\]]*\]\(([^()/:]+\.(?:png|svg))\)")

_RUNS_NOTE = (
    "Published runs: the commit a run measured (`+changes`: with uncommitted changes to the provider "
    "or the harness); for the runs seeded from the dated copies this report replaced, the commit that "
    "checked that copy in. "
)
_RATIOS_NOTE = (
    "The ratios are the first table's 'vs baseline': per size, the median over the run's rounds of "
    "each approach's wall time over its plain baseline's in the same round (runs from before "
    "2026-11-28 23:00: each approach's median wall time over its baseline's median). The machine's "
    "speed moves between runs: compare within a row, not seconds across rows."
)


@dataclass(frozen=True)
class Kind:
    """One kind of report: build/reports/<name>.md, published as docs/<name>.md."""

    name: str
    columns: tuple[str, ...]
    note: str

    @property
    def report(self) -> Path:
        return BUILD_REPORTS / f"{self.name}.md"

    @property
    def published(self) -> Path:
        return DOCS / f"{self.name}.md"


RELIABILITY = Kind(
    "reliability",
    ("run (UTC)", "commit", "matrix cells", "passed", "failed"),
    "Published runs (the commit a run tested; before 2026-11-27, the commit that checked its report in).\n"
    "'passed' and 'failed' count every row, the format sections' included.",
)
BENCHMARKS = Kind(
    "benchmarks",
    ("run (UTC)", "commit", "sizes (repeats)", "median wall / baseline"),
    _RUNS_NOTE + _RATIOS_NOTE,
)
FORMATS = Kind(
    "formats",
    ("run (UTC)", "commit", "sizes (repeats)", "median wall / baseline"),
    _RUNS_NOTE + _RATIOS_NOTE + " Each Iceberg or Delta approach's baseline is the plain statement of its format.",
)
PROFILE = Kind(
    "profile",
    ("run (UTC)", "commit", "rows", "phases per approach, as the driver timed them (s)"),
    _RUNS_NOTE + "'driver' is the seconds of the driver's main thread under py-spy.",
)
TEST_TIMES = Kind(
    "test-times",
    ("run (UTC)", "commit", "selection (-m)", "tests", "wall (min)", "worker-seconds per lane"),
    "Published runs: the commit a run tested and which tests it selected. The default run of "
    "`bash scripts/test.sh` is `not unit and not bench` after the fast gate; its wall time here "
    "excludes setup and the gate.",
)
DURABLE = Kind(
    "durable",
    ("run (UTC)", "commit", "rows (rounds)", "retry: recomputed -> adopted (median s, ratio)"),
    _RUNS_NOTE + "The retry of a replace whose worker was lost after its write, without and with durable=True.",
)
SOAK = Kind(
    "soak",
    (
        "run (UTC)",
        "commit",
        "runs (tables)",
        "broke an invariant",
        "published by a failed try after its commit decision",
    ),
    "Published runs of the chaos soak (tests/soak/test_soak.py): the commit a run tested; runs before"
    " 2026-11-30 were all of file-format tables.",
)
METASTORE_CALLS = Kind(
    "metastore-calls",
    ("run (UTC)", "commit", "calls per operation: provider / plain statement"),
    _RUNS_NOTE + "The Thrift calls a metastore service received, counted in front of it; they do not depend "
    "on the machine's speed.",
)
KINDS = (RELIABILITY, BENCHMARKS, FORMATS, PROFILE, TEST_TIMES, DURABLE, SOAK, METASTORE_CALLS)


def stamp(iso: str | None = None) -> str:
    """A run's date as its history row shows it (UTC, to the minute): now, or an ISO 8601 timestamp's."""
    moment = datetime.now(UTC) if iso is None else datetime.fromisoformat(iso).astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M")


def commit(*paths: str) -> str:
    """``git rev-parse --short HEAD``, with ``+changes`` when the tree has uncommitted changes under ``paths``."""
    git = shutil.which("git") or "git"
    found = subprocess.run([git, "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False)
    dirty = subprocess.run(
        [git, "status", "--porcelain", "--", *paths], cwd=REPO, capture_output=True, text=True, check=False
    )
    return (found.stdout.strip() or "unknown") + ("+changes" if dirty.stdout.strip() else "")


def marker(kind: Kind, cells: Sequence[str]) -> str:
    """The line a report carries for its history row: one cell per column of ``kind``'s table."""
    if len(cells) != len(kind.columns):
        raise ValueError(f"{kind.name}'s history has {len(kind.columns)} columns, not {len(cells)}: {cells}")
    for cell in cells:
        if "|" in cell or "-->" in cell or "\n" in cell or not cell.strip():
            raise ValueError(f"not a history cell: {cell!r}")
    return f"<!-- history: {' | '.join(cells)} -->"


def entry(report: str) -> str | None:
    """The history row a report's marker stands for, if it has one."""
    found = _MARKER.search(report)
    return f"| {found.group(1)} |" if found else None


def body(text: str) -> str:
    """A report without its marker and without a history table."""
    return _MARKER.sub("", text).split("\n" + HISTORY + "\n", 1)[0].rstrip("\n") + "\n"


def rows(published: str) -> list[str]:
    """The rows of a published report's history table."""
    if "\n" + HISTORY + "\n" not in published:
        return []
    return _ROW.findall(published.split("\n" + HISTORY + "\n", 1)[1])


def history(kind: Kind, history_rows: Sequence[str]) -> str:
    header = "| " + " | ".join(kind.columns) + " |"
    rule = "|" + "---|" * len(kind.columns)
    return "\n".join([HISTORY, "", kind.note, "", header, rule, *history_rows]) + "\n"


def current(report: Path) -> str:
    """A report's text, to add a section to or keep sections from: the file's; for a report under
    build/reports/ not written yet, the published one's body (a section it has is then not lost at
    the next publish); else nothing."""
    if report.exists():
        return report.read_text()
    published = DOCS / report.name
    if report.resolve().parent == BUILD_REPORTS.resolve() and published.exists():
        return body(published.read_text())
    return ""


def publish(kind: Kind, report: Path | None = None, published: Path | None = None) -> int:
    """``published`` := ``report``'s body, the images it links copied beside it, then the history
    table: the earlier rows kept, this report's row added (unless it has no marker, or that very
    row is there already). Returns how many rows the history has."""
    report = report or kind.report
    published = published or kind.published
    text = report.read_text()
    earlier = published.read_text() if published.exists() else ""
    history_rows = rows(earlier)
    row = entry(text)
    if row is not None and row not in history_rows:
        history_rows.append(row)
    for name in _IMAGE.findall(text):
        if (report.parent / name).exists():
            shutil.copyfile(report.parent / name, published.parent / name)
    published.parent.mkdir(parents=True, exist_ok=True)
    published.write_text(body(text) + "\n" + history(kind, history_rows))
    return len(history_rows)


def main() -> int:
    """Publish every report that exists under build/reports/."""
    published = 0
    for kind in KINDS:
        if kind.report.exists():
            count = publish(kind)
            published += 1
            print(f"{kind.published} updated from {kind.report} ({count} runs in its history)")
    if not published:
        names = ", ".join(kind.report.name for kind in KINDS)
        print(f"no report under {BUILD_REPORTS} ({names}): run the fault tests (bash scripts/test.sh -m faults)"
              " or the benchmarks (bash benchmarks/run.sh) first", file=sys.stderr)  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
