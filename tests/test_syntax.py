"""The syntax model (cm/syntax.py): the punctuation path of a line or string and the current
token, in the spreadsheet kinds' slots while they are idle; absent under a followed record
chain and a live bitmap, the executable model's words while that model is live; a card
without it codes exactly as before, and text with it codes better."""

import json
import random
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from mixing_probe import fed, payload

from rwkvzip import api
from rwkvzip.cm import context, exe, image, sheet, syntax
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.recipe import Recipe

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from make_golden import bitmap, code, golden_input  # noqa: E402
from make_golden import sheet as worksheet  # noqa: E402

SMALL = MixConfig(orders=(1, 2, 3, 0, 13, 11, 16, 17, 18, 20, 21), table_bits=11,
                  match_bits=14, network=False, selectors=2, exe=True)
SYNTAX = replace(SMALL, syntax=True)
FIELD, COL, ABOVE = 6, 7, 8  # the slots of kinds 16, 17 and 18 in SMALL's orders
SOURCE = (b"int main(int argc, char **argv) {\n    if (argc > 1) {\n"
          b"        printf(\"%s: %d\\n\", argv[1], argc);\n    }\n    return 0;\n}\n") * 12


def slots(S) -> tuple[int, int, int]:
    return S[context.S_CTX + FIELD], S[context.S_CTX + COL], S[context.S_CTX + ABOVE]


ABSENT = (context.ABSENT,) * 3


def test_the_path_and_token_follow_the_punctuation_of_a_line_or_string():
    S = fed(b"x: int = f(a, b)\nstatic:t1=r1;0;1", SYNTAX).S
    assert S[syntax.S_SY_PATH] == int.from_bytes(b":=;;", "big")  # since the line feed
    assert S[syntax.S_SY_TOKEN] != 0 and S[syntax.S_SY_LENGTH] == 1  # in the token "1"
    S = fed(b"a_long_name_of_twenty", SYNTAX).S
    assert S[syntax.S_SY_PATH] == 0 and S[syntax.S_SY_LENGTH] == 21
    assert slots(S)[2] == syntax.context_hash(context.KIND_SHEET_ABOVE, 0, syntax.LENGTH_CAP)
    S = fed(b"abc\x00", SYNTAX).S  # a NUL starts a new string
    assert S[syntax.S_SY_PATH] == S[syntax.S_SY_TOKEN] == S[syntax.S_SY_LENGTH] == 0
    assert slots(S) == tuple(syntax.context_hash(k, 0, 0) for k in syntax.KINDS)


def test_the_contexts_tell_tokens_and_paths_apart():
    a, b = fed(b"f(a, b", SYNTAX).S, fed(b"f(a; b", SYNTAX).S
    assert slots(a)[0] != slots(b)[0] and slots(a)[1] != slots(b)[1]
    c, d = fed(b"(abc", SYNTAX).S, fed(b"(abd", SYNTAX).S  # same path, other token
    assert slots(c)[0] != slots(d)[0] and slots(c)[1] != slots(d)[1]  # a(1) differs too
    e, f = fed(b"x.(abc", SYNTAX).S, fed(b"y.(abc", SYNTAX).S  # the same path and token
    assert slots(e) == slots(f)
    g, h = fed(b"(name", SYNTAX).S, fed(b"(size", SYNTAX).S  # tokens of one length
    assert slots(g)[0] != slots(h)[0] and slots(g)[2] == slots(h)[2]


def test_without_it_the_slots_stay_absent_and_a_card_codes_as_before():
    assert slots(fed(SOURCE, SMALL).S) == ABSENT
    assert payload(SOURCE, SMALL) != payload(SOURCE, SYNTAX)
    short = replace(SMALL, orders=(1, 2, 3, 0, 13, 11, 16, 17, 20, 21))  # no kind 18
    with pytest.raises(ValueError, match="syntax needs"):
        replace(short, syntax=True).validate()


def test_it_yields_to_a_followed_record_chain_and_a_bitmap():
    S = fed(worksheet()[:-4], SYNTAX).S
    assert sheet.following(S)
    assert slots(S) == slots(fed(worksheet()[:-4], SMALL).S)  # the sheet's own contexts
    pic = replace(SYNTAX, image=True)
    S = fed(bitmap() * 3, pic).S
    assert image.live(S) and slots(S) == ABSENT


def test_on_machine_code_the_executable_model_takes_the_slots():
    S = fed(golden_input()[:600] + code(), SYNTAX).S
    assert S[exe.S_EXE_SEL] >= 0  # live
    j = (S[context.S_POS] - S[exe.S_EXE_PHASE]) & 3
    hist = S[context.S_HIST]
    part = (hist & ((1 << (8 * j)) - 1)) | (1 << (8 * j))
    hb = np.frombuffer(golden_input()[:600] + code(), dtype=np.uint8)
    n = len(hb)
    before, before2 = exe.word_before(hb, -1, n - j), exe.word_before(hb, -1, n - j - 4)

    def word_context(k, x):
        h = context.mixh(context.mixh(exe.hash32(k * 0x2545F491 + 0x3C6EF372), j), part)
        return context.mixh(h, x)

    assert slots(S) == (
        word_context(context.KIND_SHEET_FIELD, exe.fields(before) | (exe.fields(before2) << 8)),
        word_context(context.KIND_SHEET_COL, (before >> (24 - 8 * j)) & 0xFF),
        word_context(context.KIND_SHEET_ABOVE, before2 >> 16))


def nested_json(lines: int = 400, seed: int = 4) -> bytes:
    """JSON lines of nested objects and arrays, the same every time (not a file of ours,
    which would change under the test)."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "count", "name", "value", "items", "id", "tags"]

    def value(depth: int):
        if depth > 2 or rng.random() < 0.3:
            return rng.choice([rng.randint(0, 999), rng.choice(words),
                               [rng.randint(0, 9) for _ in range(rng.randint(0, 3))]])
        return {rng.choice(words): value(depth + 1) for _ in range(rng.randint(1, 4))}

    return "\n".join(json.dumps(value(0)) for _ in range(lines)).encode()


def test_structured_text_compresses_better_and_everything_roundtrips():
    data = nested_json()[:12000]  # measured 1,663 -> 1,527 bytes with this small config
    assert len(payload(data, SYNTAX)) < 0.95 * len(payload(data, SMALL))
    source = (Path(__file__).resolve().parents[1] / "rwkvzip" / "cm" / "syntax.py").read_bytes()
    for data in (source[:3000], golden_input()[:600] + code(), worksheet(), bitmap()):
        assert api.decompress(api.compress(data, Recipe(mix=SYNTAX))) == data


NESTED = replace(SYNTAX, orders=SYNTAX.orders + (context.KIND_SHEET_LEFT,), nest=True)
LEFT = len(NESTED.orders) - 1  # kind 19's slot


def lisp(n: int, seed: int) -> bytes:
    """Nested lists whose tokens depend on their depth (a head word a level, numbers or names
    inside), on lines of any length: what the nesting context reads."""
    rng = np.random.default_rng(seed)
    heads = [b"defun", b"let", b"cond", b"if", b"car"]
    names = [b"x", b"rest", b"acc", b"n", b"head"]

    def form(depth: int) -> bytes:
        parts = [heads[min(depth, 4)]]
        for _ in range(int(rng.integers(1, 4))):
            if depth < 4 and rng.random() < 0.5:
                parts.append(form(depth + 1))
            else:
                parts.append(names[int(rng.integers(0, 5))] if depth % 2 else
                             b"%d" % int(rng.integers(0, 9)))
        return b"(" + b" ".join(parts) + b")"

    return b"\n".join(form(0) for _ in range(n)) + b"\n"


def test_the_nesting_follows_brackets_and_quotes():
    S = fed(b'(a [b {c "d', NESTED).S
    assert S[syntax.S_SY_DEPTH] == 3 and S[syntax.S_SY_QUOTE] == 1
    S = fed(b'(a) ] "q" ' + b"(" * 9, NESTED).S  # no depth below 0; capped
    assert S[syntax.S_SY_DEPTH] == syntax.NEST_CAP and S[syntax.S_SY_QUOTE] == 0
    inner, outer = fed(b"((abc", NESTED).S, fed(b"(xy abc", NESTED).S
    assert S[context.S_CTX + LEFT] != inner[context.S_CTX + LEFT]
    assert inner[context.S_CTX + LEFT] != outer[context.S_CTX + LEFT]  # same token, depths
    assert outer[context.S_CTX + LEFT] == syntax.context_hash(
        context.KIND_SHEET_LEFT, 2, outer[syntax.S_SY_TOKEN])
    plain = replace(NESTED, nest=False)
    assert fed(b"((abc", plain).S[context.S_CTX + LEFT] == context.ABSENT  # idle without it
    with pytest.raises(ValueError, match="nest needs"):
        replace(SYNTAX, nest=True).validate()  # no kind 19


def test_nested_lists_compress_better_with_the_nesting():
    data = lisp(150, 3)
    plain = replace(NESTED, nest=False)
    assert len(payload(data, NESTED)) < 0.98 * len(payload(data, plain))
    assert api.decompress(api.compress(data, Recipe(mix=NESTED))) == data
