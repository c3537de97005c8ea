"""The bad-input corpus: each file in corpus/ and what its one-line error must say.

A case names the file the error is reported against and its line (None: the whole file), and
fragments the line must contain: the field, the bad value and what is allowed, where they apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sim.costmodel.specs import known_gpus, known_models

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
SCENARIO_DIR = CORPUS_DIR / "scenario"
SWEEP_DIR = CORPUS_DIR / "sweep"
TRACE_DIR = CORPUS_DIR / "traces"
GOOD_MOONCAKE = TRACE_DIR / "good_mooncake.jsonl"
GOOD_AZURE = TRACE_DIR / "good_azure.csv"


@dataclass(slots=True, frozen=True)
class BadFile:
    """A corpus file, the location its error names, and what else the error line must contain."""

    name: str
    line: int | None
    fragments: tuple[str, ...]
    reported_in: str | None = None  # the file named when it is not `name` (an extends chain)

    @property
    def id(self) -> str:
        return self.name.rsplit(".", 1)[0]


SCENARIO_CASES = (
    BadFile(
        "unknown_top_key.yaml",
        4,
        ("colour: unknown key 'colour'; allowed: cost_model, deployment, description, duration_s",),
    ),
    BadFile(
        "unknown_nested_key.yaml",
        5,
        (
            "engine.block_sise: unknown key 'block_sise' (did you mean 'block_size'?)",
            "max_num_seqs",
        ),
    ),
    BadFile(
        "wrong_type.yaml", 5, ("engine.max_num_seqs: 'many' is not allowed: expected an integer",)
    ),
    BadFile(
        "quoted_number.yaml", 5, ("engine.block_size: '16' is not allowed: expected an integer",)
    ),
    BadFile(
        "negative_block_size.yaml",
        5,
        ("engine.block_size: -16 is not allowed", "greater than or equal to 1"),
    ),
    BadFile(
        "duration_1e3.yaml",
        3,
        ("duration_s: '1e3' is not allowed: expected a number", "YAML 1.1", "write 1000.0"),
    ),
    BadFile(
        "name_no.yaml", 2, ("name: False is not allowed: expected a string", "quote the value")
    ),
    BadFile(
        "prefix_caching_quoted_yes.yaml",
        5,
        ("engine.enable_prefix_caching: 'yes' is not allowed: expected true or false",),
    ),
    BadFile(
        "unknown_model.yaml",
        4,
        ("deployment.model: 'gpt-5' is not allowed", f"known models: {', '.join(known_models())}"),
    ),
    BadFile(
        "unknown_gpu.yaml",
        5,
        ("deployment.gpu: 'tpu-v5' is not allowed", f"known GPUs: {', '.join(known_gpus())}"),
    ),
    BadFile(
        "bad_hash_algo.yaml",
        4,
        (
            "engine.hash_algo: 'md5' is not allowed",
            "'sha256', 'sha256_cbor', 'xxhash' or 'xxhash_cbor'",
        ),
    ),
    BadFile("bad_policy.yaml", 5, ("engine.policy: 'lifo' is not allowed", "'fcfs' or 'priority'")),
    BadFile(
        "batched_tokens_below_seqs.yaml",
        6,
        (
            "engine.max_num_batched_tokens: max_num_batched_tokens (64) must be >= ",
            "max_num_seqs (128), as vLLM requires",
        ),
    ),
    BadFile(
        "warmup_not_shorter.yaml",
        4,
        ("warmup_s: warmup_s (10.0) must be shorter than duration_s (10.0)",),
    ),
    BadFile(
        "generator_without_arrivals.yaml",
        4,
        ("workload.arrivals: required for generated traffic", "{process: poisson, rate_per_s: 2}"),
    ),
    BadFile(
        "trace_with_arrivals.yaml",
        5,
        ("workload.arrivals: a trace brings its own arrival times; remove 'arrivals'",),
    ),
    BadFile(
        "trace_with_two_counts.yaml",
        5,
        ("workload.num_arrivals: a trace takes its count from source.max_requests",),
    ),
    BadFile(
        "trace_with_tokens.yaml",
        5,
        ("workload.tokens: a trace's prompts are its block hashes, not text",),
    ),
    BadFile(
        "bad_distribution_tag.yaml",
        7,
        (
            "workload.source.answer_tokens.dist: 'normal' is not allowed",
            "allowed: 'fixed', 'uniform', 'lognormal', 'exponential'",
        ),
    ),
    BadFile(
        "uniform_low_above_high.yaml",
        7,
        ("workload.source.answer_tokens.high: 10.0 is not allowed", ">= low (50.0)"),
    ),
    BadFile(
        "cache_salt_slash.yaml",
        8,
        ("workload.source.tenants.0.cache_salt: 'acme/prod' is not allowed", "contains '/'"),
    ),
    BadFile(
        "cache_salt_empty.yaml",
        10,
        ("workload.source.tenants.1.cache_salt: '' is not allowed", "must be non-empty"),
    ),
    BadFile(
        "cache_salt_129_chars.yaml",
        9,
        ("workload.source.tenants.0.cache_salt", "129 characters; at most 128 allowed"),
    ),
    BadFile(
        "extends_missing.yaml",
        2,
        ("extends: 'no_such_base.yaml' does not exist; expected a base scenario file",),
    ),
    BadFile(
        "extends_cycle_a.yaml",
        2,
        (
            "extends: 'extends_cycle_a.yaml' makes a cycle: "
            "extends_cycle_a.yaml -> extends_cycle_b.yaml -> extends_cycle_a.yaml",
        ),
        reported_in="extends_cycle_b.yaml",
    ),
    BadFile("invalid_syntax.yaml", 5, ("invalid YAML: expected ',' or '}', but got ':'",)),
    BadFile(
        "top_level_list.yaml", 1, ("top level is a list; expected a mapping of scenario fields",)
    ),
    BadFile("empty.yaml", None, ("empty file; expected a YAML mapping",)),
    BadFile("comments_only.yaml", None, ("empty file; expected a YAML mapping",)),
    BadFile("tabs.yaml", 4, ("invalid YAML: found character '\\t' that cannot start any token",)),
    BadFile("duplicate_key.yaml", 4, ("duplicate key 'name' (first set on line 2)",)),
    BadFile("duplicate_nested_key.yaml", 7, ("duplicate key 'block_size' (first set on line 5)",)),
    BadFile(
        "python_tag.yaml",
        2,
        ("python/object/apply:os.system", "only plain YAML is read (no tags that build objects)"),
    ),
    BadFile(
        "name_with_dotdot.yaml",
        2,
        ("name: '../escape' is not allowed", "'^[A-Za-z0-9][A-Za-z0-9_.-]*$'"),
    ),
    BadFile("name_with_slash.yaml", 2, ("name: 'runs/a' is not allowed", "[A-Za-z0-9_.-]")),
    BadFile("unbounded.yaml", None, ("set duration_s or workload.num_arrivals",)),
    BadFile("infinite_duration.yaml", 3, ("duration_s: inf is not allowed", "finite number")),
    BadFile(
        "nan_rate.yaml", 5, ("workload.arrivals.rate_per_s: nan is not allowed", "finite number")
    ),
    BadFile("recursive_alias.yaml", 4, ("an alias refers to a mapping or list that contains it",)),
    BadFile("alias_bomb.yaml", 4, ("more than 100000 values once aliases are expanded",)),
    BadFile("deep_nesting.yaml", 4, ("nested deeper than 64 levels",)),
    BadFile(
        "all_rates_zero.yaml",
        5,
        ("workload.arrivals: PiecewiseRateArrivals.pieces: every rate is 0",),
    ),
    BadFile(
        "bad_cost_model.yaml",
        4,
        ("cost_model: cost model 'constant:fast'", "expected constant:<seconds>"),
    ),
    BadFile(
        "cost_model_other_gpu.yaml",
        5,
        ("cost_model:", "does not match the scenario: gpu 'h200' vs profile gpu 'h100'"),
    ),
    BadFile(
        "missing_trace_file.yaml",
        4,
        ("workload.source.path: 'no_such_trace.jsonl' does not exist", "mooncake trace file"),
    ),
    BadFile(
        "trace_path_is_directory.yaml",
        4,
        ("workload.source.path: '../traces' is a directory; expected a mooncake trace file",),
    ),
    BadFile(
        "bad_trace_format.yaml",
        4,
        # The shipped formats lead the allowed list; a registered format joins it.
        (
            "workload.source.format: 'sharegpt' is not allowed",
            "Input should be 'mooncake', 'dynamo'",
        ),
    ),
    BadFile(
        "bad_source_kind.yaml",
        5,
        ("workload.source.kind: 'video' is not allowed", "allowed: 'chat', 'agent', 'rag', "),
    ),
    BadFile("missing_source_kind.yaml", 5, ("workload.source: required field 'kind' is missing",)),
    BadFile("missing_name.yaml", None, ("name: required field is missing",)),
    BadFile("missing_workload.yaml", None, ("workload: required field is missing",)),
    BadFile("section_not_mapping.yaml", 4, ("engine: 5 is not allowed: expected a mapping",)),
    BadFile(
        "string_arrivals.yaml",
        5,
        ("workload.arrivals: 'poisson' is not allowed: expected a mapping",),
    ),
    BadFile(
        "unknown_layout.yaml",
        5,
        ("workload.source.layout: 'upside_down' is not a built-in layout", "allowed: chat"),
    ),
    BadFile("negative_seed.yaml", 3, ("seed: -1 is not allowed", "greater than or equal to 0")),
    BadFile("float_seed.yaml", 3, ("seed: 1.5 is not allowed: expected an integer",)),
    BadFile("two_documents.yaml", 4, ("invalid YAML: but found another document",)),
    BadFile("not_utf8.yaml", None, ("not UTF-8 text; expected YAML",)),
    BadFile("binary_junk.yaml", None, ("not UTF-8 text; expected YAML",)),
)

SWEEP_CASES = (
    BadFile("unknown_section.yaml", 8, ("sweep.matrix: unknown key; allowed: grid, zip, seeds",)),
    BadFile(
        "values_not_list.yaml",
        8,
        ("sweep.grid.engine.block_size: 16 is not a non-empty list of values",),
    ),
    BadFile(
        "zip_lengths_differ.yaml",
        7,
        ("sweep.zip: all lists must have the same length", "engine.max_num_seqs has 1"),
    ),
    BadFile("sweeps_name.yaml", 7, ("sweep.grid.name: 'name' cannot be swept",)),
    BadFile(
        "invalid_variant.yaml",
        8,
        ("sweep variant engine.block_size=-8: engine.block_size: -8 is not allowed",),
    ),
    BadFile("repeated_seed.yaml", 7, ("sweep.seeds: [1, 2, 1] repeats a seed",)),
    BadFile("no_sweep_mapping.yaml", None, ("no 'sweep:' mapping",)),
    BadFile(
        "duplicate_axis_key.yaml", 9, ("duplicate key 'engine.block_size' (first set on line 8)",)
    ),
)

# Trace files: the format comes from the name's first word; good_* files are fuzzing seeds.
TRACE_CASES = (
    BadFile(
        "mooncake_truncated_line.jsonl",
        3,
        ("invalid JSON (Expecting property name enclosed in double quotes at column 41)",),
    ),
    BadFile("mooncake_wrong_type.jsonl", 2, ("input_length: '1100' is not an integer",)),
    BadFile(
        "mooncake_negative_length.jsonl",
        3,
        ("output_length: -10 is out of range; allowed 1..16777216",),
    ),
    BadFile(
        "mooncake_huge_length.jsonl",
        2,
        ("input_length: 1000000000000 is out of range; allowed 1..16777216",),
    ),
    BadFile(
        "mooncake_nan_timestamp.jsonl",
        2,
        ("timestamp: nan is not allowed; use a finite number >= 0",),
    ),
    BadFile("mooncake_empty.jsonl", None, ("the file holds no records",)),
    BadFile("mooncake_blank_lines_only.jsonl", None, ("the file holds no records",)),
    BadFile("mooncake_binary_junk.jsonl", 1, ("not UTF-8 text",)),
    BadFile(
        "mooncake_unsorted.jsonl",
        2,
        ("timestamp 100 is earlier than the previous 250; the trace must be sorted",),
    ),
    BadFile(
        "mooncake_hash_count.jsonl",
        1,
        ("2 block hashes for 1100 tokens; expected 3 at trace block size 512",),
    ),
    BadFile("mooncake_not_object.jsonl", 2, ("expected a JSON object, got list",)),
    BadFile("mooncake_missing_field.jsonl", 2, ("missing field 'hash_ids'",)),
    BadFile(
        "mooncake_negative_hash.jsonl", 1, ("hash_ids: -1 is not a non-negative 64-bit integer",)
    ),
    BadFile("mooncake_bool_length.jsonl", 1, ("input_length: True is not an integer",)),
    BadFile("mooncake_deep_json.jsonl", 2, ("invalid JSON (nested too deeply)",)),
    BadFile("dynamo_event_not_object.jsonl", 1, ("event: expected an object, got str",)),
    BadFile("dynamo_no_request_end.jsonl", None, ("the trace holds no request_end events",)),
    BadFile(
        "dynamo_cached_above_input.jsonl", 1, ("cached_tokens: 32 is out of range; allowed 0..20",)
    ),
    BadFile(
        "azure_bad_header.csv",
        1,
        ("header 'time,prompt,completion' is not 'TIMESTAMP,ContextTokens,GeneratedTokens'",),
    ),
    BadFile(
        "azure_bad_timestamp.csv",
        3,
        ("TIMESTAMP '16/11/2023 18:15' is not 'YYYY-MM-DD HH:MM:SS[.fraction]'",),
    ),
    BadFile(
        "azure_negative_tokens.csv",
        2,
        ("ContextTokens: '-374' is not allowed; use an integer in 1..16777216",),
    ),
    BadFile("azure_nan_tokens.csv", 2, ("GeneratedTokens: 'NaN' is not allowed",)),
    BadFile("azure_wrong_columns.csv", 3, ("2 columns; expected 3",)),
    BadFile("azure_header_only.csv", None, ("the file holds no rows after the header",)),
    BadFile("azure_empty.csv", 1, ("the file is empty; expected a CSV header",)),
    BadFile("azure_binary_junk.csv", 2, ("not UTF-8 text",)),
)


def trace_format(file_name: str) -> str:
    """The adapter a corpus trace file is meant for: the first word of its name."""
    return file_name.split("_", 1)[0]
