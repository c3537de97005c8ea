"""Host-link transfer times and the per-direction FIFO queue of the offload tier."""

from __future__ import annotations

import pytest

from sim.costmodel.specs import known_gpus
from sim.costmodel.transfer import (
    HOST_LINK_BY_GPU,
    HOST_LINKS,
    TransferQueue,
    get_host_link,
    is_reported,
    transfer_seconds,
)
from sim.errors import InputError

MIB = 2**20


def test_links_per_gpu() -> None:
    assert get_host_link("h100").name == "pcie-gen5"
    assert get_host_link("a100").name == "pcie-gen4"
    assert get_host_link("gh200").name == "nvlink-c2c"
    assert get_host_link("pcie-gen4").bytes_per_s == pytest.approx(25.2e9)
    assert get_host_link("nvlink-c2c").bytes_per_s == pytest.approx(360e9)


def test_every_registered_gpu_has_a_host_link() -> None:
    """A run with a CPU tier and no deployment.host_link takes its GPU's link: every GPU of
    data/gpus.csv has one (the A100 PCIe, A10G and L4 on PCIe Gen4, the MI300X on Gen5)."""
    assert set(known_gpus()) <= set(HOST_LINK_BY_GPU)
    assert [get_host_link(gpu).name for gpu in ("a100-pcie", "a10g", "l4", "mi300x")] == [
        "pcie-gen4",
        "pcie-gen4",
        "pcie-gen4",
        "pcie-gen5",
    ]


def test_unknown_link_names_the_choices() -> None:
    with pytest.raises(InputError, match="unknown host link 'pcie-gen9'; allowed: pcie-gen4"):
        get_host_link("pcie-gen9")


def test_one_llama_8b_block_over_pcie_gen5() -> None:
    """2 MiB (Llama-3.1-8B, B=16, TP=1) at 0.8 x 63 GB/s: 10 us + 41.6 us."""
    assert transfer_seconds(HOST_LINKS["pcie-gen5"], 2 * MIB) == pytest.approx(51.61e-6, rel=1e-3)


def test_queue_runs_jobs_in_order_after_their_forward() -> None:
    """Two 50.4 MB jobs (2 ms each on Gen4 plus 10 us): the second waits for the first; a job
    planned after the queue drained starts at its own forward end."""
    queue = TransferQueue(HOST_LINKS["pcie-gen4"])
    first = queue.submit(0.010, 50_400_000)
    second = queue.submit(0.011, 50_400_000)
    assert first == pytest.approx(0.01201)
    assert second == pytest.approx(0.01402)
    assert queue.submit(0.100, 0) == pytest.approx(0.10001)
    assert is_reported(second, 0.0141) and not is_reported(second, 0.014)
