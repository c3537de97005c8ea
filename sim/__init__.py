"""prefixsim: a discrete-event simulator of vLLM v1 prefix caching under load.

Docstrings cite the project's docs/: `spec §N` is docs/spec.md, `cost_model.md §N` and
`replay_formats.md §N` the files of those names there.
"""

import os

__version__ = "0.1.0"

# The only linear algebra here is tiny least-squares fits (a run's stability trends, cost-model
# fits); OpenBLAS's worker threads would busy-wait after each one, burning CPU a run is timed
# by. Read when numpy loads, so set before any submodule imports it; a caller's choice stands.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# Arrow's default mimalloc pool takes fresh (huge) pages for each parquet batch a run writes,
# and the kernel zeroes every one: about a third of a second of system time in an hour of
# chat. The system allocator reuses freed memory. Read when pyarrow makes its default pool.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
