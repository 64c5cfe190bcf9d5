"""What the measuring scripts share: where the repository and the corpus are, the corpus's
files, the CPU they ran on, and one timed, verified roundtrip (wall and CPU seconds each
way, bits per byte).

Importing it loads no rwkvzip module (so numba's cache is not set up in scripts that start
cold subprocesses); `roundtrip` imports the codec when it runs."""

from __future__ import annotations

import io
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rwkvzip.priors import Prior
    from rwkvzip.recipe import Recipe

ROOT = Path(__file__).resolve().parents[1]


def find_corpus() -> Path:
    """RWKVZIP_CORPUS, else ../shared/corpus beside the checkout."""
    given = os.environ.get("RWKVZIP_CORPUS")
    return Path(given) if given else ROOT.parent / "shared" / "corpus"


CORPUS = find_corpus()


def cpu_name() -> str:
    """The CPU as /proc/cpuinfo names it, with its family and model (a virtual machine's
    name may not tell an EPYC's generation) and its widest vector extension: sessions land
    on different machines, and the kernels' speed depends on all three."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        return platform.processor() or platform.machine()
    flags = fields.get("flags", "").split()
    vectors = next((v for v in ("avx512f", "avx2", "avx", "sse2") if v in flags), "")
    name = fields.get("model name", platform.machine())
    return (f"{name} (family {fields.get('cpu family', '?')}, model {fields.get('model', '?')}; "
            f"{vectors})")


def input_path(path: Path, corpus: Path = CORPUS) -> Path:
    """A FILE argument: the path itself if it exists, else that name under the corpus
    (canterbury/alice29.txt)."""
    return path if path.exists() else corpus / path


def corpus_files(corpus: Path = CORPUS) -> list[Path]:
    """Every file in the corpus's folders (the files at its top are its notes)."""
    return sorted(p for p in corpus.rglob("*") if p.is_file() and p.parent != corpus)


@dataclass
class Roundtrip:
    bytes: int
    compressed: int  # the whole file, header included
    header: int  # bytes of its header (a spelled-out recipe: far more than a card's one)
    ok: bool  # decompressing gave the input back (True when not decompressed)
    compress_wall_s: float
    compress_cpu_s: float
    decompress_wall_s: float | None = None
    decompress_cpu_s: float | None = None

    @property
    def bpb(self) -> float:
        return 8 * self.compressed / max(self.bytes, 1)

    @property
    def card_bpb(self) -> float:
        """bpb as a preset card would write it: a one-byte card id for the recipe."""
        return 8 * (self.compressed - self.header + 1) / max(self.bytes, 1)

    @property
    def compress_kbps(self) -> float:
        return self.bytes / 1e3 / self.compress_wall_s

    @property
    def decompress_kbps(self) -> float | None:
        if self.decompress_wall_s is None:
            return None
        return self.bytes / 1e3 / self.decompress_wall_s

    def row(self, **extra) -> dict:
        """The measurement as a JSON row, speeds and bpb included."""
        return {**extra, **vars(self), "bpb": self.bpb, "card_bpb": self.card_bpb,
                "compress_kBps": self.compress_kbps, "decompress_kBps": self.decompress_kbps}


def roundtrip(data: bytes, recipe: Recipe, prior: Prior | None = None,
              decompress: bool = True) -> Roundtrip:
    """Compress `data` with `recipe` (and its prior), then decompress and compare."""
    from rwkvzip.api import compress_stream, decompress_stream
    from rwkvzip.coding import container

    packed = io.BytesIO()
    w0, c0 = time.perf_counter(), time.process_time()
    compress_stream(io.BytesIO(data), packed, recipe=recipe, prior=prior)
    result = Roundtrip(len(data), len(packed.getvalue()), len(container.encode_header(recipe)),
                       True, time.perf_counter() - w0, time.process_time() - c0)
    if decompress:
        out = io.BytesIO()
        w0, c0 = time.perf_counter(), time.process_time()
        decompress_stream(io.BytesIO(packed.getvalue()), out, prior=prior)
        result.decompress_wall_s = time.perf_counter() - w0
        result.decompress_cpu_s = time.process_time() - c0
        result.ok = out.getvalue() == data
    return result
