"""A run over replicas as text (report.txt, at most 80 columns where the replicas fit)
and Markdown (report.md): per primary metric the pooled change with its interval, the
heterogeneity tau, the verdict with how many replicas agree, and each replica's own
change beside it; then the replicas left out and why."""

from __future__ import annotations

from napilab.reports.fleet.table import FleetTable, pct


def _rows(fleet: FleetTable) -> tuple[list[str], list[list[str]]]:
    head = ["metric", "variant", "pooled change (95% CI)", "tau", "verdict",
            *fleet.replicas]
    rows = []
    for line in fleet.lines:
        unit = f" ({line.unit})" if line.unit and f"({line.unit})" not in line.label else ""
        if line.pooled is not None:
            low, high = line.pooled.ci
            pooled = f"{pct(line.pooled.change)} [{pct(low)}, {pct(high)}]"
            tau = line.pooled.tau
            tau_text = f"{tau:.3f}" if tau is not None else "-"
        else:
            pooled, tau_text = "-", "-"
        k = len([r for r in line.replicas if r.change is not None])
        agree = line.better if line.verdict == "better" else line.worse \
            if line.verdict == "worse" else None
        verdict = line.verdict + (f" {agree}/{k}" if agree is not None else "")
        own = {r.replica: pct(r.change) for r in line.replicas}
        rows.append([f"{line.label}{unit}", f"{line.variant} vs {line.baseline}", pooled,
                     tau_text, verdict, *(own.get(name, "-") for name in fleet.replicas)])
    return head, rows


def text(fleet: FleetTable) -> str:
    manifest = fleet.manifest
    out = [f"{manifest.profile.name}: run {manifest.run_id} over {len(fleet.replicas)} "
           f"replicas ({', '.join(fleet.replicas) or 'none'}), {manifest.status}", ""]
    head, rows = _rows(fleet)
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows, strict=True)]
    for row in (head, *rows):
        out.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True))
                   .rstrip())
    out.append("")
    out.append("pooled: a random-effects model over the replicas' log changes (between-"
               "replica")
    out.append("heterogeneity tau estimated; Hartung-Knapp interval); Holm over the "
               "primary metrics")
    for name, why in fleet.absent.items():
        out.append(f"replica {name} is not pooled: {why}")
    return "\n".join(out) + "\n"


def markdown(fleet: FleetTable) -> str:
    manifest = fleet.manifest
    head, rows = _rows(fleet)
    out = [f"## {manifest.profile.name}: {len(fleet.replicas)} replicas", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    out.append("")
    out += [f"- replica {name} is not pooled: {why}" for name, why in fleet.absent.items()]
    return "\n".join(out) + "\n"
