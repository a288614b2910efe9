"""``python -m tessera.ssdb run --config micro --dir DIR``: the same as ``tessera ssdb run ...``."""

from tessera.ssdb import main

main()
