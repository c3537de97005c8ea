"""Prefix-cache timing side channel: can one tenant tell from TTFT what another tenant sent?

The model, per trial: a victim tenant sends a random `sent_fraction` of the candidate prompts
(its system prompt followed by a secret) during [0, window_s]. `delay_s` later the attacker, a
tenant of its own, calibrates and then probes every candidate once, `probe_interval_s` apart,
in random order. Background tenants send unrelated prompts (Poisson) throughout, which adds
queueing noise. Each tenant's requests carry the salt its setting gives it: none, its own, or
one salt shared by every tenant.

Calibration: the attacker sends a fresh prompt shaped like a candidate (the victim's system
prompt and a secret nobody sent: uncached), then sends it again (now certainly cached, in the
attacker's own salt namespace), `num_calibration_pairs` times. Its threshold is the midpoint
between the median cached and the median uncached TTFT; a probe faster than the threshold is
classified "the victim sent it". Accuracy is the share of probes classified correctly; its
95 % interval is Student's t over the independent trials. Every setting replays the same trials
(same secrets, times and background), so settings differ in salts only.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sim.metrics import RequestRecord, StabilityRules, ttft_trend
from sim.studies.intervals import mean_confidence_interval
from sim.studies.named import named_row
from sim.studies.side_channel_config import SaltSetting, SideChannelSettings
from sim.studies.study_runs import StudyEngine
from workloads.api import Piece, RequestSpec, Segment, TextTokens

VICTIM = "victim"
ATTACKER = "attacker"
SHARED_SALT = "salt-shared-by-all-tenants"
CONFIDENCE = 0.95


def tenant_salt(setting: SaltSetting, tenant: str) -> str | None:
    """The cache_salt a tenant's requests carry under `setting`."""
    if setting == "no_salt":
        return None
    if setting == "shared_salt":
        return SHARED_SALT
    return f"salt-{tenant}"


@dataclass(slots=True, frozen=True)
class PlannedRequest:
    """A request of a trial, before a salt setting is applied."""

    request_id: str
    arrival_at: float
    tenant: str
    segments: list[Segment]
    output_tokens: list[int]


@dataclass(slots=True, frozen=True)
class Probe:
    """One attacker probe of a candidate prompt, and whether the victim really sent it."""

    request_id: str
    victim_sent: bool


@dataclass(slots=True)
class TrialPlan:
    """Everything one trial sends, in arrival order, and which requests the attacker reads."""

    requests: list[PlannedRequest]
    probes: list[Probe]
    calibration_pairs: list[tuple[str, str]]  # (first send: uncached, resend: cached)

    def specs(self, setting: SaltSetting) -> list[RequestSpec]:
        """The trial's request specs with the salts of `setting`."""
        return [
            RequestSpec.open_loop(
                request.request_id,
                request.arrival_at,
                request.segments,
                request.output_tokens,
                tenant=request.tenant,
                cache_salt=tenant_salt(setting, request.tenant),
            )
            for request in self.requests
        ]


def poisson_arrivals(rng: np.random.Generator, rate_per_s: float, until_s: float) -> list[float]:
    """Arrival times of a Poisson process of `rate_per_s` on (0, until_s]."""
    arrivals_at: list[float] = []
    arrival_at = float(rng.exponential(1.0 / rate_per_s))
    while arrival_at <= until_s:
        arrivals_at.append(arrival_at)
        arrival_at += float(rng.exponential(1.0 / rate_per_s))
    return arrivals_at


class _TrialPlanner:
    """Builds trial plans; prompts are real text rendered through the chat template."""

    def __init__(self, settings: SideChannelSettings) -> None:
        self.settings = settings
        self.tokenizer = TextTokens(settings.chat_template)
        self.victim_output = self.tokenizer.output_tokens(
            "victim-answer", settings.secrets.output_tokens
        )
        self.attacker_output = self.tokenizer.output_tokens(
            "attacker-answer", settings.attack.output_tokens
        )
        self.background_output = self.tokenizer.output_tokens(
            "background-answer", settings.background.output_tokens
        )

    def _candidate_prompt(self, system_id: str, secret_id: str) -> list[Segment]:
        secrets = self.settings.secrets
        pieces = [Piece("secret", secret_id, "user", secrets.secret_tokens)]
        if secrets.system_prompt_tokens:
            pieces.insert(
                0, Piece("system_prompt", system_id, "system", secrets.system_prompt_tokens)
            )
        return self.tokenizer.render(pieces)

    def plan(self, trial_index: int, rng: np.random.Generator) -> TrialPlan:
        """Trial `trial_index`: victim, attacker and background requests drawn from `rng`."""
        settings = self.settings
        secrets, attack = settings.secrets, settings.attack
        prefix = f"seed{settings.seed}/trial{trial_index}"
        system_id = f"{prefix}/victim-system"
        candidates = [
            self._candidate_prompt(system_id, f"{prefix}/secret{index}")
            for index in range(secrets.num_candidates)
        ]
        num_sent = min(
            secrets.num_candidates - 1,
            max(1, round(secrets.num_candidates * secrets.sent_fraction)),
        )
        sent = set(rng.choice(secrets.num_candidates, size=num_sent, replace=False).tolist())
        requests = self._victim_requests(candidates, sent, rng)
        attack_at = secrets.window_s + attack.delay_s
        calibration_pairs = self._calibrate(requests, prefix, system_id, attack_at)
        first_probe_at = attack_at + 2 * attack.num_calibration_pairs * attack.probe_interval_s
        probes = self._probe(requests, candidates, sent, first_probe_at, rng)
        last_probe_at = first_probe_at + (secrets.num_candidates - 1) * attack.probe_interval_s
        self._add_background(requests, prefix, last_probe_at, rng)
        requests.sort(key=lambda request: request.arrival_at)
        return TrialPlan(requests, probes, calibration_pairs)

    def _victim_requests(
        self, candidates: list[list[Segment]], sent: set[int], rng: np.random.Generator
    ) -> list[PlannedRequest]:
        """The sent candidates in random order at uniform times in the victim's window."""
        window_s = self.settings.secrets.window_s
        arrivals_at = np.sort(rng.uniform(0.0, window_s, size=len(sent))).tolist()
        order = rng.permutation(sorted(sent)).tolist()
        return [
            PlannedRequest(
                f"victim-{index}", arrival_at, VICTIM, candidates[index], self.victim_output
            )
            for arrival_at, index in zip(arrivals_at, order, strict=True)
        ]

    def _calibrate(
        self, requests: list[PlannedRequest], prefix: str, system_id: str, attack_at: float
    ) -> list[tuple[str, str]]:
        """Add the attacker's calibration pairs (a fresh prompt, then the same again)."""
        attack = self.settings.attack
        pairs = []
        for pair in range(attack.num_calibration_pairs):
            prompt = self._candidate_prompt(system_id, f"{prefix}/calibration{pair}")
            first_id, again_id = f"calibration-{pair}-first", f"calibration-{pair}-again"
            for offset, request_id in enumerate((first_id, again_id)):
                send_at = attack_at + (2 * pair + offset) * attack.probe_interval_s
                requests.append(
                    PlannedRequest(request_id, send_at, ATTACKER, prompt, self.attacker_output)
                )
            pairs.append((first_id, again_id))
        return pairs

    def _probe(
        self,
        requests: list[PlannedRequest],
        candidates: list[list[Segment]],
        sent: set[int],
        first_probe_at: float,
        rng: np.random.Generator,
    ) -> list[Probe]:
        """Add one probe per candidate, in random order, `probe_interval_s` apart."""
        interval_s = self.settings.attack.probe_interval_s
        probes = []
        for position, index in enumerate(rng.permutation(len(candidates)).tolist()):
            probe = Probe(f"probe-{index}", index in sent)
            requests.append(
                PlannedRequest(
                    probe.request_id,
                    first_probe_at + position * interval_s,
                    ATTACKER,
                    candidates[index],
                    self.attacker_output,
                )
            )
            probes.append(probe)
        return probes

    def _add_background(
        self,
        requests: list[PlannedRequest],
        prefix: str,
        until_s: float,
        rng: np.random.Generator,
    ) -> None:
        """Add the background tenants' unrelated prompts, Poisson on (0, until_s]."""
        background = self.settings.background
        if not background.num_tenants or background.request_rate_per_s == 0:
            return
        arrivals_at = poisson_arrivals(rng, background.request_rate_per_s, until_s)
        tenants = rng.integers(background.num_tenants, size=len(arrivals_at)).tolist()
        for number, (arrival_at, tenant) in enumerate(zip(arrivals_at, tenants, strict=True)):
            question = Piece(
                "question", f"{prefix}/background{number}", "user", background.prompt_tokens
            )
            requests.append(
                PlannedRequest(
                    f"background-{number}",
                    arrival_at,
                    f"background-{tenant}",
                    self.tokenizer.render([question]),
                    self.background_output,
                )
            )


@dataclass(slots=True, frozen=True)
class TrialOutcome:
    """The attacker's threshold and decisions in one trial."""

    threshold_s: float
    accuracy: float
    true_positive_rate: float  # share of sent candidates classified "sent"
    false_positive_rate: float  # share of unsent candidates classified "sent"
    probe_ttfts_s: tuple[float, ...]
    probe_sent: tuple[bool, ...]
    fell_behind: bool  # the engine fell behind the trial's arrivals (`fell_behind`)


def fell_behind(records: Collection[RequestRecord]) -> bool:
    """Whether the engine fell behind a trial's arrivals: the TTFT of its requests, binned by
    arrival time, grows over the trial as an overloaded run's does (sim.metrics.stability's
    test). Then queueing, not the cache, sets the probes' TTFT."""
    arrivals_s = np.array([record.arrival_at for record in records])
    ttfts_s = np.array([record.ttft_s for record in records])
    end_s = float(np.nextafter(arrivals_s.max(), np.inf))
    return ttft_trend(arrivals_s, ttfts_s, 0.0, end_s).is_growing(StabilityRules())


def classify_trial(plan: TrialPlan, records: dict[str, RequestRecord]) -> TrialOutcome:
    """Threshold at the midpoint of the calibration medians; faster probes read as "sent"."""
    uncached_s = statistics.median(records[first].ttft_s for first, _ in plan.calibration_pairs)
    cached_s = statistics.median(records[again].ttft_s for _, again in plan.calibration_pairs)
    threshold_s = (uncached_s + cached_s) / 2
    ttfts_s = tuple(records[probe.request_id].ttft_s for probe in plan.probes)
    sent = tuple(probe.victim_sent for probe in plan.probes)
    said_sent = [ttft_s < threshold_s for ttft_s in ttfts_s]
    correct = [decision == truth for decision, truth in zip(said_sent, sent, strict=True)]
    num_sent = sum(sent)
    return TrialOutcome(
        threshold_s=threshold_s,
        accuracy=sum(correct) / len(correct),
        true_positive_rate=sum(d for d, t in zip(said_sent, sent, strict=True) if t) / num_sent,
        false_positive_rate=sum(d for d, t in zip(said_sent, sent, strict=True) if not t)
        / (len(sent) - num_sent),
        probe_ttfts_s=ttfts_s,
        probe_sent=sent,
        fell_behind=fell_behind(records.values()),
    )


@dataclass(slots=True, frozen=True)
class SettingResult:
    """One salt setting over all trials: accuracy with its 95 % interval, and the rates."""

    setting: SaltSetting
    trials: tuple[TrialOutcome, ...]
    accuracy: float
    accuracy_low: float
    accuracy_high: float
    true_positive_rate: float
    false_positive_rate: float

    def probe_ttfts_s(self, victim_sent: bool) -> list[float]:
        """Every trial's probe TTFTs of candidates the victim did (or did not) send."""
        return [
            ttft_s
            for trial in self.trials
            for ttft_s, sent in zip(trial.probe_ttfts_s, trial.probe_sent, strict=True)
            if sent == victim_sent
        ]

    @property
    def num_trials_behind(self) -> int:
        """Trials in which the engine fell behind its arrivals."""
        return sum(trial.fell_behind for trial in self.trials)

    @property
    def median_threshold_s(self) -> float:
        """The median of the trials' thresholds."""
        return statistics.median(trial.threshold_s for trial in self.trials)


def summarize_setting(setting: SaltSetting, trials: Sequence[TrialOutcome]) -> SettingResult:
    """Means over trials; the accuracy interval is Student's t at 95 %."""
    accuracy, low, high = mean_confidence_interval([trial.accuracy for trial in trials], CONFIDENCE)
    return SettingResult(
        setting=setting,
        trials=tuple(trials),
        accuracy=accuracy,
        accuracy_low=low,
        accuracy_high=high,
        true_positive_rate=statistics.fmean(trial.true_positive_rate for trial in trials),
        false_positive_rate=statistics.fmean(trial.false_positive_rate for trial in trials),
    )


@dataclass(slots=True, frozen=True)
class SideChannelReport:
    """The attacker's accuracy under each salt setting."""

    name: str
    num_trials: int
    num_probes_per_trial: int
    results: tuple[SettingResult, ...]

    def result(self, setting: str) -> SettingResult:
        """The result of `setting`."""
        return named_row(self.results, lambda result: result.setting, setting, "setting")

    def overload_warning(self) -> str | None:
        """A loud line when the engine fell behind in any trial; None when it kept up."""
        num_behind = sum(result.num_trials_behind for result in self.results)
        if not num_behind:
            return None
        num_runs = self.num_trials * len(self.results)
        return (
            f"WARNING: OVERLOADED - the engine fell behind its arrivals in {num_behind} of "
            f"{num_runs} trial runs (TTFT grew over the trial): queueing, not the prefix cache, "
            "set those probes' TTFT, so the accuracies say little about salts; lower "
            "background.request_rate_per_s"
        )


def run_side_channel(
    settings: SideChannelSettings,
    base_dir: Path,
    *,
    on_trial_done: Callable[[int, int], None] | None = None,
) -> SideChannelReport:
    """Run every trial under every salt setting and summarise the attacker's accuracy.

    `on_trial_done(num_done, num_total)` is called after each (setting, trial) simulation.
    """
    engine = StudyEngine.from_settings(settings, base_dir)
    planner = _TrialPlanner(settings)
    trial_seeds = np.random.SeedSequence(settings.seed).spawn(settings.num_trials)
    outcomes: dict[SaltSetting, list[TrialOutcome]] = {name: [] for name in settings.salt_settings}
    num_total = settings.num_trials * len(settings.salt_settings)
    num_done = 0
    for trial_index, trial_seed in enumerate(trial_seeds):
        plan = planner.plan(trial_index, np.random.default_rng(trial_seed))
        for setting in settings.salt_settings:
            records = engine.run(plan.specs(setting))
            outcomes[setting].append(classify_trial(plan, records))
            num_done += 1
            if on_trial_done is not None:
                on_trial_done(num_done, num_total)
    return SideChannelReport(
        name=settings.name,
        num_trials=settings.num_trials,
        num_probes_per_trial=settings.secrets.num_candidates,
        results=tuple(
            summarize_setting(setting, outcomes[setting]) for setting in settings.salt_settings
        ),
    )
