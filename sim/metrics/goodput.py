"""Goodput as vLLM's benchmark defines it (`--goodput ttft:MS tpot:MS e2el:MS`): requests per
second that meet every given service-level objective.

A request is good when its TTFT, its TPOT ((e2e - TTFT) / (output tokens - 1), 0 for a single
output token) and its end-to-end latency are each at most the limit given for it; limits not
given do not apply. prefixsim divides the good measured requests by the measured window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sim.errors import InputError
from sim.metrics.records import RequestColumns

# vLLM's benchmark names: ttft, tpot and e2el, in milliseconds.
GOODPUT_METRICS = ("ttft", "tpot", "e2el")
# A sign is matched so that a negative limit is told it must be positive.
_GOODPUT_TEXT = re.compile(r"^(\w+):(-?(?:\d+(?:\.\d*)?|\.\d+))$")


@dataclass(slots=True, frozen=True)
class GoodputSlos:
    """Limits in seconds; None where not given."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None

    def good(self, requests: RequestColumns) -> npt.NDArray[np.bool_]:
        """Which of the requests meet every given limit (a single output token: TPOT 0)."""
        good = np.ones(len(requests), dtype=bool)
        if self.ttft_s is not None:
            good &= requests.ttft_s <= self.ttft_s
        if self.tpot_s is not None:
            good &= requests.tpot_s <= self.tpot_s
        if self.e2e_s is not None:
            good &= requests.e2e_s <= self.e2e_s
        return good

    def describe(self) -> str:
        """`ttft:1000 tpot:50` as vLLM's benchmark takes it (milliseconds)."""
        limits = zip(GOODPUT_METRICS, (self.ttft_s, self.tpot_s, self.e2e_s), strict=True)
        return " ".join(f"{name}:{1e3 * limit:g}" for name, limit in limits if limit is not None)


def parse_goodput(texts: list[str]) -> GoodputSlos | None:
    """`["ttft:500", "tpot:50"]` (milliseconds) as limits; None for no texts."""
    if not texts:
        return None
    limits: dict[str, float] = {}
    for text in texts:
        match = _GOODPUT_TEXT.match(text.strip())
        if match is None or match.group(1) not in GOODPUT_METRICS:
            raise InputError(
                f"--goodput {text!r}: expected NAME:MILLISECONDS with NAME one of "
                f"{', '.join(GOODPUT_METRICS)}, e.g. ttft:500"
            )
        name, number = match.groups()
        if name in limits:
            raise InputError(f"--goodput {text!r}: {name} is given twice")
        if not float(number) > 0:
            raise InputError(f"--goodput {text!r}: the limit must be positive")
        limits[name] = float(number) / 1e3
    return GoodputSlos(limits.get("ttft"), limits.get("tpot"), limits.get("e2el"))
