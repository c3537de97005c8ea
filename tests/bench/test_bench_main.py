"""`python -m sim.bench`: the figure table, the Done-when lines and benchmark selection."""

from __future__ import annotations

import pytest

from sim.bench import Figure
from sim.bench import __main__ as bench_main
from sim.bench.targets import TARGETS, Target, target_lines


def test_main_prints_a_table_and_rejects_unknown_names(monkeypatch, capsys):
    """Every figure of every benchmark is printed with its unit; an unknown name exits 2."""
    monkeypatch.setattr(
        bench_main, "BENCHMARKS", {"fake": lambda: {"widget speed": Figure(12345.678, "widgets/s")}}
    )
    assert bench_main.main([]) == 0
    printed = capsys.readouterr().out
    assert "widget speed" in printed
    assert "12,346" in printed
    assert "widgets/s" in printed
    assert bench_main.main(["nope"]) == 2
    assert "unknown benchmark 'nope'; known: fake" in capsys.readouterr().err


def test_main_runs_only_the_named_benchmarks_and_checks_their_targets(monkeypatch, capsys):
    """Naming `cache` runs it alone; its target line says PASS with the measured ratio, and
    the targets of benchmarks that did not run are not printed."""
    ran: list[str] = []

    def benchmark(name: str, figures: dict[str, Figure]):
        def run() -> dict[str, Figure]:
            ran.append(name)
            return figures

        return run

    monkeypatch.setattr(
        bench_main,
        "BENCHMARKS",
        {
            "cache": benchmark("cache", {"replay / hashing time": Figure(2.5, "x")}),
            "engine": benchmark("engine", {"simulated per wall second": Figure(5.0, "x")}),
        },
    )
    assert bench_main.main(["cache"]) == 0
    assert ran == ["cache"]
    lines = capsys.readouterr().out.splitlines()
    assert (
        "PASS  cache replay within 3x of the hash-only floor: cache replay / hashing time = 2.5 x"
        in lines
    )
    assert not any("real time" in line for line in lines)


@pytest.mark.parametrize(
    ("value", "verdict"), [(999.9, "FAIL"), (1000.0, "PASS"), (1234.5, "PASS")]
)
def test_lower_bound_target(value, verdict):
    """The engine target needs at least 1000x real time."""
    results = {"engine": {"simulated per CPU second": Figure(value, "x real time")}}
    lines = target_lines(results, bench_main.format_figure, TARGETS[:1])
    assert lines == [
        f"{verdict}  1 h of 20 req/s chat simulates at least 1000x faster than real time: "
        f"engine simulated per CPU second = {bench_main.format_figure(value)} x real time"
    ]


def test_range_target_and_a_missing_figure():
    """A two-sided bound fails on either side; a figure the benchmark did not report fails."""
    target = Target("rate near 20", "engine", "rate", low=19.0, high=21.0)
    assert [target.is_met(value) for value in (18.9, 19.0, 21.0, 21.1)] == [
        False,
        True,
        True,
        False,
    ]
    lines = target_lines({"engine": {}}, bench_main.format_figure, (target,))
    assert lines == ["FAIL  rate near 20: engine did not report 'rate'"]


def test_every_target_names_a_registered_benchmark():
    assert {target.benchmark for target in TARGETS} <= set(bench_main.BENCHMARKS)
