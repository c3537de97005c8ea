"""Every fidelity op script replays through `cache replay` to real vLLM 0.33.0's output."""

from __future__ import annotations

import pytest
from golden import differences, load_golden, load_golden_header, trace_paths

from sim.native import CORES
from sim.replay.cache_replay import replay_cache

TRACES = trace_paths()
HEADER_FIELDS = ("config", "none_hash", "pythonhashseed")


def test_all_25_fidelity_traces_are_present():
    """s01..s25 exist, so the parametrised comparison below cannot silently run on nothing."""
    assert [path.name[:3] for path in TRACES] == [f"s{number:02d}" for number in range(1, 26)]


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("trace", TRACES, ids=[path.stem for path in TRACES])
def test_trace_replays_to_golden_output(trace, core):
    """Every field vLLM printed (hashes, labels, block ids, free queue, stats) is equal, line by
    line, and the header's config, NONE_HASH and seed are too, on both cache cores."""
    lines = [replayed.line for replayed in replay_cache(trace, core)]
    assert differences(load_golden(trace.stem), lines[1:]) == []
    golden_header = load_golden_header(trace.stem)
    assert {field: lines[0][field] for field in HEADER_FIELDS} == {
        field: golden_header[field] for field in HEADER_FIELDS
    }


def test_a_changed_golden_value_is_reported():
    """differences() names the line, op and field of a mismatch (so the test above can fail)."""
    golden = load_golden("s02_full_hit_cap_64")
    replayed = [dict(line) for line in golden]
    replayed[3]["hit_tokens"] = 64
    assert differences(golden, replayed) == ["line 3 op schedule hit_tokens: 48 != 64"]
    assert differences(golden, golden[:-1]) == ["5 golden lines, 4 replayed"]
