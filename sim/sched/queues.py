"""Waiting queues: FCFS (a deque; preempted requests go to the front) and priority (a heap)."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator

from sim.sched.request import Request


class FcfsQueue:
    """Arrival order; a preempted request is prepended so it resumes first."""

    __slots__ = ("_requests",)

    def __init__(self) -> None:
        self._requests: deque[Request] = deque()

    def add(self, request: Request) -> None:
        """Queue a new request at the back."""
        self._requests.append(request)

    def prepend(self, request: Request) -> None:
        """Queue a preempted request at the front."""
        self._requests.appendleft(request)

    def prepend_all(self, requests: list[Request]) -> None:
        """Queue requests at the front, keeping their order (skipped ones going back)."""
        self._requests.extendleft(reversed(requests))

    def peek(self) -> Request:
        """The next request to try."""
        return self._requests[0]

    def pop(self) -> Request:
        """Remove the next request."""
        return self._requests.popleft()

    def remove(self, request: Request) -> None:
        """Remove a request from anywhere (abort)."""
        self._requests.remove(request)

    def __len__(self) -> int:
        return len(self._requests)

    def __iter__(self) -> Iterator[Request]:
        return iter(self._requests)


class PriorityQueue:
    """Ordered by (priority, arrival_at, request id), lowest first; preempted re-enter by key."""

    __slots__ = ("_heap",)

    def __init__(self) -> None:
        self._heap: list[tuple[tuple[int, float, str], Request]] = []

    def add(self, request: Request) -> None:
        """Queue a request by its priority key."""
        heapq.heappush(self._heap, (request.sort_key(), request))

    prepend = add

    def prepend_all(self, requests: list[Request]) -> None:
        """Re-queue requests by their keys (a heap has no front)."""
        for request in requests:
            self.add(request)

    def peek(self) -> Request:
        """The next request to try."""
        return self._heap[0][1]

    def pop(self) -> Request:
        """Remove the next request."""
        return heapq.heappop(self._heap)[1]

    def remove(self, request: Request) -> None:
        """Remove a request from anywhere (abort)."""
        self._heap = [entry for entry in self._heap if entry[1] is not request]
        heapq.heapify(self._heap)

    def __len__(self) -> int:
        return len(self._heap)

    def __iter__(self) -> Iterator[Request]:
        return (entry[1] for entry in sorted(self._heap, key=lambda entry: entry[0]))
