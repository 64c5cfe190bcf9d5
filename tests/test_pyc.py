"""The .pyc model (cm/pyc.py): its parser knows every byte's field of compiled modules
(checked against a reference reader of marshal's format), stops at a broken one and takes
the next; it is live in modules and nowhere else (text and other data code exactly as
without it); and it codes compiled modules better."""

from __future__ import annotations

import importlib.util
import marshal
import struct
from dataclasses import replace

import numpy as np
from mixing_probe import fed, parsed, payload, slots_changed

from rwkvzip import api
from rwkvzip.cm import pyc, x86
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.recipe import Recipe

SMALL = MixConfig(orders=(1, 2, 3, 0, 13, 11, 20, 21, 22, 24), table_bits=11,
                  match_bits=14, network=False, selectors=2, exe=True)
PYC = replace(SMALL, pyc=True)
TEXT = b"A compiled module is one marshal object: a code object and what it holds. " * 40

SOURCE = '''
"""A module with every kind of constant: {i}."""
import os

RATE = {i}.25 + 3j
BIG = -12676506002282294014967032053760{i}
FLAGS = frozenset({{"a", "b"}})
DATA = b"\\x00\\x01"


class Thing:
    """A class."""

    def __init__(self, name, *args, **kw):
        self.name = name
        self.items = [x * {i} for x in args if x]

    def __repr__(self):
        try:
            return f"Thing({{self.name!r}})"
        except ValueError:
            return None


def outer(a, b=({i}, "two", ...)):
    def inner(c):
        return a + c + len(os.sep)
    return inner(b) if a else lambda z: -z
'''


def module(i: int) -> bytes:
    """A .pyc (header and marshal data) of SOURCE, as this Python writes it."""
    code = compile(SOURCE.format(i=i), f"mod{i}.py", "exec")
    consts = (*code.co_consts, {"k": i, 2: (None, True)})  # and a dict (marshal's '{')
    code = code.replace(co_consts=consts)
    header = importlib.util.MAGIC_NUMBER + struct.pack("<III", 0, 1700000000 + i, 400)
    return header + marshal.dumps(code)


def reference_fields(data: bytes) -> list[int]:
    """Each byte's field, by a reader written from marshal.c (3.11's code object)."""
    fields = [pyc.NONE] * len(data)

    def mark(p: int, n: int, f: int) -> int:
        fields[p:p + n] = [f] * n
        return p + n

    def obj(p: int) -> int:
        t = chr(data[p] & 0x7F)
        p = mark(p, 1, pyc.TYPE)
        if t in "NTF.S0":
            return p
        if t in "ir":
            return mark(p, 4, pyc.INT if t == "i" else pyc.REF)
        if t in "gy":
            return mark(p, 8 if t == "g" else 16, pyc.FLOAT)
        if t == "l":
            n = abs(struct.unpack_from("<i", data, p)[0])
            return mark(mark(p, 4, pyc.LONG_LEN), 2 * n, pyc.LONG_DIGITS)
        if t in "zZ":
            return mark(mark(p, 1, pyc.LEN1), data[p], pyc.BODY)
        if t in "aAuts":
            n = struct.unpack_from("<i", data, p)[0]
            return mark(mark(p, 4, pyc.LEN4), n, pyc.BODY)
        if t in ")([<>":
            n = data[p] if t == ")" else struct.unpack_from("<i", data, p)[0]
            p = mark(p, 1 if t == ")" else 4, pyc.LEN1 if t == ")" else pyc.LEN4)
            for _ in range(n):
                p = obj(p)
            return p
        if t == "{":
            while data[p] != ord("0"):
                p = obj(obj(p))
            return mark(p, 1, pyc.TYPE)
        assert t == "c", t
        p = mark(p, 20, pyc.CODE_INTS)
        for _ in range(8):  # code, consts, names, local names and kinds, file, name, qualname
            p = obj(p)
        p = mark(p, 4, pyc.FIRST_LINE)
        return obj(obj(p))  # line table, exception table

    p = 0
    while p < len(data):
        at = data.find(importlib.util.MAGIC_NUMBER, p)
        if at < 0:
            break
        mark(at + 4, 12, pyc.HEADER)
        p = obj(at + 16)
    return fields


def parse(data: bytes) -> tuple[list[int], list[int]]:
    """The field and role the parser puts each byte of data in."""
    seen = parsed(data, PYC, pyc.read_byte, pyc.S_P_FIELD, pyc.S_P_ROLE)
    return [f for f, _ in seen], [r for _, r in seen]


def parsed_fields(data: bytes) -> list[int]:
    return parse(data)[0]


def test_the_parser_knows_every_byte_of_a_module():
    data = module(1) + b"\x00between modules\x00" + module(2)
    expected = reference_fields(data)
    assert expected.count(pyc.REF) > 20 and expected.count(pyc.LONG_DIGITS) > 0
    assert parsed_fields(data) == expected


def test_a_broken_module_ends_the_parse_and_the_next_is_followed():
    one, two = bytearray(module(1)), module(2)
    fields = reference_fields(bytes(one))
    at = fields.index(pyc.TYPE, 100)
    one[at] = ord("?")  # no such type
    got = parsed_fields(bytes(one) + two)
    assert set(got[at + 1:len(one)]) == {pyc.NONE}
    assert got[len(one):] == reference_fields(two)


def test_a_header_without_a_code_object_is_not_a_module():
    data = importlib.util.MAGIC_NUMBER + bytes(12) + marshal.dumps((1, 2, "three")) * 20
    assert set(parsed_fields(data)[17:]) == {pyc.NONE}


def test_text_and_other_data_code_exactly_as_without_it():
    rng = np.random.default_rng(5)
    other = rng.integers(0, 256, 6000, dtype=np.uint8).tobytes()
    for data in (TEXT, other):
        assert payload(data, PYC) == payload(data, SMALL)
        assert fed(data, PYC).S[pyc.S_P_SEL] == -1


def test_modules_code_smaller_and_decode():
    data = b"".join(module(i) for i in range(12))
    assert len(payload(data, PYC)) < 0.95 * len(payload(data, SMALL))
    assert api.decompress(api.compress(data, Recipe(mix=PYC))) == data


def test_the_contexts_follow_the_field_and_the_other_models_step_aside():
    from test_x86 import calling_code as x86_code

    data = module(1)
    fields, roles = parse(data)
    lines = pyc.ROLE_FIELD + pyc.F_LINES
    end = max(i for i, (f, r) in enumerate(zip(fields, roles, strict=True))
              if f == pyc.BODY and r == lines)
    assert slots_changed(data[:end], PYC, SMALL) == [0, 0, 0, 1, 0, 0, 1, 1, 1, 1]
    S = fed(x86_code() + data[:end], replace(PYC, x86=True)).S
    assert S[pyc.S_P_SEL] >= 0 and S[x86.S_X86_SEL] == -1
    doc = bytes(data).index(b"A module with") + 3  # in a docstring: the text models'
    assert fed(data[:doc], PYC).S[pyc.S_P_SEL] == -1
