"""Add golden vectors for preset cards and architectures that have none (rwkvzip selftest).

    python scripts/make_golden.py            # adds what is missing to rwkvzip/golden/
    python scripts/make_golden.py --dir D    # another directory (tests)

Existing vectors are never rewritten: if one no longer matches, the arithmetic changed and
that is a determinism failure to fix (or a new numeric contract and new cards), not a
vector to regenerate.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rwkvzip import selftest

GOLDEN = Path(__file__).resolve().parents[1] / "rwkvzip" / "golden"


TEXT = (b"It was the best of times, it was the worst of times, it was the age of wisdom, "
        b"it was the age of foolishness, it was the epoch of belief, it was the epoch of "
        b"incredulity, it was the season of Light, it was the season of Darkness.\n") * 2
CODE = (b"def crc(data: bytes) -> int:\n    value = 0xFFFFFFFF\n    for byte in data:\n"
        b"        value = TABLE[(value ^ byte) & 0xFF] ^ (value >> 8)\n"
        b"    return value ^ 0xFFFFFFFF\n")


def golden_input() -> bytes:
    """About 1.5 KB: English text, source code, every byte value, a zero run and
    pseudo-random bytes from a fixed LCG; compressible enough that every recipe codes it
    (a stored frame would not test the arithmetic)."""
    state, noise = 2024, bytearray()
    for _ in range(96):
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        noise.append(state >> 56)
    return TEXT + CODE + bytes(range(256)) + bytes(32) + bytes(noise) + TEXT


def crlf_text() -> bytes:
    """The golden input's text and code with CR LF line ends (the cards with eol code it
    as LF text)."""
    return (TEXT + CODE + TEXT).replace(b"\n", b"\r\n")


def bitmap() -> bytes:
    """A 1-bit image of 64 rows of 192 pixels (24 bytes): blank rows, then rings, a
    slanted bar and a box, drawn with integer arithmetic."""
    width, rows = 192, 64
    out = bytearray()
    for y in range(rows):
        bits = 0
        for x in range(width):
            ring = any(abs((x - cx) ** 2 + (y - 36) ** 2 - 14 ** 2) < 40 for cx in (40, 110))
            bar = 10 < y < 60 and abs(x - 150 - (y - 35) // 3) < 4
            box = (20 <= y <= 58 and x in (170, 186)) or (y in (20, 58) and 170 <= x <= 186)
            bits = (bits << 1) | int(y >= 8 and (ring or bar or box))
        out += bits.to_bytes(width // 8, "big")
    return bytes(out)


def sheet(rows: int = 12) -> bytes:
    """A small Excel BIFF2 worksheet: a BOF record, `rows` rows of 10 cells (integers in some
    columns, blank BOOLERR cells in the others, a text label starting every fourth row, so
    records differ in length), then EOF; every field from integer arithmetic."""
    def record(rtype: int, body: bytes) -> bytes:
        return rtype.to_bytes(2, "little") + len(body).to_bytes(2, "little") + body

    out = record(0x0009, bytes([2, 0, 16, 0]))
    for row in range(rows):
        for col in range(10):
            cell = row.to_bytes(2, "little") + col.to_bytes(2, "little") + bytes([0, 3, 3])
            if col == 0 and row % 4 == 0:
                text = b"row %d" % row
                out += record(0x0004, cell + bytes([len(text)]) + text)
            elif col % 3 == 1:
                out += record(0x0002, cell + ((row * col) % 7 + col).to_bytes(2, "little"))
            else:
                out += record(0x0005, cell + bytes([0, 1]))
    return out + record(0x000A, b"")


def code(functions: int = 24) -> bytes:
    """A small SPARC executable's kind of bytes: functions of big-endian instruction words
    (save, loads, stores, adds, sethi, calls, nops; ret and restore), then a table of 16-byte
    symbol records (ELF's layout), every field from a fixed LCG."""
    state = 7

    def draw(n: int) -> int:
        nonlocal state
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        return (state >> 33) % n

    def fmt3(op: int, rd: int, op3: int, rs1: int, simm13: int) -> int:
        return (op << 30) | (rd << 25) | (op3 << 19) | (rs1 << 14) | (1 << 13) | (simm13 & 0x1FFF)

    words = []
    for _ in range(functions):
        words.append(fmt3(2, 14, 0x3C, 14, -104))  # save %sp, -104, %sp
        for _ in range(6 + draw(14)):
            rd, rs1, what = (8, 9, 10, 16, 17)[draw(5)], (24, 25, 30, 8, 16)[draw(5)], draw(6)
            if what == 0:
                words.append(0x40000000 | ((draw(400) - 200) & 0x3FFFFFFF))  # call
            elif what == 1:
                words.append(fmt3(3, rd, 0x00, rs1, 4 * draw(16) - 20))  # ld [rs1 + x], rd
            elif what == 2:
                words.append(fmt3(3, rd, 0x04, 30, 4 * draw(16) - 20))  # st rd, [%fp + x]
            elif what == 3:
                words.append(fmt3(2, rd, 0x00, rs1, draw(9)))  # add rs1, x, rd
            elif what == 4:
                words.append((rd << 25) | (4 << 22) | (0x12 + draw(4)))  # sethi %hi(x), rd
            else:
                words.append(0x01000000)  # nop
        words += [0x81C7E008, 0x81E80000]  # ret; restore
    symbols = b"".join((16 * i).to_bytes(4, "big") + (0x10A00 + 64 * i).to_bytes(4, "big")
                       + (4 * (8 + draw(40))).to_bytes(4, "big") + bytes([0x12, 0, 0, 7])
                       for i in range(functions))
    return b"".join(w.to_bytes(4, "big") for w in words) + symbols


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=GOLDEN)
    args = parser.parse_args()
    if not (args.dir / selftest.MANIFEST).exists():
        selftest.start(args.dir, golden_input())
        print(f"new golden input in {args.dir}")
    selftest.add_input(args.dir, selftest.EXE_INPUT,
                       golden_input() + bitmap() + sheet() + code())
    selftest.add_input(args.dir, selftest.EOL_INPUT, crlf_text())
    added = selftest.add_missing(args.dir)
    print(f"added: {', '.join(added)}" if added else "every card and architecture has a vector")


if __name__ == "__main__":
    main()
