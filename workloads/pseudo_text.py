"""Deterministic filler text per content identity, for text mode when no verbatim text is given."""

from __future__ import annotations

import numpy as np
import tiktoken

from workloads.synthetic_tokens import content_seed

# Common English words; nearly all are one cl100k token with their leading space.
_WORD_LIST = (
    "the of and to in is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there been one all we their has would when if so what no "
    "more out up into do any your can some time could my than first other new then them these "
    "may only its about people over such our after most made also did many before must through "
    "years where much way well down should because each just those how too little state good "
    "very make world still own see men work long here get both between life being under never "
    "day same another know while last might us great old year off come since against go came "
    "right used take three place small found part general high every however without point "
    "system model cache block token request server memory query answer document tool result "
    "value table file data user agent search index window batch queue order level number group"
)
WORDS = tuple(_WORD_LIST.split())

_SENTENCE_WORDS = 12


def pseudo_tokens(content_id: str, num_tokens: int, encoding: tiktoken.Encoding) -> list[int]:
    """The first `num_tokens` tokens of `content_id`'s filler text (each word is >= 1 token)."""
    if num_tokens == 0:
        return []
    rng = np.random.default_rng(content_seed(content_id))
    picks = rng.integers(len(WORDS), size=num_tokens)
    words = [WORDS[index] for index in picks.tolist()]
    sentences = [
        " ".join(words[start : start + _SENTENCE_WORDS]).capitalize() + "."
        for start in range(0, len(words), _SENTENCE_WORDS)
    ]
    return encoding.encode_ordinary(" ".join(sentences))[:num_tokens]
