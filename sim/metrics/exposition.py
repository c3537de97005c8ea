"""One scrape of metrics.parquet as a Prometheus text-format page (exposition format 0.0.4).

The page is what a vLLM 0.33 server's /metrics would show for the simulated engines: the families
of sim.metrics.prometheus in their order, each with `# HELP` and `# TYPE` lines, every sample
labelled `engine` (the replica) and `model_name`, labels in name order as prometheus_client
writes them. vLLM's `<name>_created` gauges (wall-clock creation times) have no simulated
counterpart and are left out.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from sim.errors import InputError
from sim.metrics.prometheus import FAMILIES, FAMILY_BY_SAMPLE_NAME, HISTOGRAM, Family

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    if value == float("-inf"):
        return "-Inf"
    return repr(float(value))


def scrape_times(metrics_path: Path) -> list[float]:
    """The scrape times in metrics.parquet, ascending."""
    table = _read(metrics_path, ["at"])
    return sorted(set(table.column("at").to_pylist()))


def _read(metrics_path: Path, columns: list[str] | None = None):
    try:
        return pq.read_table(metrics_path, columns=columns)
    except (OSError, ValueError) as error:
        raise InputError(f"cannot read the metrics: {error}", source=str(metrics_path)) from None


def prometheus_text(metrics_path: Path, model_name: str, at: float | None = None) -> str:
    """The page of the last scrape at or before `at` (default: the run's last scrape)."""
    times = scrape_times(metrics_path)
    eligible = [time for time in times if at is None or time <= at]
    if not eligible:
        first = f"; the first is at {times[0]:g} s" if times else ""
        raise InputError(f"no scrape at or before {at:g} s{first}", source=str(metrics_path))
    scrape_at = eligible[-1]
    table = _read(metrics_path)
    # Loaded here: pyarrow.compute costs 0.1 s to import, and only this command needs it.
    import pyarrow.compute as pc

    rows = table.filter(pc.equal(table.column("at"), scrape_at)).to_pylist()
    rows_by_family: dict[Family, list[dict]] = {family: [] for family in FAMILIES}
    for row in rows:
        family = FAMILY_BY_SAMPLE_NAME.get(row["name"])
        if family is None:
            raise InputError(
                f"unknown series {row['name']!r} at {scrape_at:g} s", source=str(metrics_path)
            )
        rows_by_family[family].append(row)
    model = _escape(model_name)
    lines: list[str] = []
    for family, family_rows in rows_by_family.items():
        declared = family.name if family.kind == HISTOGRAM else family.sample_name
        lines.append(f"# HELP {declared} {family.help}")
        lines.append(f"# TYPE {declared} {family.kind}")
        for row in sorted(family_rows, key=lambda row: row["replica"]):
            labels = {"engine": str(row["replica"]), "model_name": model}
            if row["le"] is not None:
                labels["le"] = row["le"]
            if row["finished_reason"] is not None:
                labels["finished_reason"] = row["finished_reason"]
            text = ",".join(f'{name}="{labels[name]}"' for name in sorted(labels))
            lines.append(f"{row['name']}{{{text}}} {_number(row['value'])}")
    return "\n".join(lines) + "\n"
