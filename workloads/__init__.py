"""Workload generators and trace adapters; never imports `sim`.

The engine consumes `RequestSpec` streams: iterate a `Workload` (chat, agent, RAG or a mix of
them, at an arrival process, in synthetic or text token mode), or a trace adapter
(`read_mooncake`, `read_dynamo`, `read_azure`). Configuration dataclasses validate themselves
and raise `WorkloadError` naming the field and what is allowed. `workloads.api` gathers the
public names in one place.
"""
