"""Event-driven decoding: requests in steady decode advance implicitly, step by step.

A request that has just sampled a token and only decodes next is made *lazy*: as long as it
stays inside a held block, does not fill a block and does not finish, vLLM's step does nothing
to it but append one token. Those steps are applied in bulk when the request is next *due*
(a block boundary, its last token) or needed (preemption, abort, a step whose budget or blocks
could run out). Decisions, block ids, events, times and counters are identical to stepping
every request every step; the equivalence tests compare both paths byte for byte.
"""

from __future__ import annotations

import heapq
from array import array

from sim.sched.request import Request

# How many steps of gaps accumulate before stale bookkeeping is dropped.
COMPACT_EVERY_STEPS = 8192


class LazyDecoders:
    """Bookkeeping of lazy requests: due steps, aggregate context length, per-step gaps."""

    __slots__ = (
        "block_size",
        "num_lazy",
        "context_offset_sum",
        "step_gaps",
        "first_gap_step",
        "last_step_end_at",
        "_due",
        "_longest",
        "_num_pushed",
    )

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.num_lazy = 0
        # Sum over lazy requests of (context after sync - sync step - 1): their KV tokens at
        # step t are context_offset_sum + num_lazy * t.
        self.context_offset_sum = 0
        # step_gaps[t - first_gap_step] = end of step t - end of step t-1; steps no lazy request
        # can still need are dropped now and then, so memory stays bounded on long runs.
        self.step_gaps = array("d", [0.0])
        self.first_gap_step = 0
        self.last_step_end_at = 0.0
        # Heap entries carry a push counter so equal keys never compare requests.
        self._due: list[tuple[int, int, Request]] = []
        self._longest: list[tuple[int, int, int, Request]] = []
        self._num_pushed = 0

    def record_step_end(self, now: float) -> None:
        """Remember the gap every lazy request sees between its tokens of consecutive steps."""
        self.step_gaps.append(now - self.last_step_end_at)
        self.last_step_end_at = now
        if len(self.step_gaps) >= COMPACT_EVERY_STEPS:
            self._compact()

    def _compact(self) -> None:
        """Drop stale heap entries and the gaps of steps every lazy request has passed."""
        live = [entry for entry in self._longest if entry[3].lazy_sync_step == entry[1]]
        heapq.heapify(live)
        self._longest = live
        oldest_sync_step = min((entry[1] for entry in live), default=self.num_completed_steps)
        del self.step_gaps[: oldest_sync_step - self.first_gap_step]
        self.first_gap_step = oldest_sync_step

    @property
    def num_completed_steps(self) -> int:
        """Steps finished so far."""
        return self.first_gap_step + len(self.step_gaps) - 1

    def kv_tokens(self, step: int) -> int:
        """Total KV length of the lazy requests before `step`."""
        return self.context_offset_sum + self.num_lazy * step

    def longest_context(self, step: int) -> int:
        """Longest lazy sequence after `step` (0 with none)."""
        heap = self._longest
        while heap and heap[0][3].lazy_sync_step != heap[0][1]:
            heapq.heappop(heap)  # stale: that request left lazy mode since
        return -heap[0][0] + step + 1 if heap else 0

    def try_make_lazy(self, request: Request, step: int, max_model_len: int) -> None:
        """After `step` sampled a token for a decoding request: go lazy until it is next due."""
        num_computed = request.num_computed_tokens
        num_tokens = request.num_tokens
        remainder = num_computed % self.block_size
        # The next boundary step: a slot opening a new block (remainder 0) or filling one.
        if remainder == 0 or remainder == self.block_size - 1:
            return
        boundary_step = step + self.block_size - remainder
        finish_step = step + request.max_tokens - (num_tokens - request.num_prompt_tokens)
        length_step = step + max_model_len - num_tokens
        due_step = min(boundary_step, finish_step, length_step)
        if due_step <= step + 1:
            return
        offset = num_computed - step - 1
        request.lazy_sync_step = step
        request.lazy_offset = offset
        self.num_lazy += 1
        self.context_offset_sum += offset
        self._num_pushed += 1
        heapq.heappush(self._due, (due_step, self._num_pushed, request))
        heapq.heappush(self._longest, (-offset, step, self._num_pushed, request))

    def pop_due(self, step: int) -> None:
        """Bring the lazy requests due at `step` up to date (they take the normal path now).

        A stale entry (the request left lazy mode and re-entered) may materialize a request
        early, which is always safe: the normal path then handles it.
        """
        heap = self._due
        while heap and heap[0][0] <= step:
            request = heapq.heappop(heap)[2]
            if request.lazy_sync_step >= 0:
                self.materialize(request)

    def materialize(self, request: Request) -> None:
        """Apply the decode steps a lazy request skipped, through the last completed step."""
        sync_step = request.lazy_sync_step
        last_step = self.num_completed_steps
        skipped = last_step - sync_step
        if skipped > 0:
            num_output_tokens = request.num_output_tokens
            request.append_output_token_ids(
                request.planned_output_token_ids[num_output_tokens : num_output_tokens + skipped]
            )
            request.num_computed_tokens += skipped
            first = self.first_gap_step
            request.inter_token_latencies_s.extend(
                self.step_gaps[sync_step + 1 - first : last_step + 1 - first]
            )
            request.last_token_at = self.last_step_end_at
        request.lazy_sync_step = -1
        self.num_lazy -= 1
        self.context_offset_sum -= request.lazy_offset

    def materialize_all(self, requests: list[Request]) -> None:
        """Bring every lazy request in `requests` up to date."""
        for request in requests:
            if request.lazy_sync_step >= 0:
                self.materialize(request)
