"""Text mode: real cl100k tokens through ChatML and Llama-3 templates."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from wl_helpers import chained_block_hashes

from workloads.api import ChatConfig, CommonSlots, Fixed, PoissonArrivals, TokenConfig, Workload
from workloads.chat_templates import base_encoding
from workloads.prompt import Piece
from workloads.text_tokens import TextTokens


def test_known_strings_tokenize_to_known_cl100k_ids() -> None:
    encoding = base_encoding()
    assert encoding.encode("hello world") == [15339, 1917]
    assert encoding.encode("Hello, world!") == [9906, 11, 1917, 0]
    assert encoding.encode("You are a helpful assistant.") == [2675, 527, 264, 11190, 18328, 13]


def _two_messages() -> list[Piece]:
    return [
        Piece("system_prompt", "s", "system", 0, "Hi"),
        Piece("question", "q", "user", 0, "Hello, world!"),
    ]


def test_chatml_render_gives_exact_segments() -> None:
    segments = TextTokens("chatml").render(_two_messages())
    # <|im_start|>=151644, <|im_end|>=151645, "system"=9125, "user"=882, "assistant"=78191.
    assert [(segment.name, segment.tokens) for segment in segments] == [
        ("template", [151644, 9125, 198]),
        ("system_prompt", [13347]),
        ("template", [151645, 198, 151644, 882, 198]),
        ("question", [9906, 11, 1917, 0]),
        ("template", [151645, 198, 151644, 78191, 198]),
    ]
    assert segments[0].content_id == "template:<|im_start|>system\n"


def test_llama3_render_gives_exact_segments() -> None:
    segments = TextTokens("llama3").render(_two_messages())
    # begin_of_text=128000, start/end header=128006/128007, eot=128009, "\n\n"=271.
    assert [(segment.name, segment.tokens) for segment in segments] == [
        ("template", [128000, 128006, 9125, 128007, 271]),
        ("system_prompt", [13347]),
        ("template", [128009, 128006, 882, 128007, 271]),
        ("question", [9906, 11, 1917, 0]),
        ("template", [128009, 128006, 78191, 128007, 271]),
    ]


_texts = st.text(alphabet=st.sampled_from(list("ab .,\n\t'é1")), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(_texts, min_size=1, max_size=4),
    roles=st.lists(st.sampled_from(["system", "user"]), min_size=4, max_size=4),
)
def test_rendered_tokens_equal_one_encode_of_the_whole_prompt(
    texts: list[str], roles: list[str]
) -> None:
    tokens = TextTokens("chatml")
    pieces = [
        Piece("question", f"id{index}", roles[index], 0, text) for index, text in enumerate(texts)
    ]
    rendered = [token for segment in tokens.render(pieces) for token in segment.tokens]
    whole_text = tokens.encoding.decode(rendered)
    assert rendered == tokens.encode(whole_text)


def test_filler_text_and_answers_have_exact_lengths() -> None:
    tokens = TextTokens("chatml")
    assert len(tokens.output_tokens("answer/1", 37)) == 37
    assert tokens.output_tokens("answer/1", 37) == tokens.output_tokens("answer/1", 37)
    assert tokens.output_tokens("answer/1", 37) != tokens.output_tokens("answer/2", 37)
    piece = Piece("history", "answer/1", "assistant", 37)
    assert tokens.encoding.decode(tokens.output_tokens("answer/1", 37)) == tokens.piece_text(piece)


def _first_turn_tokens(system_prompt_text: str) -> list[int]:
    config = ChatConfig(
        turns_per_session=Fixed(1),
        user_message_tokens=Fixed(20),
        common=CommonSlots(system_prompt_tokens=0, system_prompt_text=system_prompt_text),
    )
    workload = Workload(
        config, PoissonArrivals(1.0), num_arrivals=1, seed=3, tokens=TokenConfig(mode="text")
    )
    return next(iter(workload)).prompt_tokens()


def test_one_space_change_in_system_prompt_changes_exactly_the_blocks_from_that_point() -> None:
    sentence = (
        "You are a careful assistant for a database company. Answer briefly and cite sources. "
    )
    original = sentence * 6
    change_at = len(sentence) * 3 + len("You are a")  # the space before "careful" in sentence 4
    edited = original[:change_at] + " " + original[change_at:]
    before, after = _first_turn_tokens(original), _first_turn_tokens(edited)

    # The token holding the changed character, located in the original prompt's text.
    tokens = TextTokens("chatml")
    _, offsets = tokens.encoding.decode_with_offsets(before)
    prompt_text = tokens.encoding.decode(before)
    changed_char = prompt_text.index(original) + change_at
    changed_token = max(index for index, offset in enumerate(offsets) if offset <= changed_char)
    first_difference = next(
        index for index, (a, b) in enumerate(zip(before, after, strict=False)) if a != b
    )
    assert first_difference == changed_token
    assert len(after) == len(before) + 1  # " careful" became " " + " careful"

    block_size = 16
    hashes_before = chained_block_hashes(before, block_size)
    hashes_after = chained_block_hashes(after, block_size)
    changed_block = changed_token // block_size
    assert changed_block >= 2  # the change is well inside the prompt
    assert hashes_before[:changed_block] == hashes_after[:changed_block]
    assert all(
        a != b
        for a, b in zip(hashes_before[changed_block:], hashes_after[changed_block:], strict=False)
    )
