"""Rendering a run as Markdown: the machine, then one table per benchmark section.

Each gatewayd figure is one row: its value, the baselines measured in the same run with the
ratio to each (gatewayd / baseline), and the issue's target with whether it was met. Baselines
have no row of their own; they appear in the rows that compare with them.
"""

from __future__ import annotations

from typing import Any

from bench.harness import Figure, Section
from bench.machine import markdown as machine_markdown


def fmt(value: float, unit: str) -> str:
    """``172k/s``, ``1.10M/s``, ``12.3 ms``, ``41.2 MiB``: short, with the unit."""
    if unit.endswith("/s"):
        suffix = "/s" if unit == "events/s" else f" {unit}"
        if value >= 1e6:
            return f"{value / 1e6:.2f}M{suffix}"
        if value >= 1e4:
            return f"{value / 1e3:.0f}k{suffix}"
        if value >= 1e3:
            return f"{value / 1e3:.1f}k{suffix}"
        return f"{value:.0f}{suffix}"
    if unit == "ms" and value >= 1000:
        return f"{value / 1000:.2f} s"
    if unit in ("ms", "us"):
        if value >= 100:
            return f"{value:.0f} {unit}"
        return f"{value:.1f} {unit}" if value >= 10 else f"{value:.2f} {unit}"
    if unit == "MiB":
        return f"{value:.1f} MiB"
    return f"{value:g} {unit}"


def ratio(value: float) -> str:
    return f"{value:.2f}x" if value < 10 else f"{value:.1f}x"


def _spread(fig: Figure) -> str:
    d = fig.detail
    samples = int(d.get("samples", 0))
    parts = []
    if samples >= 10 and "p95" in d:
        parts.append(f"p95 {fmt(float(d['p95']), fig.unit)}")
    if samples > 1:
        parts.append(f"n={samples}")
    return ", ".join(parts)


def _row(section: Section, fig: Figure) -> str:
    value = f"**{fmt(fig.value, fig.unit)}**"
    if spread := _spread(fig):
        value += f" ({spread})"
    bases = "<br>".join(
        f"{base.label} {fmt(base.value, base.unit)}: **{ratio(r)}**"
        for base, r in section.ratios(fig)
    )
    target = "—" if fig.target is None else f"{fig.target.text} {'✅' if fig.met else '❌'}"
    return f"| {fig.label} | {value} | {bases or '—'} | {target} |"


def section_markdown(section: Section) -> str:
    lines = [f"### {section.title}", ""]
    if section.pending:
        lines.append(f"Not measured yet: {section.pending}")
        return "\n".join(lines)
    lines += [
        "| measurement | gatewayd | baselines, same run: value: ratio | target |",
        "|---|---|---|---|",
    ]
    lines += [_row(section, fig) for fig in section.figures if not section.is_baseline(fig)]
    if section.notes:
        lines.append("")
        lines += [f"- {note}" for note in section.notes]
    return "\n".join(lines)


def short_title(section: Section) -> str:
    """``1. Dispatch throughput`` from ``1. Dispatch throughput (no-op ...)``."""
    return section.title.split(" (")[0].split(":")[0]


def summary_markdown(sections: list[Section]) -> str:
    """One table of every figure with a target or marked as a headline (the table of
    docs/operations.md, "Performance")."""
    lines = [
        "| benchmark | measurement | gatewayd | baselines, same run: value: ratio | target |",
        "|---|---|---|---|---|",
    ]
    for section in sections:
        if section.pending:
            lines.append(f"| {short_title(section)} | not measured: {section.pending} | | | |")
            continue
        for fig in section.figures:
            if fig.target is not None or fig.headline:
                lines.append(f"| {short_title(section)} {_row(section, fig)}")
    return "\n".join(lines)


def document(run: dict[str, Any], sections: list[Section]) -> str:
    """The whole ``latest.md``: machine, summary, then every section in full."""
    header = [
        "# gatewayd benchmarks",
        "",
        f"`make bench` on {run['date']} ({run['scale']} scale, {run['seconds']:.0f} s; load "
        f"average {' / '.join(map(str, run.get('load_average_end', [])))} at the end). Every "
        "gatewayd figure is shown beside its baselines measured in the same run; ratio = "
        "gatewayd / baseline (above 1 is better for rates, below 1 for times and sizes).",
        "",
        machine_markdown(run["machine"]),
        "",
        "## Summary",
        "",
        summary_markdown(sections),
        "",
        "## Details",
        "",
    ]
    return "\n".join([*header, "\n\n".join(section_markdown(s) for s in sections), ""])
