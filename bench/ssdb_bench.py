"""SS-DB benchmark (``make ssdb-bench CONFIG=tiny``): load, cook, group and query one configuration.

Runs ``tessera ssdb run --config CONFIG --dir DIR`` into a fresh DIR under ``/usr/bin/time -v``
(peak memory of the whole process), reads DIR/report.json, and writes a table of the timings
per cycle and in total, the query totals per start set, peak memory, bytes on disk and the
compression ratio into docs/ssdb.md between the markers ``<!-- ssdb-bench:CONFIG -->`` and
``<!-- /ssdb-bench:CONFIG -->`` (added at the end of the "Benchmark" section when missing).
Usage: ``python bench/ssdb_bench.py --config tiny --dir target/ssdb/tiny --binary
target/release/tessera``.
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
    a = ap.parse_args()
    store = pathlib.Path(a.dir) if a.dir else ROOT / "target" / "ssdb" / a.config
    report = run(a.binary, a.config, store)
    text = table(a.config, report)
    print(text)
    if not a.no_docs:
        write_doc(a.config, text)


if __name__ == "__main__":
    main()
