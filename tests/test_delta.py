"""The column-delta model (cm/delta.py): live on binary records of a detected length and
nowhere else (text codes exactly as without it); its inputs are the step histograms shifted
by the byte above; its switch's node probabilities are exactly its byte mixture's; numeric
fields of records code better and decode."""

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from mixing_probe import fed, payload

from rwkvzip import api
from rwkvzip.cm import context, delta, mixer
from rwkvzip.cm.mixing import MixArrays, MixConfig
from rwkvzip.ops import ALPHABET
from rwkvzip.recipe import Recipe

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from make_golden import code, golden_input  # noqa: E402

EXE = MixConfig(orders=(1, 2, 3, 0, 13, 11, 20, 21), table_bits=11, match_bits=14,
                network=False, selectors=2, exe=True)
DELTA = replace(EXE, delta=True)
TEXT = golden_input()[:600] + b"Tables have columns; numbers in them grow. " * 40


def records(n: int = 300, seed: int = 3) -> bytes:
    """Debug-table-like records of 12 bytes: a string offset growing by 8 ... 23, a type, a
    zero, a line number growing by 1 or 2, an address growing by 4 ... 16."""
    rng = np.random.default_rng(seed)
    strx, line, addr, out = 1000, 10, 0x10B00, bytearray()
    for _ in range(n):
        strx += int(rng.integers(8, 24))
        line += int(rng.integers(1, 3))
        addr += 4 * int(rng.integers(1, 5))
        out += strx.to_bytes(4, "big") + bytes([0x44, 0]) + line.to_bytes(2, "big")
        out += addr.to_bytes(4, "big")
    return bytes(out)


def coded_ratio(mix: MixConfig, data: bytes, base: MixConfig = DELTA) -> float:
    """mix's payload of data over base's, after checking that mix decodes data and codes
    TEXT exactly as base does (the delta fields change nothing outside binary records)."""
    assert api.decompress(api.compress(data, Recipe(mix=mix))) == data
    assert payload(TEXT, mix) == payload(TEXT, base)
    return len(payload(data, mix)) / len(payload(data, base))


def test_text_codes_exactly_as_without_it():
    S = fed(TEXT, DELTA).S
    assert S[delta.S_DL_LIVE] == 0 and S[delta.S_DL_SCORE] == 0
    assert payload(TEXT, DELTA) == payload(TEXT, EXE)


def test_live_and_heard_on_binary_records_then_silent_on_text():
    S = fed(TEXT + records(), DELTA).S
    assert S[context.S_REC] == 12
    assert S[delta.S_DL_LIVE] == 1 and S[delta.S_DL_HEARD] == 1
    S = fed(records() + TEXT, DELTA).S
    assert S[delta.S_DL_LIVE] == 0 and S[delta.S_DL_HEARD] == 0


def test_inputs_are_the_step_histograms_shifted_by_the_byte_above():
    arrays = fed(records(), DELTA)
    CT, S = arrays.CT, arrays.S
    assert S[delta.S_DL_HEARD] == 1
    above = S[delta.S_DL_ABOVE]
    for k in range(delta.INPUTS):
        counts = CT[S[delta.S_DL_ROW + k]:S[delta.S_DL_ROW + k] + ALPHABET].astype(np.int64)
        q = counts[(np.arange(ALPHABET) - above) & 255] + 1  # the next byte's weights
        for node in (1, 2, 3, 5, 12, 200):
            d = node.bit_length() - 1
            lo = (node << (8 - d)) - ALPHABET  # the node's subtree: bytes lo ... lo + width
            width = 1 << (8 - d)
            zero, one = q[lo:lo + width // 2].sum(), q[lo + width // 2:lo + width].sum()
            want = arrays.ST[min((one << 12) // (zero + one), 4095)]
            assert delta.input_at(CT, S, arrays.ST, k, node) == want
    assert counts.sum() > 0 and counts.sum() % delta.STEP == 0


def test_counts_stay_bounded():
    arrays = MixArrays(DELTA, 1)
    CT, S = arrays.CT, arrays.S
    S[delta.S_DL_LIVE] = 1
    S[delta.S_DL_ROW:delta.S_DL_ROW + delta.INPUTS] = S[delta.S_DL_BASE]  # one row for all
    t = S[delta.S_DL_T]
    CT[S[delta.S_DL_BASE] + 7] = delta.ROW_LIMIT  # a full row: the next count halves it
    CT[t + 1:t + 1 + 2 * ALPHABET * delta.INPUTS:2 * ALPHABET] = delta.ROW_LIMIT + ALPHABET
    delta.learn(CT, S, arrays.MX, 7)
    assert CT[S[delta.S_DL_BASE] + 7] <= (delta.ROW_LIMIT + 3 * delta.STEP) // 2


def test_the_switch_codes_its_byte_mixture_node_by_node():
    """Path coding's node probabilities (switch_at along a byte's path) multiply to the
    whole-tree row's mixture of the mixer's and the histograms' distributions (switch_row)."""
    arrays = fed(records(), DELTA)
    CT, S, MX, ST = arrays.CT, arrays.S, arrays.MX, arrays.ST
    assert S[delta.S_DL_HEARD] == 1
    P = np.zeros(ALPHABET, dtype=np.float32)
    floor = 1e-6
    mixer.predict(np.zeros(ALPHABET, dtype=np.float32), CT, S, MX, ST, floor, P)
    assert abs(float(P.astype(np.float64).sum()) - 1.0) < 1e-5
    pf = MX[S[delta.S_DL_MX] + delta.MX_PF:][:ALPHABET].copy()
    weights = MX[S[delta.S_DL_MX] + delta.MX_W:][:ALPHABET * delta.EXPERTS]
    assert abs(float(weights.reshape(-1, delta.EXPERTS).sum(axis=1).max()) - 1.0) < 1e-5
    for s in (0, 7, 100, 255, int(np.argmax(P))):
        m, node = 1.0, 1
        for d in range(8):
            p = delta.switch_at(CT, S, MX, node, d, float(pf[node]))
            bit = (s >> (7 - d)) & 1
            m *= p if bit else 1.0 - p
            node = 2 * node + bit
        assert m * (1.0 - ALPHABET * floor) + floor == pytest.approx(float(P[s]), rel=1e-5)


def test_records_code_better_and_decode():
    data = TEXT + code() + records()
    assert len(payload(data, DELTA)) < 0.75 * len(payload(data, EXE))  # measured 0.63
    blob = api.compress(data, Recipe(mix=DELTA))
    assert api.decompress(blob) == data


def test_needs_the_executable_model():
    with pytest.raises(ValueError, match="delta needs exe"):
        replace(EXE, exe=False, delta=True).validate()


def test_the_golden_input_of_its_cards_hears_it():
    """The cards' vectors (selftest.EXE_INPUT) code records with the model heard: the symbol
    table of the input's executable moves the switch's weights."""
    from make_golden import bitmap
    from make_golden import sheet as worksheet

    from rwkvzip.recipe import DEFAULT_PRESET, preset_by_name

    mix = replace(preset_by_name(DEFAULT_PRESET).recipe.mix, network=False)
    arrays = fed(golden_input() + bitmap() + worksheet() + code(), mix)
    S, MX = arrays.S, arrays.MX
    weights = MX[S[delta.S_DL_MX] + delta.MX_W:][:ALPHABET * delta.EXPERTS]
    assert np.abs(weights - 1.0 / delta.EXPERTS).max() > 0.1


def offsets(n: int = 1500, seed: int = 4) -> bytes:
    """A table of growing 32-bit little-endian offsets (steps 16 ... 79), as the Unicode
    tables of an executable hold them: the second byte grows by the carry from the first."""
    rng = np.random.default_rng(seed)
    steps = rng.integers(16, 80, size=n)
    return b"".join(int(v).to_bytes(4, "little") for v in 0x3A00 + np.cumsum(steps))


def test_the_carry_into_a_growing_number_is_in_its_contexts():
    """delta_carry: the step's and the third byte's rows follow whether the byte to the left
    is below, equal to or above the one above it, so a growing number's second byte (its
    step 0 or 1: the carry) is all but free, and nothing else changes."""
    carry = replace(DELTA, delta_carry=True)
    data = TEXT + code() + offsets()
    assert len(payload(data, carry)) < 0.97 * len(payload(data, DELTA))  # measured 0.956
    assert api.decompress(api.compress(data, Recipe(mix=carry))) == data
    assert payload(TEXT, carry) == payload(TEXT, DELTA)

    def rows(tail: bytes) -> np.ndarray:  # after a record whose first byte is `tail`
        S = fed(data + tail, carry).S
        assert S[delta.S_DL_LIVE] == 1 and S[delta.S_DL_COL] == 1
        return S[delta.S_DL_ROW:delta.S_DL_ROW + delta.INPUTS].copy()

    last = data[-4]
    below, equal, above = (rows(bytes([(last + d) & 255])) for d in (-3, 0, 3))
    for k in (1, 3):
        assert len({below[k], equal[k], above[k]}) == 3
    assert below[0] == equal[0] == above[0]  # the column's row (row 2's context is a(1))
    with pytest.raises(ValueError, match="delta_carry, delta_max, delta_binary, delta_nonzero"):
        replace(EXE, delta_carry=True).validate()


def block_numbers(n: int = 3000, seed: int = 5) -> bytes:
    """A lookup table's first stage as a multi-stage table generator writes it: 16-bit
    little-endian block numbers, each a recent block's again or the next new one."""
    rng = np.random.default_rng(seed)
    values, top = [], 40
    for _ in range(n):
        if rng.random() < 0.3 or len(values) < 4:
            top += 1
            values.append(top)
        else:
            values.append(values[-int(rng.integers(1, 5))])
    return b"".join(v.to_bytes(2, "little") for v in values)


def test_a_histogram_counts_steps_from_the_columns_peak():
    """delta_max: the third histogram counts its steps from the largest byte of the column
    in the last PEAK_RECORDS records, so a table's next new block number is expected; text
    codes as without it."""
    peak = replace(DELTA, delta_carry=True, delta_max=True)
    plain = replace(DELTA, delta_carry=True)
    data = TEXT + code() + block_numbers()
    assert len(payload(data, peak)) < 0.985 * len(payload(data, plain))  # measured 0.974
    assert api.decompress(api.compress(data, Recipe(mix=peak))) == data
    assert payload(TEXT, peak) == payload(TEXT, plain)
    S = fed(data, peak).S
    assert S[context.S_REC] == 2 and S[delta.S_DL_LIVE] == 1
    column = data[len(data) - 2 * delta.PEAK_RECORDS::2]  # the next byte's column
    assert S[delta.S_DL_PEAK] == max(column) and delta.shift_of(S, delta.PEAK_INPUT) == max(
        column)
    assert delta.shift_of(S, 0) == data[-2]


def printable_offsets(n: int = 1200, seed: int = 6) -> bytes:
    """16-bit little-endian numbers growing by 1 or 2 whose bytes are all printable (0x20 ...
    0x7E), as unicodedata's offsets from 0x2000 up mostly are: no control byte in the table."""
    rng = np.random.default_rng(seed)
    v, out = 0, bytearray()
    for _ in range(n):
        v += int(rng.integers(1, 3))
        out += bytes([0x20 + v % 95, 0x21 + v // 95])
    return bytes(out)


def test_delta_binary_keeps_it_on_a_table_of_printable_bytes():
    """delta_binary: right after binary data (a control byte within exe.BINARY_SPAN) the
    model stays live on a table of printable bytes, where the control average turns it off;
    text codes as without it."""
    live = replace(DELTA, delta_binary=True)
    data = code() + printable_offsets()
    S = fed(data, DELTA).S
    assert S[context.S_REC] == 2 and S[delta.S_DL_LIVE] == 0 and not delta.binary_enough(S)
    S = fed(data, live).S
    assert S[delta.S_DL_LIVE] == 1 and S[delta.S_DL_HEARD] == 1 and delta.binary_enough(S)
    ratio = coded_ratio(live, data)
    assert ratio < 0.75, ratio  # measured 0.660
    with pytest.raises(ValueError, match="delta_binary, delta_nonzero, delta_switch"):
        replace(EXE, delta_binary=True).validate()


def counters_and_noise(n: int = 3000, seed: int = 7) -> bytes:
    """Records of 8 bytes: a 32-bit counter growing by 1 ... 8, two random bytes, a constant
    and a byte of 0 ... 3: columns that want different inputs trusted."""
    rng = np.random.default_rng(seed)
    v, out = 5000, bytearray()
    for _ in range(n):
        v += int(rng.integers(1, 9))
        out += v.to_bytes(4, "little") + bytes(rng.integers(0, 256, 2, dtype=np.uint8))
        out += bytes([0x10, int(rng.integers(0, 4))])
    return bytes(out)


def test_delta_select_chooses_the_third_mixers_weights_by_column():
    """delta_select: while the model is heard, the third mixer's weight set is chosen by the
    next byte's column instead of a(2); text codes as without it."""
    three = replace(DELTA, selectors=3)
    select = replace(three, delta_select=True)
    data = TEXT + records()
    S = fed(data, select).S
    assert S[delta.S_DL_HEARD] == 1
    assert mixer.third_selector(S) == S[delta.S_DL_COL] == len(data) % 12
    assert mixer.third_selector(fed(data, three).S) == data[-2]
    table = code() + counters_and_noise()
    ratio = len(payload(table, select)) / len(payload(table, three))
    assert ratio < 1.0, ratio  # measured 0.99955 (the tuning slices: -0.5 %)
    assert api.decompress(api.compress(data, Recipe(mix=select))) == data
    assert payload(TEXT, select) == payload(TEXT, three)
    with pytest.raises(ValueError, match="delta_select needs delta and three selectors"):
        replace(DELTA, delta_select=True).validate()


def sparse_offsets(n: int = 2500, seed: int = 8) -> bytes:
    """A sparse 16-bit table (unicodedata's decomposition index): runs of zero entries, then
    an entry that goes on from the last nonzero one by 2 ... 4."""
    rng = np.random.default_rng(seed)
    v, out = 0x0FCD, bytearray()
    for _ in range(n):
        if rng.random() < 0.25:
            v += int(rng.integers(2, 5))
            out += v.to_bytes(2, "little")
        else:
            out += bytes(2)
    return bytes(out)


def test_a_histogram_counts_steps_from_the_columns_last_nonzero_byte():
    """delta_nonzero: where the byte above is 0, the fourth histogram counts its steps from
    the column's last nonzero byte, so a sparse table's entries go on from the last one;
    text codes as without it."""
    skip = replace(DELTA, delta_nonzero=True)
    data = code() + sparse_offsets()
    ratio = coded_ratio(skip, data)
    assert ratio < 0.985, ratio  # measured 0.973
    S = fed(data + bytes(64), skip).S  # zero entries: the byte above is 0
    assert S[delta.S_DL_LIVE] == 1 and S[delta.S_DL_ABOVE] == 0
    last = S[delta.S_DL_LAST_NZ + S[delta.S_DL_COL]]
    assert last != 0 and delta.shift_of(S, delta.NONZERO_INPUT) == last
    assert delta.shift_of(S, 0) == 0


def unset_entries(n: int = 2000, seed: int = 9) -> bytes:
    """A lookup stage of 32-bit little-endian block numbers (libunistring's): unset entries
    are -1, a set one is the next block, 32 on from the last set one."""
    rng = np.random.default_rng(seed)
    v, out = 0x0D80, bytearray()
    for _ in range(n):
        if rng.random() < 0.3:
            v += 0x20
            out += v.to_bytes(4, "little")
        else:
            out += b"\xff" * 4
    return bytes(out)


def test_delta_ff_takes_0xff_for_an_empty_entry_too():
    """delta_ff: with delta_nonzero, a byte 0xFF is skipped like 0 (the byte above) and
    never the column's last nonempty byte, so a -1-filled stage goes on from its last set
    entry; text codes as without it."""
    skip = replace(DELTA, delta_nonzero=True)
    ff = replace(skip, delta_ff=True)
    data = code() + unset_entries()
    ratio = coded_ratio(ff, data, base=skip)
    assert ratio < 0.995, ratio  # measured 0.987
    S = fed(data + b"\xff", ff).S  # in an unset entry
    assert S[delta.S_DL_LIVE] == 1 and S[delta.S_DL_ABOVE] == 0xFF
    last = S[delta.S_DL_LAST_NZ + S[delta.S_DL_COL]]
    assert last not in (0, 0xFF) and delta.shift_of(S, delta.NONZERO_INPUT) == last
    with pytest.raises(ValueError, match="delta_ff"):
        replace(DELTA, delta_ff=True).validate()


def stages(seed: int = 8) -> bytes:
    """Lookup stages of 16-bit little-endian entries, one after another as a generator writes
    them: each numbers its blocks its own way (mostly repeats, or mostly new blocks one or
    more up)."""
    rng = np.random.default_rng(seed)
    out = bytearray()
    for _ in range(12):
        p_new = float(rng.choice([0.1, 0.5, 0.9]))
        jump = int(rng.choice([1, 1, 2, 4]))
        v = int(rng.integers(0, 64))
        for _ in range(int(rng.integers(100, 200))):
            if rng.random() < p_new:
                v = (v + jump) & 0xFFFF
            out += v.to_bytes(2, "little")
    return bytes(out)


def test_recent_histograms_follow_the_table_at_hand():
    """delta_recent: a step counts RECENT_STEP and a histogram is halved past RECENT_LIMIT,
    so it holds its context's last steps, and stages that number their blocks each its own
    way code better; text codes as without it."""
    recent = replace(DELTA, delta_recent=True)
    data = code() + stages()
    ratio = coded_ratio(recent, data)
    assert ratio < 0.985, ratio  # measured 0.974
    arrays = fed(data, recent)
    CT, S = arrays.CT, arrays.S
    assert S[delta.S_DL_LIVE] == 1 and S[delta.S_DL_STEP] == delta.RECENT_STEP
    for k in range(delta.INPUTS):
        row = S[delta.S_DL_ROW + k]
        assert 0 < CT[row:row + ALPHABET].astype(np.int64).sum() <= delta.RECENT_LIMIT


def tables(seed: int = 7) -> bytes:
    """Tables of records of 9 to 40 bytes, one after another: a counter, a kind, small
    numbers. Each new record length starts columns the switch has not seen."""
    rng = np.random.default_rng(seed)
    out = bytearray()
    for r in (9, 24, 40, 16, 30, 12, 36):
        v, kind = int(rng.integers(0, 200)), int(rng.integers(1, 9))
        for _ in range(40):
            v = (v + 1) & 255
            out += bytes([v, kind]) + rng.integers(0, 3, size=r - 2).astype(np.uint8).tobytes()
    return bytes(out)


def test_the_switch_starts_every_column_trusting_the_mixer():
    """delta_switch: the switch's weights start at TRUST_INIT for the mixer (which hears the
    histograms too), not a fifth each, so a column seen for the first time codes at nearly
    the mixer's probability (and a weight may fall to SWITCH_SHARE / EXPERTS); text codes
    as without it."""
    switch = replace(DELTA, delta_switch=True)
    arrays = MixArrays(switch, 1)
    S, MX = arrays.S, arrays.MX
    weights = MX[S[delta.S_DL_MX] + delta.MX_W:][:ALPHABET * delta.EXPERTS]
    weights = weights.reshape(-1, delta.EXPERTS)
    assert np.allclose(weights[:, 0], delta.TRUST_INIT)
    assert np.allclose(weights[:, 1:], (1.0 - delta.TRUST_INIT) / delta.INPUTS)
    ratio = coded_ratio(switch, code() + tables())
    assert ratio < 0.999, ratio  # measured 0.9967


def test_delta_apm_chooses_the_second_apms_row_by_column():
    """delta_apm: while the model is heard, the second APM's row is chosen by the next
    byte's column instead of the second mixer's selector byte; text codes as without it."""
    select = replace(DELTA, selectors=3, delta_select=True)
    apm = replace(select, delta_apm=True)
    data = TEXT + records()
    S = fed(data, apm).S
    assert S[delta.S_DL_HEARD] == 1 and mixer.apm_selector(S) == S[delta.S_DL_COL]
    _, row = mixer.apm_rows(S, 5)
    assert row == S[mixer.S_A2] + ((S[delta.S_DL_COL] << 8) | 5) * mixer.APM_CELLS
    S = fed(data, select).S
    assert mixer.apm_selector(S) == mixer.second_selector(S) == data[-1]
    ratio = coded_ratio(apm, code() + counters_and_noise(), select)
    assert ratio < 0.9998, ratio  # measured 0.9991 (the tuning slices: -0.20 %)
    with pytest.raises(ValueError, match="delta_recent and delta_apm need delta"):
        replace(EXE, delta_apm=True).validate()
