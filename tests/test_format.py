"""Format 1.0: every file the levels wrote before it decodes to the same bytes, and a file
of a retired card or contract, or of a newer format, is refused in one line that names the
version it needs."""

import io
import json
from pathlib import Path

import pytest

from rwkvzip import api
from rwkvzip.coding import container
from rwkvzip.coding.container import FormatError
from rwkvzip.recipe import LEVELS, RETIRED_CARDS, preset_by_name, preset_cards, preset_id_of

from clitools import assert_clean_error, rwkvzip

OLD = Path(__file__).parent / "data" / "format-0.x"
# one file per card the levels used (levels sharing a card wrote the same bytes)
LEVEL_FILES = {level: OLD / f"sample.L{level}.rwkz" for level in (1, 4, 6, 7, 9)}
BLOCK_FILES = [OLD / "blocks.L1.T2.rwkz", OLD / "blocks.L6.T2.rwkz"]


def test_the_old_files_cover_every_released_card():
    """Every released card wrote one of the old files; the levels now run those cards or
    drafts built on them."""
    named = {container.read_header(io.BytesIO(p.read_bytes())) for p in LEVEL_FILES.values()}
    assert named == {c.recipe for c in preset_cards().values() if not c.draft}
    for level in LEVEL_FILES:
        card = preset_by_name(LEVELS[level])
        assert card.draft or card.recipe in named


@pytest.mark.parametrize("level", sorted(LEVEL_FILES))
def test_a_file_each_level_wrote_before_1_0_decodes_identically(level):
    blob = LEVEL_FILES[level].read_bytes()
    card = preset_id_of(container.read_header(io.BytesIO(blob)))
    assert card is not None and not preset_cards()[card].draft
    assert api.decompress(blob) == (OLD / "sample.bin").read_bytes()


@pytest.mark.parametrize("path", BLOCK_FILES, ids=lambda p: p.name)
def test_old_block_files_decode_identically_with_and_without_threads(path):
    blob = path.read_bytes()
    want = (OLD / "blocks.bin").read_bytes()
    assert api.decompress(blob) == want
    assert api.decompress(blob, threads=2) == want


@pytest.mark.parametrize("level", sorted(LEVEL_FILES))
def test_the_released_cards_still_write_the_old_bytes(level):
    """The card each old file names writes it again, byte for byte; a level whose card is
    not a draft is that card."""
    blob = LEVEL_FILES[level].read_bytes()
    recipe = container.read_header(io.BytesIO(blob))
    assert api.compress((OLD / "sample.bin").read_bytes(), recipe=recipe) == blob
    if not preset_by_name(LEVELS[level]).draft:
        assert api.compress((OLD / "sample.bin").read_bytes(), level=level) == blob


def _header_naming(card_id: int) -> bytes:
    return container.MAGIC + bytes([container.FORMAT_VERSION]) + container.encode_varint(card_id)


def test_a_retired_card_is_refused_naming_the_version_that_wrote_it():
    assert set(RETIRED_CARDS).isdisjoint(preset_cards())
    with pytest.raises(FormatError, match=r"preset card 8 is retired.*rwkvzip 0\.x.*0\.1\.0"):
        api.decompress(_header_naming(8) + b"\x00\x00")


def test_a_card_from_the_future_is_refused_as_needing_a_newer_version():
    with pytest.raises(FormatError, match=r"unknown preset card 200: .*newer rwkvzip"):
        api.decompress(_header_naming(200))


def test_a_newer_format_version_is_refused():
    with pytest.raises(FormatError, match=r"format version 9 needs a newer rwkvzip"):
        api.decompress(container.MAGIC + bytes([9]) + b"\x01")


@pytest.mark.parametrize("contract,message", [(1, r"written by rwkvzip 0\.x"),
                                              (2, r"written by rwkvzip 0\.x"),
                                              (4, r"needs a newer rwkvzip")])
def test_a_spelled_out_recipe_of_another_contract_is_refused(contract, message):
    recipe = json.loads(preset_by_name("mix-v67").recipe.to_json())
    raw = json.dumps({**recipe, "contract": contract}, sort_keys=True,
                     separators=(",", ":")).encode()
    blob = (container.MAGIC + bytes([container.FORMAT_VERSION]) + container.encode_varint(0)
            + container.encode_varint(len(raw)) + raw)
    with pytest.raises(FormatError, match=message):
        api.decompress(blob)


def test_the_command_line_refuses_a_retired_card_in_one_line(tmp_path):
    old = tmp_path / "old.rwkz"
    old.write_bytes(_header_naming(30) + b"\x00\x00")
    proc = rwkvzip("-d", "-c", old)
    assert_clean_error(proc, "preset card 30 is retired")
    assert proc.stdout == b"" and "0.1.0" in proc.stderr.decode()
