"""Line ends: a frame of CRLF text is coded as LF text (recipe field `eol`).

Text written on Windows ends every line with CR LF. To the models a CR is one more byte to
predict and one order of context spent before the next line starts; the shipped priors,
trained on Debian's LF text, never saw one. So a frame whose every CR is followed by LF and
every LF preceded by CR is coded with its CRs removed, and the decoder puts them back; the
frame's head says so and how many bytes the models ran over (docs/FORMAT.md, "Frame").
Any other frame is coded as it is.
"""

from __future__ import annotations

CR = 0x0D
CRLF = b"\r\n"


def crlf_text(raw: bytes) -> bool:
    """Whether every CR in `raw` starts a CR LF and every LF ends one (and there is one)."""
    lines = raw.count(CRLF)
    return lines > 0 and raw.count(b"\r") == lines and raw.count(b"\n") == lines


def strip(raw: bytes) -> bytes:
    """What the models see of a frame of CRLF text, and of a prior's dictionary: LF text."""
    return raw.replace(CRLF, b"\n")


def coded_view(raw: bytes, eol: bool) -> tuple[bytes, bool]:
    """What the models run over for a frame of a recipe with (`eol`) or without the field,
    and whether that is the frame without its CRs."""
    crlf = eol and crlf_text(raw)
    return (strip(raw) if crlf else raw), crlf


def restore(coded: bytes) -> bytes | None:
    """The frame's bytes from what the models saw; None if that cannot come from strip of a
    frame of CRLF text (a CR in it, or no line end)."""
    if b"\r" in coded or b"\n" not in coded:
        return None
    return coded.replace(b"\n", CRLF)


def frame_length(pending: bytes | bytearray, limit: int) -> int:
    """Where to end a frame of at most `limit` bytes of the `pending` input (more follows):
    not between a CR and its LF, so both frames can be CRLF text."""
    return limit - 1 if limit > 1 and pending[limit - 1] == CR else limit
