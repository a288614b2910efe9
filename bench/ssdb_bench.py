"""SS-DB benchmark (``make ssdb-bench CONFIG=tiny``): load, cook, group and query one configuration.

Runs ``tessera ssdb run --config CONFIG --dir DIR`` into a fresh DIR under ``/usr/bin/time -v``
(peak memory of the whole process), reads DIR/report.json, and writes a table of the timings
per cycle and in total, the query totals per start set, peak memory, bytes on disk and the
compression ratio into docs/ssdb.md between the markers ``<!-- ssdb-bench:CONFIG -->`` and
``<!-- /ssdb-bench:CONFIG -->`` (added at the end of the "Benchmark" section when missing).
Usage: ``python bench/ssdb_bench.py --config tiny --dir target/ssdb/tiny --binary
target/release/tessera``.

With ``--baselines postgres,tiledb`` (what ``make ssdb-bench`` passes) the same configuration is
also run by the PostgreSQL/PostGIS and TileDB-Py baselines (``python -m tessera.ssdb.postgres``,
``python -m tessera.ssdb.tiledb_baseline``, in DIR-postgres and DIR-tiledb), every count and
checksum of the three reports is compared (any difference stops the benchmark), and the paper's
Table I (Load, Obsv, Group, L+C, Q1-Q9, Q total; seconds, start set ``spec``) with the ratios
to Tessera goes into docs/ssdb.md between ``<!-- ssdb-table1:CONFIG -->`` markers, with a bar
chart in ``docs/ssdb/table1_CONFIG.png``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
from typing import Any, Dict, List

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "ssdb.md"


def run(binary: str, config: str, store: pathlib.Path) -> Dict[str, Any]:
    if store.exists():
        shutil.rmtree(store)
    store.parent.mkdir(parents=True, exist_ok=True)
    cmd = [binary, "ssdb", "run", "--config", config, "--dir", str(store)]
    timer = shutil.which("time") or "/usr/bin/time"
    peak = None
    if os.path.exists(timer):
        p = subprocess.run([timer, "-v", *cmd], capture_output=True, text=True)
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
        peak = int(m.group(1)) * 1024 if m else None
    else:
        p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(p.returncode)
    report: Dict[str, Any] = json.loads((store / "report.json").read_text())
    report["_peak_rss"] = peak or report.get("memory", {}).get("peak_rss_bytes", 0)
    return report


def table(config: str, r: Dict[str, Any]) -> str:
    s = r["seconds"]
    st = r["storage"]
    lines: List[str] = [
        f"`make ssdb-bench CONFIG={config}` on {datetime.date.today().isoformat()} "
        f"({os.cpu_count()} cores; seconds; load excludes generation, given apart):",
        "",
        "| cycle | generate | load | cook | group |",
        "|---|---|---|---|---|",
    ]
    for c in s["cycles"]:
        lines.append(f"| {c['cycle']} | {c['generate']:.3f} | {c['load']:.3f} | {c['cook']:.3f} | {c['group']:.4f} |")
    lines.append(
        f"| **total** | {s['generate']:.2f} | {s['load']:.2f} | {s['cook']:.2f} | {s['group']:.3f} |"
    )
    mb = 1e6
    lines += [
        "",
        f"- load + cook + group: **{s['total']:.2f} s**; F1' for verification {s['F1prime']:.2f} s",
        f"- generator: {st['images_raw_bytes'] / 44 / max(s['generate'], 1e-9) / 1e6:.0f} million cells/s "
        f"(inside the load, both threads)",
        f"- peak memory (max RSS of the process{', queries included' if 'queries' in s else ''}): "
        f"{r['_peak_rss'] / mb:.0f} MB",
        f"- raw images {st['images_raw_bytes'] / mb:.0f} MB, on disk {st['images_bytes'] / mb:.1f} MB "
        f"(ratio {st['images_compression_ratio']:.2f}); whole store {st['store_bytes'] / mb:.1f} MB",
        f"- F1 {r['F1']['count']} observations, F1' {r['F1prime']['count']}, "
        f"F2 {r['F2']['groups']} groups ({r['F2']['multi_member_groups']} with several members)",
    ]
    q = s.get("queries")
    if q:
        sets = list(q)
        lines += [
            "",
            "Queries (seconds, total of the 15 cold runs; start sets of SSDB.md §5/§6):",
            "",
            "| set | " + " | ".join(f"Q{i}" for i in range(1, 10)) + " | total |",
            "|---|" + "---|" * 10,
        ]
        for name in sets:
            v = q[name]
            lines.append(
                f"| {name} | " + " | ".join(f"{v[f'Q{i}']:.3f}" for i in range(1, 10)) + f" | {v['total']:.2f} |"
            )
    return "\n".join(lines)


BASELINES = {"postgres": "tessera.ssdb.postgres", "tiledb": "tessera.ssdb.tiledb_baseline"}
LABELS = {"tessera": "Tessera", "postgres": "PostgreSQL+PostGIS", "tiledb": "TileDB-Py"}
COLUMNS = ["Load", "Obsv", "Group", "L+C"] + [f"Q{i}" for i in range(1, 10)] + ["Q total"]


def run_baseline(name: str, config: str, store: pathlib.Path) -> Dict[str, Any]:
    if store.exists():
        shutil.rmtree(store)
    store.mkdir(parents=True)
    cmd = [sys.executable, "-m", BASELINES[name], "--config", config, "--dir", str(store)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(f"the {name} baseline failed (exit {p.returncode})")
    report: Dict[str, Any] = json.loads((store / "report.json").read_text())
    return report


def answers(r: Dict[str, Any]) -> Dict[str, Any]:
    """Every count and checksum of a report (no timings)."""
    out = {k: r[k] for k in ("F1", "F1prime", "F2")}
    for which, v in r.get("queries", {}).items():
        out[which] = [{k: run[k] for k in run if k.startswith("Q") or k in ("run", "X", "Y", "cycles")}
                      for run in v["runs"]]
    return out


def row(r: Dict[str, Any], which: str = "spec") -> List[float]:
    s = r["seconds"]
    q = s["queries"][which]
    return [s["load"], s["cook"], s["group"], s["load"] + s["cook"] + s["group"]] + [
        q[f"Q{i}"] for i in range(1, 10)] + [q["total"]]


def table1(config: str, reports: Dict[str, Dict[str, Any]]) -> str:
    rows = {n: row(r) for n, r in reports.items()}
    lines = [
        f"Table I on `{config}` ({datetime.date.today().isoformat()}, {os.cpu_count()} cores, one run; seconds; "
        "queries: total of the 15 cold runs of start set `spec`; every count and checksum equal in the three):",
        "",
        "| system | " + " | ".join(COLUMNS) + " |",
        "|---|" + "---|" * len(COLUMNS),
    ]
    for n, v in rows.items():
        lines.append(f"| {LABELS[n]} | " + " | ".join(f"{x:.3g}" for x in v) + " |")
    base = rows["tessera"]
    for n, v in rows.items():
        if n != "tessera":
            lines.append(f"| {LABELS[n]} / Tessera | " + " | ".join(
                f"{a / b:.1f}x" if b > 0 else "n/a" for a, b in zip(v, base)) + " |")
    return "\n".join(lines)


def chart(config: str, reports: Dict[str, Dict[str, Any]]) -> pathlib.Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = ROOT / "docs" / "ssdb" / f"table1_{config}.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(11, 4))
    width = 0.8 / len(reports)
    for k, (n, r) in enumerate(reports.items()):
        v = row(r)
        ax.bar([i + k * width for i in range(len(COLUMNS))], [max(x, 1e-4) for x in v], width, label=LABELS[n])
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(COLUMNS))])
    ax.set_xticklabels(COLUMNS, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("seconds (log)")
    ax.set_title(f"SS-DB Table I, {config}: load, cook, group and the 15 cold runs of each query")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def write_block(tag: str, config: str, text: str) -> None:
    start, end = f"<!-- {tag}:{config} -->", f"<!-- /{tag}:{config} -->"
    doc = DOC.read_text()
    block = f"{start}\n{text}\n{end}"
    if start in doc and end in doc:
        doc = doc[: doc.index(start)] + block + doc[doc.index(end) + len(end) :]
    else:
        doc = doc.rstrip("\n") + "\n\n" + block + "\n"
    DOC.write_text(doc)


def write_doc(config: str, text: str) -> None:
    start, end = f"<!-- ssdb-bench:{config} -->", f"<!-- /ssdb-bench:{config} -->"
    block = f"{start}\n{text}\n{end}"
    doc = DOC.read_text() if DOC.exists() else "# SS-DB on Tessera\n\n## Benchmark\n"
    if start in doc and end in doc:
        doc = doc[: doc.index(start)] + block + doc[doc.index(end) + len(end) :]
    elif "## Benchmark" in doc:
        # At the end of the Benchmark section (before the next "## " heading).
        i = doc.index("## Benchmark")
        j = doc.find("\n## ", i + 1)
        j = len(doc) if j < 0 else j + 1
        doc = doc[:j].rstrip("\n") + "\n\n" + block + "\n\n" + doc[j:]
    else:
        doc = doc.rstrip("\n") + "\n\n## Benchmark\n\n" + block + "\n"
    DOC.write_text(doc.rstrip("\n") + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="tiny")
    ap.add_argument("--dir", default=None, help="store folder (default target/ssdb/CONFIG), removed first")
    ap.add_argument("--binary", default=str(ROOT / "target" / "release" / "tessera"))
    ap.add_argument("--no-docs", action="store_true", help="print the table only")
    ap.add_argument("--baselines", default="", help="comma-separated: postgres, tiledb (Table I beside them)")
    ap.add_argument(
        "--reuse-baselines",
        action="store_true",
        help="take a baseline's DIR-NAME/report.json of the same configuration when there is one "
        "(a long baseline run made apart, e.g. `make ssdb-postgres CONFIG=very-small`) instead of "
        "running it again; Table I then says which reports were reused and when they were made",
    )
    a = ap.parse_args()
    store = pathlib.Path(a.dir) if a.dir else ROOT / "target" / "ssdb" / a.config
    report = run(a.binary, a.config, store)
    text = table(a.config, report)
    print(text)
    if not a.no_docs:
        write_doc(a.config, text)
    names = [n for n in a.baselines.split(",") if n]
    if not names:
        return
    reports: Dict[str, Dict[str, Any]] = {"tessera": report}
    reused: List[str] = []
    for n in names:
        if n not in BASELINES:
            raise SystemExit(f"unknown baseline {n!r} (known: {', '.join(BASELINES)})")
        bdir = (store.parent / f"{store.name}-{n}").resolve()
        old = bdir / "report.json"
        if a.reuse_baselines and old.exists() and json.loads(old.read_text()).get("config") == a.config:
            reports[n] = json.loads(old.read_text())
            made = datetime.datetime.fromtimestamp(old.stat().st_mtime).strftime("%Y-%m-%d %H:%M")
            reused.append(f"{LABELS[n]}'s report was made apart (finished {made}) and reused")
        else:
            reports[n] = run_baseline(n, a.config, bdir)
        mine, theirs = answers(report), answers(reports[n])
        for key in mine:
            if mine[key] != theirs.get(key):
                raise SystemExit(f"{n} disagrees with Tessera on {key}: the benchmark stops")
    t1 = table1(a.config, reports)
    if reused:
        t1 += "\n\n" + "; ".join(reused) + " (`--reuse-baselines`); its counts and checksums were compared as above."
    print(t1)
    if not a.no_docs:
        png = chart(a.config, reports)
        write_block("ssdb-table1", a.config, t1 + f"\n\n![Table I on {a.config}](ssdb/{png.name})")


if __name__ == "__main__":
    main()
