"""Types of the compiled token-stream kernel (workloads/src/token_streams.cpp)."""

import numpy as np
import numpy.typing as npt

def fill_streams(
    seeds: npt.NDArray[np.uint64],
    lengths: npt.NDArray[np.int64],
    vocab_size: int,
    out: npt.NDArray[np.int64],
) -> None: ...
