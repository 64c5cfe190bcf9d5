"""What both context-model families (context.py for the mixing levels, counts.py for the
fast ones) read from the byte history, defined once: the 32-bit hash, the current word and
its context, and the match model's pieces (verified length, length buckets).

The two match models keep their own candidate tables and hash keys: those are part of
released cards' arithmetic (counts.py hashes `match_min` bytes into S, context.py six bytes
into the counter table), so only these common steps are shared."""

from __future__ import annotations

from rwkvzip.ops.jit import jit

M32 = 0xFFFFFFFF
MATCH_MAX = 65535  # the longest match length a model counts


@jit(inline="always")
def byte_back(hist, k):
    """The byte k back (1: the last) of a history of the last 8 bytes packed in an int."""
    return (hist >> (8 * (k - 1))) & 0xFF


@jit
def hash32(x):
    """A fixed 32-bit mixing function (integer-only, so identical on every machine)."""
    x = x & M32
    x ^= x >> 16
    x = (x * 0x45D9F3B) & M32
    x ^= x >> 16
    x = (x * 0x45D9F3B) & M32
    x ^= x >> 16
    return x


@jit(inline="always")
def text_class(byte):
    """How text-like one byte is: 2 printable ASCII, tab, CR and LF; 1 bytes >= 128 (UTF-8,
    Latin-1 text); 0 other control bytes. The mixer's text gate and the image model's
    both follow its average."""
    if 32 <= byte < 127 or byte == 9 or byte == 10 or byte == 13:
        return 2
    return 1 if byte >= 128 else 0


@jit
def is_word_byte(c):
    return (97 <= c <= 122) or (65 <= c <= 90) or c >= 128


@jit
def next_word(word, c):
    """The hash of the current word after byte c: a letter (case-folded) extends it, any
    other byte ends it (0)."""
    if is_word_byte(c):
        return hash32((word ^ (c + 32 if 65 <= c <= 90 else c)) * 0x2F0B3A49)
    return 0


@jit
def word_context(word, last):
    """The word context: the current word's letters and the last byte."""
    return hash32(word * 0x3C6EF372 + last + 0x1000000)


@jit
def verified_length(HB, cand, pos, hmask):
    """How many bytes (up to 32) before position cand equal those before pos: a hash hit's
    real match length."""
    n = 0
    while n < 32 and n < cand and HB[(cand - 1 - n) & hmask] == HB[(pos - 1 - n) & hmask]:
        n += 1
    return n


@jit
def match_bucket(length, buckets):
    """Lengths 0 ... 15 one bucket each, longer ones 8 to a bucket, up to `buckets` - 1."""
    if length < 16:
        return length
    return min(16 + ((length - 16) >> 3), buckets - 1)


@jit
def extend_match(S, i_len, i_ptr, i_expect, symbol):
    """The byte just coded continues the current match (one longer, pointer on) or ends it."""
    length = S[i_len]
    if length > 0:
        if S[i_expect] == symbol:
            S[i_ptr] += 1
            S[i_len] = min(length + 1, MATCH_MAX)
        else:
            S[i_len] = 0

