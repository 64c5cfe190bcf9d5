"""The text kinds (20 ... 24: the words before the current one, the line above, the column), the
order-2 APM (mix field sse2), two- and four-way tables (ways) and the third mixer
(selectors 3): what they read, that they model text better than without them, and that
recipes without them code exactly as before."""

from dataclasses import replace

import numpy as np
from mixing_probe import fed, payload

from rwkvzip import api
from rwkvzip.cm import context, mixer
from rwkvzip.cm.history import next_word
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.net.rwkv7.model import Rwkv7Config
from rwkvzip.recipe import Recipe

PLAIN = MixConfig(orders=(1, 2, 3, 0), table_bits=11, match_bits=14, network=False)
TEXT = replace(PLAIN, orders=PLAIN.orders + (context.KIND_WORD_BIGRAM,
                                             context.KIND_WORD_TRIGRAM,
                                             context.KIND_WORD_SKIP,
                                             context.KIND_LINE_ABOVE))


def word_hash(word: bytes) -> int:
    h = 0
    for c in word:
        h = next_word(h, c)
    return h


def line_above(data: bytes) -> int:
    arrays = fed(data, PLAIN)
    S, HB = arrays.S, arrays.HB
    return context.line_above(S, HB, S[context.S_POS], (1 << S[context.S_HBITS]) - 1)


def phrases(n_lines: int, seed: int) -> bytes:
    """Lines of words where each word follows from the two before it (a second-order word
    chain over a small vocabulary), in fixed-width columns: what the text kinds read."""
    rng = np.random.default_rng(seed)
    vocab = [bytes(rng.choice(list(b"etaoinshrdlucmfw"), rng.integers(2, 8)))
             for _ in range(40)]
    follow = rng.integers(0, len(vocab), (len(vocab), len(vocab), 2))
    a, b, lines = 0, 1, []
    for _ in range(n_lines):
        words = []
        for _ in range(6):
            a, b = b, follow[a, b, rng.integers(0, 2)]
            words.append(vocab[b].ljust(8))
        lines.append(b"| " + b"".join(words).rstrip() + b"\n")
    return b"".join(lines)


def test_the_words_before_are_kept_case_folded():
    S = fed(b"Alpha BETA, gamma de", PLAIN).S
    assert S[context.S_WORD1] == word_hash(b"gamma")
    assert S[context.S_WORD2] == word_hash(b"beta")
    assert S[context.S_WORD] == word_hash(b"de")
    S = fed(b"one two  ", PLAIN).S  # a second separator shifts nothing
    assert (S[context.S_WORD1], S[context.S_WORD2]) == (word_hash(b"two"), word_hash(b"one"))


def test_the_line_above_is_the_byte_at_this_column():
    assert line_above(b"abcdef\nxy") == ord("c")
    assert line_above(b"first\n") == ord("f")
    assert line_above(b"one\nab\nxyz") == 256  # the line above is shorter
    assert line_above(b"no newline yet") == 256


def column_context(data: bytes) -> int:
    """KIND_COLUMN's context for the byte after `data`."""
    mix = replace(PLAIN, orders=PLAIN.orders + (context.KIND_COLUMN,))
    S = fed(data, mix).S
    return int(S[context.S_CTX + len(mix.orders) - 1])


def test_the_column_kind_reads_the_column_and_the_last_byte_but_not_which_letter():
    at_nine = column_context(b"hello wor")
    assert column_context(b"jumps abc") == at_nine  # letters are one value
    assert column_context(b"first line\nhello wor") == at_nine  # columns count from the LF
    assert column_context(b"hello wo,") != at_nine  # any other byte is itself
    assert column_context(b"hello, wo,") != column_context(b"hello wo,")  # the column
    assert column_context(b"x" * 300) == column_context(b"y" * 400)  # capped at COLUMN_CAP


def wrapped(words: int, width: int, seed: int) -> bytes:
    """Words of random letters and lengths filled into lines of at most `width` columns:
    where a line ends depends on its column, which no other kind reads."""
    rng = np.random.default_rng(seed)
    lines, line = [], b""
    for _ in range(words):
        word = bytes(rng.choice(list(b"etaoinshrdlu"), rng.integers(1, 9)))
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = line + b" " + word if line else word
    return b"\n".join(lines + [line]) + b"\n"


def test_the_column_kind_models_wrapped_text_better():
    data = wrapped(2500, 60, 5)
    column = replace(TEXT, orders=TEXT.orders + (context.KIND_COLUMN,))
    assert len(payload(data, column)) < 0.97 * len(payload(data, TEXT))


def test_each_models_text_better():
    """The text kinds; then each on top of them: the order-2 APM, two-way tables (small
    tables here, so contexts collide often), a third mixer."""
    data = phrases(150, 1)
    plain, text = len(payload(data, PLAIN)), len(payload(data, TEXT))
    assert text < 0.9 * plain
    for extra in ({"sse2": True}, {"ways": 2}, {"ways": 4}, {"selectors": 3}):
        assert len(payload(data, replace(TEXT, **extra))) < text, extra


def test_roundtrip_and_without_them_nothing_changes():
    sample = phrases(60, 2) + bytes(range(256)) * 4
    net = Rwkv7Config(hidden=64, layers=1, ffn=128, decay_rank=8, a_rank=8, v_rank=8,
                      g_rank=16)
    every = replace(TEXT, sse2=True, ways=2, selectors=3)
    learns = Recipe(model=net, lr=0.002, bptt=4, ckpt=2, mix=replace(every, network=True))
    for recipe, data in ((Recipe(mix=TEXT), sample), (Recipe(mix=every), sample),
                         (learns, sample[:3000])):  # the network's gradient through 3 mixers
        blob = api.compress(data, recipe)
        assert api.decompress(blob) == data
        assert api.compress(data, recipe) == blob
        assert Recipe.from_json(recipe.to_json()) == recipe
    # a recipe without the APM keeps its JSON and its mixer's array size (old cards' vectors
    # are checked bit for bit by test_golden)
    assert "sse2" not in PLAIN.to_dict()
    with_apm = replace(PLAIN, sse2=True).layout(1)[1] - PLAIN.layout(1)[1]
    assert with_apm == (256 << context.SSE2_BITS) * mixer.APM_CELLS
