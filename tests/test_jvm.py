"""The class-file model (cm/jvm.py): its parser knows every byte's field of a class file,
stops at a broken one and takes the next; it is live in classes and nowhere else (text and
other data code exactly as without it); its references' transform decodes, also across the
codec's blocks; and it codes class files better."""

from __future__ import annotations

import struct
from dataclasses import replace

import numpy as np
from mixing_probe import coded_as_learned, fed, parsed, payload, slots_changed

from rwkvzip import api
from rwkvzip.cm import jvm, x86
from rwkvzip.cm.mixing import MixConfig
from rwkvzip.coding import codec, coder
from rwkvzip.recipe import Recipe

SMALL = MixConfig(orders=(1, 2, 3, 0, 13, 11, 20, 21, 22, 24), table_bits=11,
                  match_bits=14, network=False, selectors=2, exe=True)
JVM = replace(SMALL, jvm=True)
TEXT = b"A class file is a tree of fields whose sizes the bytes before them tell. " * 40


class ClassWriter:
    """Writes a class file and remembers each byte's field (jvm's numbers)."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.fields: list[int] = []

    def put(self, field: int, data: bytes) -> None:
        self.out += data
        self.fields += [field] * len(data)

    def u1(self, field: int, v: int) -> None:
        self.put(field, bytes([v]))

    def u2(self, field: int, v: int) -> None:
        self.put(field, struct.pack(">H", v))

    def u4(self, field: int, v: int) -> None:
        self.put(field, struct.pack(">i" if v < 0 else ">I", v))

    def utf(self, s: str) -> None:
        self.u1(jvm.TAG, 1)
        self.u2(jvm.UTF_LEN, len(s))
        self.put(jvm.UTF, s.encode())


def code_of(w: ClassWriter, at: int, n: int) -> None:
    """A method body with every kind of operand: plain opcodes, index operands, wide,
    tableswitch and lookupswitch (with their padding) and branches; `at` is the code's
    offset of its first byte (for the switches' padding), n varies the body."""
    start = len(w.out)

    def op(o: int, field_bytes: bytes = b"") -> None:
        w.u1(jvm.OPCODE, o)
        if field_bytes:
            w.put(jvm.OPERAND, field_bytes)

    op(0x2A)  # aload_0
    op(0xB7, struct.pack(">H", 1))  # invokespecial #1
    op(0x10, bytes([n]))  # bipush n
    op(0xC4)  # wide
    op(0x84, struct.pack(">Hh", 300, -2))  # iinc 300, -2
    op(0xC4)
    op(0x15, struct.pack(">H", 260))  # iload 260
    op(0xAA)  # tableswitch
    w.put(jvm.SW_PAD, bytes((at - (len(w.out) - start)) & 3))
    for v in (40, 1, 3, 10, 20, 30):  # default, low, high, three offsets
        w.u4(jvm.SW_INT, v)
    op(0xAB)  # lookupswitch
    w.put(jvm.SW_PAD, bytes((at - (len(w.out) - start)) & 3))
    for v in (50, 2, -7, 11, 9000, 12):  # default, npairs, two pairs
        w.u4(jvm.SW_INT, v)
    op(0x12, bytes([14]))  # ldc #14
    op(0x13, struct.pack(">H", 17))  # ldc_w #17
    op(0xB4, struct.pack(">H", 19))  # getfield #19
    op(0xA7, struct.pack(">h", -3))  # goto
    op(0xB9, struct.pack(">HBB", 1, 1, 0))  # invokeinterface
    op(0xB1)  # return


def class_file(i: int) -> ClassWriter:
    """A class with every kind of constant-pool entry, a field, two methods with Code,
    exception, line and local-variable tables, and a class attribute the parser skips."""
    w = ClassWriter()
    w.put(jvm.NONE, b"\xca\xfe\xba\xbe")
    w.u2(jvm.MINOR, 0)
    w.u2(jvm.MAJOR, 61)
    w.u2(jvm.CP_COUNT, 27)
    w.u1(jvm.TAG, 10)
    w.u2(jvm.REF_CLASS, 2)
    w.u2(jvm.REF_NAT, 3)  # 1: Methodref
    w.u1(jvm.TAG, 7)
    w.u2(jvm.CLASS_NAME, 4)  # 2
    w.u1(jvm.TAG, 12)
    w.u2(jvm.NAT_NAME, 5)
    w.u2(jvm.NAT_DESC, 6)  # 3
    for s in ("java/lang/Object", "<init>", "()V"):  # 4, 5, 6
        w.utf(s)
    w.u1(jvm.TAG, 7)
    w.u2(jvm.CLASS_NAME, 8)  # 7
    for s in (f"demo/Demo{i}", "Code", "LineNumberTable", "LocalVariableTable", "this",
              f"Ldemo/Demo{i};"):  # 8 ... 13
        w.utf(s)
    w.u1(jvm.TAG, 3)
    w.u4(jvm.NUM4, 123456 + i)  # 14
    w.u1(jvm.TAG, 5)
    w.put(jvm.NUM8, struct.pack(">q", 1 << 40))  # 15, 16
    w.u1(jvm.TAG, 8)
    w.u2(jvm.STRING, 18)  # 17
    w.utf("")  # 18: an empty string
    w.u1(jvm.TAG, 9)
    w.u2(jvm.REF_CLASS, 7)
    w.u2(jvm.REF_NAT, 20)  # 19: Fieldref
    w.u1(jvm.TAG, 12)
    w.u2(jvm.NAT_NAME, 21)
    w.u2(jvm.NAT_DESC, 22)  # 20
    for s in ("count", "I", "SourceFile"):  # 21, 22, 23
        w.utf(s)
    w.u1(jvm.TAG, 15)
    w.u1(jvm.MH_KIND, 6)
    w.u2(jvm.MH_REF, 1)  # 24
    w.u1(jvm.TAG, 18)
    w.u2(jvm.DYN_BOOT, 0)
    w.u2(jvm.DYN_NAT, 3)  # 25
    w.utf(f"Demo{i}.java")  # 26
    w.u2(jvm.ACCESS, 0x21)
    w.u2(jvm.THIS, 7)
    w.u2(jvm.SUPER, 2)
    w.u2(jvm.I_COUNT, 1)
    w.u2(jvm.INTERFACE, 2)
    w.u2(jvm.M_COUNT, 1)  # one field, no attributes
    for f, v in ((jvm.M_ACCESS, 2), (jvm.M_NAME, 21), (jvm.M_DESC, 22), (jvm.A_COUNT, 0)):
        w.u2(f, v)
    w.u2(jvm.M_COUNT, 2)
    for m in range(2):
        for f, v in ((jvm.M_ACCESS, 1), (jvm.M_NAME, 5), (jvm.M_DESC, 6), (jvm.A_COUNT, 1)):
            w.u2(f, v)
        w.u2(jvm.A_NAME, 9)  # Code
        length_at = len(w.out)
        w.u4(jvm.A_LEN, 0)
        body = len(w.out)
        w.u2(jvm.MAX_STACK, 2)
        w.u2(jvm.MAX_LOCALS, 300)
        code_at = len(w.out)
        w.u4(jvm.CODE_LEN, 0)
        code_of(w, 0, i + m)
        code_length = len(w.out) - code_at - 4
        w.out[code_at:code_at + 4] = struct.pack(">I", code_length)
        w.u2(jvm.EX_COUNT, m)
        for _ in range(4 * m):
            w.u2(jvm.EX_ENTRY, 3)
        w.u2(jvm.A_COUNT, 2)
        w.u2(jvm.A_NAME, 10)  # LineNumberTable
        w.u4(jvm.A_LEN, 2 + 4 * 2)
        w.u2(jvm.LNT_COUNT, 2)
        for pc, line in ((0, 10 + i), (4, 11 + i)):
            w.u2(jvm.LNT_PC, pc)
            w.u2(jvm.LNT_LINE, line)
        w.u2(jvm.A_NAME, 11)  # LocalVariableTable
        w.u4(jvm.A_LEN, 2 + 10)
        w.u2(jvm.LVT_COUNT, 1)
        for f, v in ((jvm.LVT_PC, 0), (jvm.LVT_LEN, code_length), (jvm.LVT_NAME, 12),
                     (jvm.LVT_DESC, 13), (jvm.LVT_SLOT, 0)):
            w.u2(f, v)
        w.out[length_at:length_at + 4] = struct.pack(">I", len(w.out) - body)
    w.u2(jvm.A_COUNT, 1)
    w.u2(jvm.A_NAME, 23)  # SourceFile: a body the parser skips
    w.u4(jvm.A_LEN, 2)
    w.put(jvm.A_BODY, struct.pack(">H", 26))
    return w


def parsed_fields(data: bytes) -> list[int]:
    """The field the parser puts each byte of data in."""
    return [f for (f,) in parsed(data, JVM, jvm.read_byte, jvm.S_J_FIELD)]


def classes(count: int, gap: bytes = b"") -> tuple[bytes, list[int]]:
    data, fields = bytearray(), []
    for i in range(count):
        w = class_file(i)
        data += w.out + gap
        fields += w.fields + [jvm.NONE] * len(gap)
    return bytes(data), fields


def test_the_parser_knows_every_byte_of_a_class():
    data, fields = classes(3, gap=b"\x00junk between classes\x00")
    assert parsed_fields(data) == fields


def test_a_broken_class_ends_the_parse_and_the_next_is_followed():
    w = class_file(0)
    broken = bytearray(w.out)
    broken[w.fields.index(jvm.TAG)] = 2  # no such tag
    good = class_file(1)
    got = parsed_fields(bytes(broken) + bytes(good.out))
    assert all(f == jvm.NONE for f in got[w.fields.index(jvm.TAG) + 1:len(broken)])
    assert got[len(broken):] == good.fields


def test_a_code_attribute_that_does_not_add_up_ends_the_parse():
    w = class_file(0)
    bad = bytearray(w.out)
    at = w.fields.index(jvm.A_LEN, w.fields.index(jvm.MAX_STACK) - 4)
    bad[at:at + 4] = struct.pack(">I", struct.unpack(">I", bad[at:at + 4])[0] + 1)
    got = parsed_fields(bytes(bad))
    assert got[-1] == jvm.NONE and w.fields[-1] == jvm.A_BODY


def test_bytecode_longer_than_the_jvm_allows_ends_the_parse():
    w = class_file(0)
    bad = bytearray(w.out)
    at = w.fields.index(jvm.CODE_LEN)
    bad[at:at + 4] = struct.pack(">I", 1 << 16)
    got = parsed_fields(bytes(bad))
    assert got[at + 3] == jvm.CODE_LEN and set(got[at + 4:]) == {jvm.NONE}


def test_a_universal_mach_o_binary_is_not_a_class():
    fat = b"\xca\xfe\xba\xbe\x00\x00\x00\x02" + bytes(range(256)) * 4
    assert set(parsed_fields(fat)[8:]) == {jvm.NONE}


def test_text_and_other_data_code_exactly_as_without_it():
    rng = np.random.default_rng(5)
    other = rng.integers(0, 256, 6000, dtype=np.uint8).tobytes()
    for data in (TEXT, other):
        assert payload(data, JVM) == payload(data, SMALL)
        assert fed(data, JVM).S[jvm.S_J_SEL] == -1


def test_references_code_relative_to_their_entry_and_decode():
    data, fields = classes(30)
    assert len(payload(data, JVM)) < 0.8 * len(payload(data, SMALL))
    assert api.decompress(api.compress(data, Recipe(mix=JVM))) == data
    block = np.frombuffer(data, dtype=np.uint8).copy()  # the encoder's view
    predictor = codec.Predictor(Recipe(mix=JVM))
    predictor.advance(block, predictor._no_rows, coder.ADVANCE, predictor._no_decoder)
    seen = block.tobytes()
    first = len(class_file(0).out)  # the second class: Methodref #2 #3 at entry 1
    refs = first + fields[first:].index(jvm.REF_CLASS)
    assert seen[refs:refs + 4] == b"\x00\x01\x00\x02"
    to_entry = [i for i, f in enumerate(fields)
                if jvm.RELATIVE[f] == jvm.TO_ENTRY and fields[i - 1] != f]
    assert all(seen[i:i + 2] != data[i:i + 2] for i in to_entry) and len(to_entry) > 300
    assert all(seen[i] == data[i] for i, f in enumerate(fields) if jvm.RELATIVE[f] == jvm.KEPT)
    lines = [i for i, f in enumerate(fields) if f == jvm.LNT_LINE and fields[i - 1] != f]
    assert seen[lines[-1]:lines[-1] + 2] == b"\x00\x01"  # the line after the last one
    lengths = [i for i, f in enumerate(fields) if f == jvm.LVT_LEN and fields[i - 1] != f]
    assert {seen[i:i + 2] for i in lengths} == {bytes(2)}  # "the rest of the method"


def test_references_across_kernel_blocks_are_left_alike_by_every_side():
    """A reference whose two bytes straddle two of the codec's blocks stays as it is: coding
    a frame and learning it uncoded leave the same model, and it decodes."""
    one, fields = classes(1)
    ref = fields.index(jvm.NAT_NAME)
    pad = codec.ENCODE_BLOCK - 1 - ref
    data = bytes(pad) + one + classes(3)[0]
    assert parsed_fields(data)[codec.ENCODE_BLOCK - 1:codec.ENCODE_BLOCK + 1] == [
        jvm.NAT_NAME] * 2
    assert coded_as_learned(data, Recipe(mix=JVM))


def test_the_contexts_follow_the_field_and_the_other_models_step_aside():
    from test_x86 import calling_code as x86_code

    data, fields = classes(2)
    end = len(data) - 2  # in the last attribute's body
    assert fields[end] == jvm.A_BODY
    assert slots_changed(data[:end], JVM, SMALL) == [0, 0, 0, 1, 0, 0, 1, 1, 1, 1]
    both = replace(JVM, x86=True)
    S = fed(x86_code() + data[:end], both).S
    assert S[jvm.S_J_SEL] >= 0 and S[x86.S_X86_SEL] == -1
    utf = fields.index(jvm.UTF) + 3  # in a string: left to the text models
    assert fed(data[:utf], JVM).S[jvm.S_J_SEL] == -1
