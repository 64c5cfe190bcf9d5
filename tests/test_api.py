"""The Python API, shaped like gzip/lzma: bytes, levels, incremental objects, file objects."""

import io
import random
from pathlib import Path

import pytest

import rwkvzip
from rwkvzip import api
from rwkvzip.coding import container
from rwkvzip.coding.container import FormatError
from rwkvzip.net.rwkv7.model import Rwkv7Config
from rwkvzip.recipe import DEFAULT_LEVEL, LEVELS, Recipe, preset_by_name, preset_id_of

TEXT = b"The quick brown fox jumps over the lazy dog. " * 40


def test_top_level_names_work_like_the_standard_library():
    blob = rwkvzip.compress(TEXT, level=1)
    assert rwkvzip.decompress(blob) == TEXT
    assert blob[5] == preset_by_name(LEVELS[1]).id  # the header names level 1's card
    with pytest.raises(rwkvzip.FormatError, match="bad magic"):
        rwkvzip.decompress(b"definitely not compressed")
    assert {"compress", "decompress", "open", "Compressor", "Decompressor"} <= set(dir(rwkvzip))
    with pytest.raises(AttributeError):
        rwkvzip.no_such_name  # noqa: B018


def test_levels_recipes_and_their_misuse(tiny_recipe):
    default = container.read_header(io.BytesIO(api.compress(b"x")))
    assert preset_id_of(default) == preset_by_name(LEVELS[DEFAULT_LEVEL]).id
    # lzma's order: the level second, everything else by keyword
    assert api.compress(b"xyz" * 9, 1) == api.compress(b"xyz" * 9, level=1)
    assert api.compress(b"xyz", recipe=tiny_recipe) == api.compress(b"xyz", tiny_recipe)  # 0.x
    stream = io.BytesIO()
    api.compress_stream(io.BytesIO(b"xyz" * 9), stream, 1)
    assert stream.getvalue() == api.compress(b"xyz" * 9, level=1)
    with pytest.raises(ValueError, match="either"):
        api.compress(b"x", 1, recipe=tiny_recipe)
    with pytest.raises(TypeError, match="level"):
        api.compress(b"x", "fast")
    with pytest.raises(TypeError, match="recipe must be a Recipe"):
        api.Compressor(recipe="mix-v67")
    with pytest.raises(rwkvzip.RecipeError, match="level"):
        api.compress(b"x", level=10)


def _mixed(n: int, seed: int = 1) -> bytes:
    rng = random.Random(seed)
    words = [bytes(rng.choices(b"etaoinshrdlu", k=rng.randint(2, 7))) for _ in range(200)]
    return b" ".join(rng.choices(words, k=n // 4))[:n]


def test_compressor_in_pieces_gives_the_same_bytes_as_one_call(tiny_recipe):
    data = _mixed(70_000)  # two frames
    seen = []
    comp = api.Compressor(recipe=tiny_recipe, progress=seen.append)
    rng = random.Random(2)
    parts, pos = [], 0
    while pos < len(data):
        step = rng.choice([1, 7, 1000, 30_000])
        parts.append(comp.compress(data[pos:pos + step]))
        pos += step
    parts.append(comp.flush())
    assert b"".join(parts) == api.compress(data, tiny_recipe)
    assert sum(seen) == len(data) and len(seen) > 2  # progress within frames, not per frame
    assert comp.stats.raw_bytes == len(data) and comp.stats.frames == 2
    with pytest.raises(ValueError, match="flushed"):
        comp.compress(b"more")


def test_decompressor_fed_in_any_pieces_with_max_length(tiny_recipe):
    data = _mixed(70_000, seed=3)
    blob = api.compress(data, tiny_recipe)
    rng = random.Random(4)
    dec = api.Decompressor()
    out, pos = bytearray(), 0
    while not dec.eof:
        if dec.needs_input:
            step = rng.choice([1, 3, 50, 5000])
            chunk, pos = blob[pos:pos + step], pos + step
            assert chunk, "decompressor wants input after the end"
        else:
            chunk = b""
        piece = dec.decompress(chunk, max_length=rng.choice([-1, 1, 1000]))
        out += piece
    assert bytes(out) == data and dec.unused_data == b""
    with pytest.raises(EOFError):
        dec.decompress(b"RWKZ")


def test_decompressor_leaves_what_follows_the_member_in_unused_data(tiny_recipe):
    blob = api.compress(b"first", tiny_recipe)
    dec = api.Decompressor()
    assert dec.decompress(blob + b"next member") == b"first"
    assert dec.eof and dec.unused_data == b"next member"
    partial = api.Decompressor()
    assert partial.decompress(blob[:-1]) == b"first" and not partial.eof
    assert "trailer" in str(partial.truncated())


def test_streams_report_stats_and_progress(tiny_recipe):
    data = _mixed(5000)
    packed = io.BytesIO()
    seen = []
    stats = api.compress_stream(io.BytesIO(data), packed, recipe=tiny_recipe, progress=seen.append)
    assert stats.raw_bytes == len(data) and stats.compressed_bytes == len(packed.getvalue())
    assert sum(seen) == len(data)
    out, seen = io.BytesIO(), []
    back = api.decompress_stream(io.BytesIO(packed.getvalue() * 2), out, seen.append)
    assert out.getvalue() == data * 2 and sum(seen) == 2 * len(data)
    assert (back.members, back.frames, back.raw_bytes) == (2, 2, 2 * len(data))
    assert back.compressed_bytes == 2 * len(packed.getvalue())


def test_a_model_too_large_for_memory_is_refused_before_allocating():
    huge = Recipe(model=Rwkv7Config(hidden=4096, layers=64))
    assert api.model_bytes(huge) > api.MAX_MODEL_BYTES
    header = container.MAGIC + bytes([1, 0]) + container.encode_varint(len(huge.to_json()))
    with pytest.raises(FormatError, match="MiB"):
        api.decompress(header + huge.to_json() + container.encode_trailer(0))
    with pytest.raises(rwkvzip.RecipeError, match="MiB"):
        api.compress(b"x", huge)


def test_open_binary_modes_append_and_file_objects(tmp_path, tiny_recipe):
    path = tmp_path / "a.rwkz"
    with rwkvzip.open(path, "wb", recipe=tiny_recipe) as f:
        assert f.write(b"line one\n") == 9
        f.write(memoryview(b"line two\n"))
        assert f.tell() == 18
    with rwkvzip.open(path, "ab", level=1) as f:  # a second member
        f.write(b"line three\n")
    with rwkvzip.open(path) as f:
        assert f.readline() == b"line one\n"
        assert f.tell() == 9
        assert f.read() == b"line two\nline three\n"
        assert f.read() == b""
        with pytest.raises(io.UnsupportedOperation):
            f.write(b"x")
    with pytest.raises(FileExistsError):
        rwkvzip.open(path, "xb")
    buf = io.BytesIO()
    with rwkvzip.open(buf, "wb", recipe=tiny_recipe) as f:
        f.write(b"into a file object")
    assert not buf.closed and api.decompress(buf.getvalue()) == b"into a file object"
    assert rwkvzip.RwkvzipFile(io.BytesIO(buf.getvalue())).read() == b"into a file object"


def test_open_text_mode_and_bad_arguments(tmp_path, tiny_recipe):
    path = tmp_path / "t.rwkz"
    with rwkvzip.open(path, "wt", recipe=tiny_recipe, encoding="utf-8") as f:
        f.write("héllo\nwörld\n")
    with rwkvzip.open(path, "rt", encoding="utf-8") as f:
        assert list(f) == ["héllo\n", "wörld\n"]
    with pytest.raises(ValueError, match="mode"):
        rwkvzip.open(path, "rw")
    with pytest.raises(ValueError, match="text mode"):
        rwkvzip.open(path, "rb", encoding="utf-8")
    with pytest.raises(ValueError, match="writing"):
        rwkvzip.open(path, "rb", level=3)
    with pytest.raises(rwkvzip.RecipeError):
        rwkvzip.open(tmp_path / "never.rwkz", "wb", level=42)
    assert not (tmp_path / "never.rwkz").exists()  # a bad level fails before the file is made


def test_reading_a_corrupt_or_truncated_file_raises_format_error(tmp_path, tiny_recipe):
    blob = api.compress(TEXT, tiny_recipe)
    path = tmp_path / "cut.rwkz"
    path.write_bytes(blob[:-3])
    with rwkvzip.open(path) as f, pytest.raises(FormatError, match="truncated"):
        f.read()


def test_the_readme_example_runs(tmp_path, monkeypatch, capsys):
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("## Python API", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    assert capsys.readouterr().out == "written through the model\n\n"
