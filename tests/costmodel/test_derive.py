"""`prefixsim costmodel derive` and `validate`: their output places, before their work.

Scenario: the 45 shipped (GPU, model, TP) combinations derived into a fresh folder, or none
when a file is in the way; validation's folder made before it runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.costmodel.derive import SHIPPED_COMBINATIONS, write_derived_profiles
from sim.errors import InputError


def test_a_file_in_the_way_leaves_the_folder_untouched(tmp_path: Path) -> None:
    """A file named like the L40S folder: refused before the first profile is written (16 of
    the 45 were written before the failure, a mix of old and refitted profiles)."""
    (tmp_path / "l40s").write_text("not a folder\n")
    with pytest.raises(InputError, match="l40s is a file, not a directory"):
        write_derived_profiles(tmp_path)
    assert [path.name for path in tmp_path.rglob("*")] == ["l40s"]


def test_every_shipped_combination_is_written(tmp_path: Path) -> None:
    paths = write_derived_profiles(tmp_path)
    assert len(paths) == len(SHIPPED_COMBINATIONS) == 45
    assert all(path.is_file() for path in paths)


def test_validate_makes_its_folder_before_the_work_and_removes_it_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder is made before the minute of validation (a place that looked writable, such
    as one under /proc for root, failed only after it); a failed validation removes it."""
    from sim.cli import main

    out = tmp_path / "new" / "validation"
    made_before_work: list[bool] = []

    def failing_validation(*_args: object) -> None:
        made_before_work.append(out.is_dir())
        raise InputError("no measurement")

    monkeypatch.setattr("sim.cli.costmodel_cmd.validate_shipped_profiles", failing_validation)
    with pytest.raises(SystemExit) as raised:
        main(["costmodel", "validate", "--out", str(out)])
    assert (raised.value.code, made_before_work) == (2, [True])
    assert not (tmp_path / "new").exists()
