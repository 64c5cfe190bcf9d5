"""Training documents: gathered from files, split into train and validation, with a manifest.

A prior is only as honest as its data (DESIGN.md, "Learned priors"): every document is
recorded in a manifest (source, name, bytes, SHA-256, split) whose digest goes into the
prior's metadata, and files that are licence texts or that look like evaluation data are
left out. `rwkvzip train` and scripts/pretrain.py both build their documents here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

DOC_BYTES = 1 << 16  # a long file is cut into documents of at most this many bytes
VAL_EVERY = 40  # about one document in VAL_EVERY goes to the validation split
# Names never trained on: licence texts (DESIGN.md) and package boilerplate.
SKIP_STEMS = ("license", "licence", "copying", "copyright", "notice", "authors", "patents")


class CorpusError(ValueError):
    """Samples that cannot be used (missing, unreadable, empty)."""


@dataclass(frozen=True)
class Document:
    source: str  # which source (package, sample set) it came from
    name: str  # file name within the source, with #k for the k-th piece of a long file
    data: bytes
    split: str  # "train" or "val"

    def record(self) -> dict:
        d = asdict(self)
        del d["data"]
        d["bytes"] = len(self.data)
        d["sha256"] = hashlib.sha256(self.data).hexdigest()
        return d


def is_skipped_name(name: str) -> bool:
    stem = Path(name).name.lower()
    return stem.startswith(SKIP_STEMS)


def looks_binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


TABLE_BYTES = frozenset(b"0123456789abcdefABCDEFxX,")
TABLE_SHARE = 0.75  # code files are 0.25-0.45 of these bytes; C arrays of numbers 0.8-1.0


def looks_like_table(data: bytes) -> bool:
    """Mostly digits, hex and commas (a C array of numbers, a palette): data tables teach a
    text prior nothing and cost it capacity."""
    chars = data.translate(None, b" \t\r\n")
    if not chars:
        return False
    return sum(chars.count(b) for b in TABLE_BYTES) > TABLE_SHARE * len(chars)


def split_of(source: str, name: str) -> str:
    """Deterministic split from the name (not the content), so edits keep a file's side."""
    h = int.from_bytes(hashlib.sha256(f"{source}/{name}".encode()).digest()[:4], "little")
    return "val" if h % VAL_EVERY == 0 else "train"


def pieces(source: str, name: str, data: bytes, split: str | None = None) -> list[Document]:
    """A file as documents of at most DOC_BYTES; all pieces of one file share a split."""
    side = split or split_of(source, name)
    if len(data) <= DOC_BYTES:
        return [Document(source, name, data, side)]
    return [Document(source, f"{name}#{k}", data[lo:lo + DOC_BYTES], side)
            for k, lo in enumerate(range(0, len(data), DOC_BYTES))]


def sample_files(paths: Iterable[str | Path]) -> list[tuple[str, bytes]]:
    """(name, bytes) of every regular, non-empty, non-binary file under the given paths."""
    out: list[tuple[str, bytes]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file())
            base = path
        elif path.is_file():
            files, base = [path], path.parent
        else:
            raise CorpusError(f"{path}: no such file or directory")
        for f in files:
            try:
                data = f.read_bytes()
            except OSError as exc:
                raise CorpusError(f"{f}: {exc.strerror or exc}") from None
            if data and not looks_binary(data) and not is_skipped_name(f.name):
                out.append((str(f.relative_to(base)), data))
    if not out:
        raise CorpusError("no usable sample files (empty, binary or licence files only)")
    return out


def documents_from_samples(paths: Iterable[str | Path], source: str = "samples",
                           val_fraction: float = 0.1) -> list[Document]:
    """The user's samples as documents; about val_fraction of the bytes held out (whole
    files where there are several, else the tail of the one file)."""
    files = sample_files(paths)
    total = sum(len(d) for _, d in files)
    want_val = max(1, int(total * val_fraction))
    docs: list[Document] = []
    if len(files) >= 4:
        order = sorted(files, key=lambda f: hashlib.sha256(f[0].encode()).digest())
        held = 0
        for name, data in order:
            split = "val" if held < want_val and len(data) <= 2 * want_val else "train"
            held += len(data) if split == "val" else 0
            docs.extend(pieces(source, name, data, split))
        if held == 0:  # every file too large to hold out whole: fall back to tails
            docs = []
    if not docs:
        for name, data in files:
            cut = len(data) - max(1, int(len(data) * val_fraction)) if len(data) > 1 else 1
            docs.extend(pieces(source, name, data[:cut], "train"))
            docs.extend(pieces(source, name + "@tail", data[cut:], "val"))
    return [d for d in docs if d.data]


def manifest(docs: list[Document], sources: list[dict] | None = None) -> dict:
    """Every document's record, plus the digest that names this training set."""
    body = {"sources": sources or [], "documents": [d.record() for d in docs]}
    raw = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return {**body, "digest": hashlib.sha256(raw).hexdigest(),
            "train_bytes": sum(len(d.data) for d in docs if d.split == "train"),
            "val_bytes": sum(len(d.data) for d in docs if d.split == "val")}


def save(docs: list[Document], out_dir: str | Path, sources: list[dict] | None = None) -> dict:
    """corpus.bin (documents back to back) and manifest.json (their records, in order)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    man = manifest(docs, sources)
    with open(out / "corpus.bin", "wb") as f:
        for d in docs:
            f.write(d.data)
    (out / "manifest.json").write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")
    return man


def load(corpus_dir: str | Path) -> tuple[list[Document], dict]:
    """The documents and manifest written by `save`; checks every document's digest."""
    base = Path(corpus_dir)
    try:
        man = json.loads((base / "manifest.json").read_text())
        blob = (base / "corpus.bin").read_bytes()
    except (OSError, json.JSONDecodeError) as exc:
        raise CorpusError(f"{base}: not a corpus directory ({exc})") from None
    docs, pos = [], 0
    for rec in man["documents"]:
        data = blob[pos:pos + rec["bytes"]]
        pos += rec["bytes"]
        if hashlib.sha256(data).hexdigest() != rec["sha256"]:
            raise CorpusError(f"{base}: document {rec['name']} does not match the manifest")
        docs.append(Document(rec["source"], rec["name"], data, rec["split"]))
    return docs, man
