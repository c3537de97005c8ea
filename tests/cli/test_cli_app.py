"""The CLI's command table, lazy loading and --version."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from sim import __version__
from sim.cli import COMMAND_MODULES, app, load_commands


def _registering_modules() -> dict[str, str]:
    """Top-level command name -> the sim.cli module whose functions it runs."""
    load_commands()
    found = {info.name: info.callback.__module__ for info in app.registered_commands}
    for group in app.registered_groups:
        modules = {info.callback.__module__ for info in group.typer_instance.registered_commands}
        assert len(modules) == 1, (group.name, modules)
        found[group.name] = modules.pop()
    return {name: module.removeprefix("sim.cli.") for name, module in found.items()}


def test_the_command_table_names_every_command_and_the_module_that_registers_it() -> None:
    assert _registering_modules() == COMMAND_MODULES
    assert len(COMMAND_MODULES) == 17  # export-metrics and offload included


def test_version_prints_the_package_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert (result.exit_code, result.output) == (0, f"prefixsim {__version__}\n")


def test_importing_the_cli_or_asking_its_version_loads_no_command_module() -> None:
    # A fresh interpreter: this process has imported every command already.
    probe = (
        "import sys; from sim.cli import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit as exit:\n    code = exit.code\n"
        "loaded = [m for m in sys.modules if m.endswith('_cmd')]\n"
        "print(code, loaded, 'sim.runner' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == [f"prefixsim {__version__}", "0 [] False"]


def test_a_command_loads_only_its_own_module() -> None:
    probe = (
        "import sys; from sim.cli import load_commands\n"
        "load_commands(['cache', 'replay', 'x.jsonl'])\n"
        "print(sorted(m for m in sys.modules if m.endswith('_cmd')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['sim.cli.replay_cmd']"


FIDELITY = Path(__file__).resolve().parents[1] / "fixtures" / "fidelity" / "traces"


def test_python_dash_m_sim_exits_0_1_and_2_as_a_shell_sees_it(tmp_path: Path) -> None:
    """The entry point in a real interpreter: success, a failed --check, and bad input."""
    wrong = tmp_path / "wrong_expect.jsonl"
    wrong.write_text('{"op":"arrive","id":"A","prompt":[1,2],"expect":{"num_tokens":99}}\n')
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"op":"frobnicate"}\n')
    outcomes = [
        subprocess.run(
            [sys.executable, "-m", "sim", "cache", "replay", str(script), "--check"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        for script in (FIDELITY / "s02_full_hit_cap_64.jsonl", wrong, bad)
    ]
    assert [outcome.returncode for outcome in outcomes] == [0, 1, 2]
    assert outcomes[0].stderr == ""
    assert outcomes[1].stderr == f"check failed: {wrong}:1: num_tokens: expected 99, got 2\n"
    assert outcomes[2].stderr == (
        f"error: {bad}:1: unknown op 'frobnicate'; allowed: arrive, config, finish, output, "
        "preempt, reset_prefix_cache, run, schedule, snapshot\n"
    )
