"""The scenario file of `prefixsim side-channel`: secrets, the attack, background traffic, salts."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from sim.config import StrictModel
from sim.studies.study_runs import StudySettings

SaltSetting = Literal["no_salt", "per_tenant_salt", "shared_salt"]
SALT_SETTINGS: tuple[SaltSetting, ...] = ("no_salt", "per_tenant_salt", "shared_salt")


class SecretSettings(StrictModel):
    """The victim's prompts: its system prompt, then one secret out of the candidate set."""

    num_candidates: int = Field(40, ge=2, le=100_000, description="prompts the attacker probes")
    sent_fraction: float = Field(
        0.5, gt=0, lt=1, description="share of the candidates the victim sends (rounded)"
    )
    system_prompt_tokens: int = Field(256, ge=0, le=100_000)
    secret_tokens: int = Field(768, ge=1, le=100_000)
    output_tokens: int = Field(32, ge=1, le=100_000)
    window_s: float = Field(10.0, gt=0, description="the victim's requests arrive in [0, window_s]")


class AttackSettings(StrictModel):
    """When and how the attacker probes: calibration pairs first, then one probe per candidate."""

    delay_s: float = Field(5.0, ge=0, description="pause after the victim's window")
    probe_interval_s: float = Field(0.5, gt=0, description="between consecutive attacker requests")
    num_calibration_pairs: int = Field(8, ge=1, le=10_000)
    output_tokens: int = Field(1, ge=1, le=100_000, description="the attacker reads TTFT only")


class BackgroundSettings(StrictModel):
    """Other tenants' unrelated traffic, which adds queueing noise to every TTFT."""

    num_tenants: int = Field(2, ge=0, le=10_000)
    request_rate_per_s: float = Field(2.0, ge=0)
    prompt_tokens: int = Field(1024, ge=1, le=100_000)
    output_tokens: int = Field(128, ge=1, le=100_000)


class SideChannelSettings(StudySettings):
    """How well an attacker tenant tells from TTFT which prompts a victim tenant sent."""

    chat_template: Literal["chatml", "qwen", "llama3"] = "chatml"
    seed: int = Field(0, ge=0)
    num_trials: int = Field(10, ge=2, le=10_000, description="independent attacks per setting")
    salt_settings: list[SaltSetting] = Field(default_factory=lambda: list(SALT_SETTINGS))
    secrets: SecretSettings = Field(default_factory=SecretSettings)
    attack: AttackSettings = Field(default_factory=AttackSettings)
    background: BackgroundSettings = Field(default_factory=BackgroundSettings)

    @field_validator("salt_settings")
    @classmethod
    def _unique_settings(cls, settings: list[SaltSetting]) -> list[SaltSetting]:
        if not settings:
            raise ValueError(f"salt_settings is empty; choose from {', '.join(SALT_SETTINGS)}")
        if len(set(settings)) != len(settings):
            raise ValueError(f"salt_settings {settings} names a setting twice")
        return settings
