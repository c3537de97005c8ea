"""plan.png: each SLO metric against the searched value, with the limit and the answer."""

from __future__ import annotations

from matplotlib.figure import Figure

from sim.studies.plan import PlanResult, format_quantity, format_value

_LABELS = {"rate": "arrival rate (arrivals/s)", "replicas": "replicas", "kv-memory": "KV GiB/GPU"}


def plan_figure(result: PlanResult) -> Figure:
    """One panel per SLO: probes (feasible o, infeasible x, unstable in orange), the limit."""
    slos = result.slos
    figure = Figure(figsize=(6.4, 2.2 + 2.4 * len(slos)), layout="constrained")
    axes_list = figure.subplots(len(slos), 1, squeeze=False)[:, 0]
    probes = sorted(result.probes, key=lambda probe: probe.value)
    for axes, slo in zip(axes_list, slos, strict=True):
        # Log scale: a metric of 0 (e.g. no queueing at all) cannot be drawn.
        measured = [probe for probe in probes if (probe.metrics_s[slo.metric] or 0.0) > 0]
        axes.plot(
            [probe.value for probe in measured],
            [probe.metrics_s[slo.metric] for probe in measured],
            color="0.6",
            linewidth=1,
            zorder=1,
        )
        for probe in measured:
            value = probe.metrics_s[slo.metric]
            if probe.feasible:
                axes.scatter(probe.value, value, marker="o", color="tab:green", zorder=2)
            else:
                color = "tab:red" if probe.stable else "tab:orange"
                axes.scatter(probe.value, value, marker="x", color=color, zorder=2)
        axes.axhline(slo.limit_s, color="tab:red", linestyle="--", linewidth=1)
        axes.annotate(
            f"SLO {slo.limit_s:g} s",
            (0.01, slo.limit_s),
            xycoords=("axes fraction", "data"),
            textcoords="offset points",
            xytext=(0, 3),
            color="tab:red",
            fontsize=8,
        )
        if result.answer is not None:
            axes.axvline(result.answer, color="tab:green", linestyle=":", linewidth=1)
        axes.set_yscale("log")
        axes.set_ylabel(f"{slo.metric} (s)")
        axes.set_xlabel(_LABELS[result.settings.find])
        axes.grid(True, which="both", alpha=0.3)
    figure.suptitle(_title(result), fontsize=10)
    return figure


def _title(result: PlanResult) -> str:
    find = result.settings.find
    if result.answer is None:
        return f"{result.scenario}: no {find} probed meets the SLOs"
    goal = "largest" if find == "rate" else "smallest"
    bound = (
        ""
        if result.infeasible_bound is None
        else f" (infeasible at {format_value(result.infeasible_bound, find)})"
    )
    legend = "o feasible, x over SLO (red) or unstable (orange)"
    return (
        f"{result.scenario}: {goal} {find} meeting the SLOs = "
        f"{format_quantity(result.answer, find)}{bound}\n{legend}"
    )
