"""The WebAssembly model (cm/wasm.py): its parser knows every byte's place in a module's
code from the header, finds the code in the middle of a stream from the bodies' sizes,
skips a body it does not understand; it is live in code and nowhere else (text and other
data code exactly as without it); and it codes WebAssembly better."""

from __future__ import annotations

import struct
from dataclasses import replace

import numpy as np
from mixing_probe import fed, parsed, payload, slots_changed

from rwkvzip import api
from rwkvzip.cm import wasm, x86
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.recipe import Recipe

SMALL = MixConfig(orders=(1, 2, 3, 0, 13, 11, 20, 21, 22, 24), table_bits=11,
                  match_bits=14, network=False, selectors=2, exe=True)
WASM = replace(SMALL, wasm=True)
TEXT = b"A function body is a size, its locals and instructions up to an end. " * 40


def leb(v: int) -> bytes:
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


class Code:
    """Bytes of WebAssembly with each byte's place (wasm's numbers)."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.places: list[int] = []

    def put(self, place: int, data: bytes) -> None:
        self.out += data
        self.places += [place] * len(data)

    def op(self, opcode: int, *lebs: int, fixed: bytes = b"") -> None:
        self.put(wasm.OPCODE, bytes([opcode]))
        for v in lebs:
            self.put(wasm.LEB, leb(v))
        self.put(wasm.FIXED, fixed)


def body(i: int, rng: np.random.Generator, unknown: bool = False) -> Code:
    """A function body with every kind of immediate; `unknown`: one opcode no one knows."""
    c = Code()
    c.put(wasm.LOCALS, leb(2))
    c.put(wasm.LOCAL_N, leb(1))
    c.put(wasm.LOCAL_TYPE, b"\x7f")
    c.put(wasm.LOCAL_N, leb(300))
    c.put(wasm.LOCAL_TYPE, b"\x7c")
    for _ in range(10 + int(rng.integers(20))):
        r = int(rng.integers(14))
        if r == 0:
            c.op(0x02, 0x40)  # block
        elif r == 1:
            c.op(0x20, int(rng.integers(4)))  # local.get
        elif r == 2:
            c.op(0x10, 1000 + int(rng.integers(3)))  # call
        elif r == 3:
            c.op(0x28, 2, 16 * int(rng.integers(40)))  # i32.load align, offset
        elif r == 4:
            c.op(0x41, 1 << int(rng.integers(30)))  # i32.const
        elif r == 5:
            c.op(0x0E, 3, 0, 1, 2, 0)  # br_table: 3 labels and the default
        elif r == 6:
            c.op(0x44, fixed=struct.pack("<d", i / 7))  # f64.const
        elif r == 7:
            c.op(0x43, fixed=struct.pack("<f", 2.5))  # f32.const
        elif r == 8:
            c.op(0xFC, 10, 0, 0)  # memory.copy
        elif r == 9:
            c.op(0xFD, 12, fixed=bytes(range(16)))  # v128.const
        elif r == 10:
            c.op(0xFD, 22, fixed=b"\x03")  # a lane
        elif r == 11:
            c.op(0x1C, 1, 0x7F)  # select t
        elif r == 12:
            c.op(0x6A)  # i32.add
        else:
            c.op(0x0B if rng.random() < 0.3 else 0x1A)  # end (of a block), drop
    if unknown:
        c.put(wasm.OPCODE, b"\xff")  # no such opcode: the rest of the body is skipped
        c.put(wasm.SKIP, b"\x01\x02\x03\x0b")
    else:
        c.op(0x0B)
    whole = Code()
    whole.put(wasm.FN_SIZE, leb(len(c.out)))
    whole.out += c.out
    whole.places += c.places
    return whole


def module(functions: int = 20, seed: int = 1, unknown: int = -1) -> Code:
    """A module: header, a type section, the code section, a data section."""
    rng = np.random.default_rng(seed)
    m = Code()
    m.put(wasm.NONE, b"\x00asm\x01\x00\x00\x00")
    m.put(wasm.SEC_ID, b"\x01")
    m.put(wasm.SEC_SIZE, leb(4))
    m.put(wasm.SEC_BODY, b"\x01\x60\x00\x00")
    bodies = [body(i, rng, i == unknown) for i in range(functions)]
    size = len(leb(functions)) + sum(len(b.out) for b in bodies)
    m.put(wasm.SEC_ID, b"\x0a")
    m.put(wasm.SEC_SIZE, leb(size))
    m.put(wasm.FN_COUNT, leb(functions))
    for b in bodies:
        m.out += b.out
        m.places += b.places
    data = b"strings and tables " * 20
    m.put(wasm.SEC_ID, b"\x0b")
    m.put(wasm.SEC_SIZE, leb(len(data)))
    m.put(wasm.SEC_BODY, data)
    return m


def parse(data: bytes) -> list[int]:
    """The place the parser puts each byte of data in."""
    return [p for (p,) in parsed(data, WASM, wasm.read_byte, wasm.S_W_PLACE)]


def test_the_parser_knows_every_byte_of_a_module():
    m = module()
    assert parse(bytes(m.out)) == m.places


def test_a_body_not_understood_is_skipped_and_the_next_followed():
    m = module(unknown=5)
    assert wasm.SKIP in m.places
    assert parse(bytes(m.out)) == m.places


def test_a_section_size_beyond_reason_ends_the_parse_until_the_next_header():
    bad = b"\x00asm\x01\x00\x00\x00\x0a" + b"\xff" * 8 + b"\x7f" + bytes(100)
    m = module()
    got = parse(bad + bytes(m.out))
    assert set(got[len(bad) - 100:len(bad)]) == {wasm.NONE}
    assert got[len(bad):] == m.places


def test_code_is_found_in_the_middle_of_a_stream():
    m = module(60)
    starts = [i for i, p in enumerate(m.places) if p == wasm.FN_SIZE and m.places[i - 1] != p]
    cut = starts[3] + 5  # inside the fourth body: no header
    got = parse(bytes(m.out[cut:]))
    synced = got.index(wasm.FN_SIZE)
    assert synced < starts[9] - cut  # after three bodies confirm their sizes
    code_end = m.places.index(wasm.SEC_ID, starts[-1]) - cut
    assert got[synced:code_end] == m.places[cut + synced:cut + code_end]


def test_text_and_other_data_code_exactly_as_without_it():
    rng = np.random.default_rng(5)
    other = rng.integers(0, 256, 20000, dtype=np.uint8).tobytes()  # ends (0B) by chance
    for data in (TEXT, other):
        assert payload(data, WASM) == payload(data, SMALL)
        assert fed(data, WASM).S[wasm.S_W_SEL] == -1


def test_code_codes_smaller_and_decodes():
    data = bytes(module(200).out)
    assert len(payload(data, WASM)) < 0.9 * len(payload(data, SMALL))
    assert api.decompress(api.compress(data, Recipe(mix=WASM))) == data


def test_the_contexts_follow_the_place_and_the_other_models_step_aside():
    from test_x86 import calling_code as x86_code

    m = module()
    end = m.places.index(wasm.LEB, len(m.out) // 2) + 1  # inside an immediate
    data = bytes(m.out[:end])
    assert slots_changed(data, WASM, SMALL) == [0, 0, 0, 1, 0, 0, 1, 1, 1, 1]
    S = fed(x86_code() + data, replace(WASM, x86=True)).S
    assert S[wasm.S_W_SEL] >= 0 and S[x86.S_X86_SEL] == -1
