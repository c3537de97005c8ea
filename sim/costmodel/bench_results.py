"""Results files of vLLM's own benchmarks, read for calibration.

- `vllm bench serve --save-result` (and the older `benchmarks/benchmark_serving.py`) writes one
  JSON object with per-request lists `input_lens`, `output_lens`, `ttfts` (s), `itls` (a list of
  gaps in s per request) and `errors`, plus `request_rate`, `burstiness`, `max_concurrency` and,
  in newer versions, `start_times`.
- `vllm bench latency --output-json` writes `avg_latency` (s), `latencies` and `percentiles`;
  the batch size and lengths are command-line arguments, so the caller supplies them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import InputError


@dataclass(frozen=True, slots=True)
class ServedRequest:
    """One successful request of a serving benchmark, as the client measured it."""

    input_len: int
    output_len: int
    ttft_s: float
    itls_s: tuple[float, ...]
    start_s: float | None  # when it was sent, relative to the first send; None if not recorded
    index: int  # its place in the file's per-request lists (failed requests counted)


@dataclass(frozen=True, slots=True)
class ServeBenchmark:
    requests: tuple[ServedRequest, ...]
    request_rate: float  # math.inf: all sent at once
    burstiness: float
    max_concurrency: int | None
    num_failed: int
    model_id: str | None

    @property
    def mean_ttft_s(self) -> float:
        return sum(r.ttft_s for r in self.requests) / len(self.requests)

    @property
    def mean_itl_s(self) -> float:
        """Decode time per generated token after the first: equal to vLLM's mean ITL when every
        token streams alone, and still per token when a server streams tokens in chunks."""
        return per_token_itl_s(
            [sum(r.itls_s) for r in self.requests], [r.output_len for r in self.requests]
        )


@dataclass(frozen=True, slots=True)
class LatencyBenchmark:
    avg_latency_s: float
    num_iterations: int
    batch_size: int
    input_len: int
    output_len: int


def per_token_itl_s(decode_times_s: list[float], output_lens: list[int]) -> float:
    """Summed decode time over summed gaps (output tokens after each request's first)."""
    num_gaps = sum(max(length - 1, 0) for length in output_lens)
    if num_gaps == 0:
        raise InputError("no request generated more than one token: no ITL to match")
    return sum(decode_times_s) / num_gaps


def read_serve_result(path: Path) -> ServeBenchmark:
    """The successful requests of a `vllm bench serve --save-result` JSON."""
    document = _read_json(path)
    source = str(path)
    lists = {
        key: _list(document, key, source) for key in ("input_lens", "output_lens", "ttfts", "itls")
    }
    lengths = {key: len(values) for key, values in lists.items()}
    if len(set(lengths.values())) != 1:
        raise InputError(f"per-request lists differ in length: {lengths}", source=source)
    errors = _errors(document.get("errors"), lengths["ttfts"], source)
    start_times = document.get("start_times")
    requests = []
    num_failed = 0
    for index in range(lengths["ttfts"]):
        output_len = _whole(lists["output_lens"][index], f"output_lens[{index}]", source)
        if errors[index] or output_len == 0:
            num_failed += 1
            continue
        itls = lists["itls"][index]
        if not isinstance(itls, list):
            raise InputError(f"field itls[{index}]: expected a list of seconds", source=source)
        requests.append(
            ServedRequest(
                # vLLM refuses an empty prompt, so a served request had at least one token.
                input_len=_whole(
                    lists["input_lens"][index], f"input_lens[{index}]", source, minimum=1
                ),
                output_len=output_len,
                ttft_s=_seconds(lists["ttfts"][index], f"ttfts[{index}]", source),
                itls_s=tuple(_seconds(gap, f"itls[{index}]", source) for gap in itls),
                start_s=(
                    _seconds(start_times[index], f"start_times[{index}]", source)
                    if isinstance(start_times, list) and index < len(start_times)
                    else None
                ),
                index=index,
            )
        )
    if not requests:
        raise InputError("no successful request (all have errors or no output)", source=source)
    starts = [r.start_s for r in requests]
    if all(start is not None for start in starts):
        first = min(start for start in starts if start is not None)
        requests = [
            ServedRequest(
                r.input_len, r.output_len, r.ttft_s, r.itls_s, (r.start_s or 0) - first, r.index
            )
            for r in requests
        ]
    _check_itls(requests, source)
    return ServeBenchmark(
        requests=tuple(requests),
        request_rate=_rate(document.get("request_rate", "inf"), source),
        burstiness=_burstiness(document.get("burstiness"), source),
        max_concurrency=_max_concurrency(document.get("max_concurrency"), source),
        num_failed=num_failed,
        model_id=document.get("model_id"),
    )


def read_latency_result(
    path: Path, *, batch_size: int, input_len: int, output_len: int
) -> LatencyBenchmark:
    """A `vllm bench latency --output-json` result run with these arguments."""
    document = _read_json(path)
    source = str(path)
    for name, value in (
        ("batch_size", batch_size),
        ("input_len", input_len),
        ("output_len", output_len),
    ):
        if value < 1:
            raise InputError(f"--{name.replace('_', '-')} {value}: must be >= 1", source=source)
    latencies = document.get("latencies")
    avg_latency_s = _seconds(document.get("avg_latency"), "avg_latency", source)
    if avg_latency_s == 0:
        raise InputError("field avg_latency = 0: expected seconds > 0", source=source)
    return LatencyBenchmark(
        avg_latency_s=avg_latency_s,
        num_iterations=len(latencies) if isinstance(latencies, list) else 1,
        batch_size=batch_size,
        input_len=input_len,
        output_len=output_len,
    )


def _read_json(path: Path) -> dict[str, Any]:
    source = str(path)
    if not path.is_file():
        raise InputError("benchmark result file not found", source=source)
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise InputError(f"not valid JSON: {error.msg}", source=source, line=error.lineno) from None
    if not isinstance(document, dict):
        raise InputError("expected a JSON object", source=source)
    return document


def _list(document: dict[str, Any], key: str, source: str) -> list[Any]:
    value = document.get(key)
    if not isinstance(value, list) or not value:
        raise InputError(
            f"field {key}: expected a non-empty list (save the result with per-request details)",
            source=source,
        )
    return value


def _whole(value: Any, name: str, source: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(
            f"field {name} = {value!r}: expected a whole number >= {minimum}", source=source
        )
    return value


def _seconds(value: Any, name: str, source: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise InputError(f"field {name} = {value!r}: expected seconds >= 0", source=source)
    return float(value)


def _rate(value: Any, source: str) -> float:
    if value in ("inf", None) or value == math.inf:
        return math.inf
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InputError(
            f"field request_rate = {value!r}: expected requests/s > 0 or 'inf'", source=source
        )
    return float(value)


def _burstiness(value: Any, source: str) -> float:
    """vLLM's gamma shape of the arrival gaps: > 0 (1 = Poisson); missing or null means 1."""
    if value is None:
        return 1.0
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not value > 0
    ):
        raise InputError(
            f"field burstiness = {value!r}: expected a number > 0 (1 = Poisson arrivals) or null",
            source=source,
        )
    return float(value)


def _max_concurrency(value: Any, source: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(
            f"field max_concurrency = {value!r}: expected a whole number >= 1 or null (no limit)",
            source=source,
        )
    return value


def _errors(value: Any, num_requests: int, source: str) -> list[Any]:
    """The per-request error texts ("" for a success); missing or null: all succeeded."""
    if value is None:
        return [""] * num_requests
    if not isinstance(value, list) or len(value) != num_requests:
        got = f"{len(value)} entries" if isinstance(value, list) else repr(value)
        raise InputError(
            f"field errors: expected a list of {num_requests} error texts (one per request), "
            f"got {got}",
            source=source,
        )
    return value


def _check_itls(requests: list[ServedRequest], source: str) -> None:
    """The successful requests must record some decode time to fit the step times to."""
    output_lens = [r.output_len for r in requests]
    if all(length <= 1 for length in output_lens):
        raise InputError(
            "field output_lens: no successful request generated more than one token, "
            "so there is no inter-token latency to fit",
            source=source,
        )
    if sum(sum(r.itls_s) for r in requests) == 0:
        raise InputError(
            "field itls: every successful request's list of inter-token gaps is empty or all 0 s, "
            "so there is no inter-token latency to fit (expected the gaps in seconds between "
            "streamed tokens)",
            source=source,
        )
