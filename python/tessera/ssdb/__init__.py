"""The SS-DB benchmark (docs/ssdb.md) from Python: ``python -m tessera.ssdb run --config micro --dir DIR``.

The benchmark is written in Rust (crate ``tessera-ssdb``) and reached through the ``tessera``
command, which ``make build`` installs next to this interpreter: the extension module does not
link the benchmark (it would add the generator, cooking and grouping to every ``import
tessera``), and a separate process also gives the run its own peak memory figure. The sky tiles
recipe (``tessera.ssdb.tiles``) is the one part in Python, because it is defined by numpy's
random generators.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import List, NoReturn, Optional


def tessera_binary() -> str:
    """The ``tessera`` command: ``$TESSERA_BIN``, else the one next to this Python, else on PATH."""
    env = os.environ.get("TESSERA_BIN")
    if env:
        return env
    here = Path(sys.executable).parent / "tessera"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("tessera")
    if found:
        return found
    raise FileNotFoundError(
        "the tessera command is not installed next to this Python nor on PATH: run `make build`, "
        "or set TESSERA_BIN to its path"
    )


def main(argv: Optional[List[str]] = None) -> NoReturn:
    """Runs ``tessera ssdb ARGS`` in place of this process (same exit status and output)."""
    args = sys.argv[1:] if argv is None else argv
    exe = tessera_binary()
    env = dict(os.environ)
    # The tiles recipe needs numpy: this interpreter has it.
    env.setdefault("TESSERA_SSDB_PYTHON", sys.executable)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(exe, [exe, "ssdb", *args], env)
