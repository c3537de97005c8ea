"""KV transfers between GPU and host memory for the CPU offload tier (spec §13.6, §13.7.3, §13.12).

Each GPU moves its own shard of every chunk over its own host link. Stores (GPU -> CPU) and
loads (CPU -> GPU) run on separate copy streams, so each direction is one FIFO queue; a job
starts once the forward pass of the step that planned it has finished and the job before it in
the same direction is done. vLLM polls completion at the end of every step, so the engine
reports a job done at the first step end at or after its finish time. Sources: docs/offload.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.errors import InputError

GB = 1e9


@dataclass(frozen=True, slots=True)
class HostLink:
    """One GPU's link to host memory: peak bytes/s per direction, the fraction a pinned-memory
    copy reaches, and a fixed cost per transfer job (launch and DMA setup)."""

    name: str
    peak_bytes_per_s: float
    efficiency: float
    job_latency_s: float

    @property
    def bytes_per_s(self) -> float:
        """Sustained bytes/s one direction reaches."""
        return self.peak_bytes_per_s * self.efficiency


# Peaks per direction: PCIe x16 Gen4 16 GT/s and Gen5 32 GT/s lanes with 128b/130b encoding
# (PCI-SIG base specs 4.0/5.0: 31.5 and 63.0 GB/s); NVLink-C2C 900 GB/s total, 450 GB/s each
# way (NVIDIA GH200 and GB200 datasheets). The efficiencies are assumptions (docs/offload.md).
HOST_LINKS: dict[str, HostLink] = {
    link.name: link
    for link in (
        HostLink("pcie-gen4", 31.5 * GB, 0.8, 10e-6),
        HostLink("pcie-gen5", 63.0 * GB, 0.8, 10e-6),
        HostLink("nvlink-c2c", 450.0 * GB, 0.8, 5e-6),
    )
}

# The host link of every GPU in the registry (data/gpus.csv; a test keeps them in step) and of
# the superchips: A100 (SXM, PCIe, 40 GB), L40S, A10G and L4: PCIe Gen4 x16; H100, H200 and
# B200 HGX boards and MI300X (OAM): PCIe Gen5 x16 (vendor datasheets); Grace-Hopper/Blackwell
# superchips: NVLink-C2C.
HOST_LINK_BY_GPU: dict[str, str] = {
    "a100": "pcie-gen4",
    "a100-pcie": "pcie-gen4",
    "a100-40gb": "pcie-gen4",
    "l40s": "pcie-gen4",
    "a10g": "pcie-gen4",
    "l4": "pcie-gen4",
    "h100": "pcie-gen5",
    "h200": "pcie-gen5",
    "b200": "pcie-gen5",
    "mi300x": "pcie-gen5",
    "gh200": "nvlink-c2c",
    "gb200": "nvlink-c2c",
}


def get_host_link(name: str) -> HostLink:
    """The host link called `name`, or the one a GPU key (`h100`, `gh200`) has."""
    link = HOST_LINKS.get(HOST_LINK_BY_GPU.get(name, name))
    if link is None:
        allowed = ", ".join([*HOST_LINKS, *HOST_LINK_BY_GPU])
        raise InputError(f"unknown host link {name!r}; allowed: {allowed}")
    return link


def transfer_seconds(link: HostLink, num_bytes: int) -> float:
    """Time one job of `num_bytes` (one GPU's share) takes on the link."""
    return link.job_latency_s + num_bytes / link.bytes_per_s


class TransferQueue:
    """One direction's copy stream: jobs run one at a time, in submission order."""

    __slots__ = ("link", "busy_until_s")

    def __init__(self, link: HostLink) -> None:
        self.link = link
        self.busy_until_s = 0.0

    def submit(self, forward_end_s: float, num_bytes: int) -> float:
        """Queue a job planned in the step whose forward ends at `forward_end_s`; its finish."""
        start = max(forward_end_s, self.busy_until_s)
        self.busy_until_s = start + transfer_seconds(self.link, num_bytes)
        return self.busy_until_s


def is_reported(finish_s: float, step_end_s: float) -> bool:
    """Whether a job finishing at `finish_s` is seen done by the poll at a step's end."""
    return finish_s <= step_end_s
