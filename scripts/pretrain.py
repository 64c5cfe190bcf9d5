"""Build the pre-training corpus, train a prior on it, export and check it.

    python scripts/pretrain.py corpus --out DIR [--install] [--cap-scale X] [--sources v3]
    python scripts/pretrain.py train --corpus DIR --name NAME --arch rwkv7 \
        --set hidden=64,layers=1 --time SECONDS [--epochs N] [--work DIR]
    python scripts/pretrain.py train --trainer torch --corpus DIR --name NAME \
        [--from PRIOR] [--device cuda] --time SECONDS [--batch B --window T --lr LR]
    python scripts/pretrain.py export --corpus DIR --name NAME [--work DIR] -o FILE
    python scripts/pretrain.py shrink --from PRIOR --mlp N --name NAME [--work DIR]
    python scripts/pretrain.py bf16 --from PRIOR -o FILE [--corpus DIR]

The corpus comes only from what a fresh machine can install (DESIGN.md, "Learned
priors"): the Debian packages and PyPI releases pinned in SOURCE_SETS below, never evaluation
data (the Canterbury/Calgary corpora, enwik, the Bible, the CIA factbook), the Python
standard library or packages that copy it, or licence texts. None of the pinned sources
ships those; on top of that, files named like an evaluation file or a licence are left
out, and so is any document whose long lines are more than a tenth lines of
../shared/corpus or of /usr/share/common-licenses, and any data table (C arrays of
numbers: corpus.looks_like_table). `corpus` writes
DIR/corpus.bin and DIR/manifest.json (every document's source, name, bytes, SHA-256 and
split); the manifest's digest goes into the prior.

`train` runs the compressor's own online learner (rwkvzip.training: the kernels' TBPTT and
Adam) over the training documents for many epochs, each from a zero state, in the
background if you like (`nohup ... &`): it logs to WORK/NAME.log and checkpoints to
WORK/NAME.ckpt.npz every few minutes, and a second `train` with the same name resumes.
`--trainer torch` is the batched trainer (scripts/torchnet.py), on the CPU or, with
`--device cuda`, a GPU; `--from PRIOR` starts it from a prior's weights with a fresh
optimizer (a warm restart). `export` writes the prior file, then reloads it and checks
that the numba forward gives the trainer's validation loss (within 0.5 %). `shrink`
starts a torch run from a GDN prior with a narrower MLP (its N strongest units kept): a
faster network that inherits the prior's training, for `train --trainer torch --name NAME`
to fine-tune. `bf16` rounds a prior's matrices to bfloat16 and stores them so: a frozen
network then runs from a copy half the size (rwkvzip/ops/bf16.py), with the same bits.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import subprocess
import sys
import tarfile
import time
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from harness import CORPUS, ROOT

from rwkvzip import corpus as corp
from rwkvzip import priors, training
from rwkvzip.ops.bf16 import round_matrices
from rwkvzip.recipe import ARCHS, Recipe, parse_settings, with_overrides

EVAL_CORPUS = CORPUS
DOWNLOADS = Path.home() / ".cache" / "rwkvzip-pretrain"
MiB = 1 << 20
# Names of evaluation files (and of their newer versions that packages ship).
EVAL_NAMES = {"alice29.txt", "asyoulik.txt", "cp.html", "fields.c", "grammar.lsp",
              "kennedy.xls", "lcet10.txt", "plrabn12.txt", "ptt5", "sum", "xargs.1",
              "bible.txt", "world192.txt", "e.coli", "xargs.1.gz"}


@dataclass(frozen=True)
class Source:
    """One kind of data: Debian package files or a PyPI release's files, capped in bytes."""

    name: str
    kind: str  # "deb" (files of installed packages) or "pypi" (a wheel or sdist)
    packages: tuple[str, ...]  # Debian packages, or "name==version" requirements
    suffixes: tuple[str, ...]  # file name endings taken (".gz" is read through)
    cap: int  # bytes taken at most, files picked in a fixed pseudo-random order
    under: str = ""  # only files whose path contains this
    sdist: bool = False  # PyPI: the source distribution instead of the wheel


SOURCES_V2 = [
    Source("man", "deb", ("manpages", "manpages-dev"), (".gz",), 6 * MiB, "/man/"),
    Source("gcide", "deb", ("dict-gcide",), (".dict.dz",), 6 * MiB),
    Source("fortunes", "deb", ("fortunes", "fortune-anarchism"), ("",), 4 * MiB,
           "/games/fortunes/"),
    Source("handbook", "deb", ("debian-handbook",), (".html",), 3 * MiB, "/html/en-US/"),
    Source("pydoc", "deb", ("python3.11-doc",), (".rst.txt",), 4 * MiB, "/_sources/"),
    Source("kerneldoc", "deb", ("linux-doc-6.1",), (".rst.gz", ".txt.gz"), 4 * MiB,
           "/Documentation/"),
    Source("python", "pypi", ("django==4.2.16", "requests==2.32.3", "flask==3.0.3",
                              "jinja2==3.1.4", "werkzeug==3.0.4", "click==8.1.7",
                              "rich==13.9.4", "pygments==2.18.0", "docutils==0.21.2",
                              "sphinx==7.4.7", "sympy==1.13.3", "attrs==24.2.0"),
           (".py",), 6 * MiB),
    Source("c", "pypi", ("brotli==1.1.0", "zstandard==0.23.0"), (".c", ".h"), 3 * MiB,
           sdist=True),
]
# v3: more of the 1913 Webster (its quotations are older English prose and verse) and two
# more prose dictionaries; every v2 source is otherwise the same.
SOURCES_V3 = [replace(s, cap=16 * MiB) if s.name == "gcide" else s for s in SOURCES_V2] + [
    Source("devil", "deb", ("dict-devil",), (".dict.dz",), 1 * MiB),
    Source("jargon", "deb", ("dict-jargon",), (".dict.dz",), 2 * MiB),
]
SOURCE_SETS = {"v2": SOURCES_V2, "v3": SOURCES_V3}


LOG_FILE: list[Path] = []  # the run's WORK/NAME.log, once `train` has named it


def log(msg: str) -> None:
    """A timestamped line on stdout and, during `train` and `shrink`, appended to the run's log."""
    line = f"{time.strftime('%H:%M:%S')} {msg}"
    print(line, flush=True)
    for path in LOG_FILE:
        with path.open("a") as f:
            f.write(line + "\n")


def log_to(path: Path) -> None:
    LOG_FILE[:] = [path]


# ---------------------------------------------------------------- corpus


def deb_files(pkg: str, install: bool) -> list[str]:
    st = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True)
    if st.returncode != 0:
        if not install:
            sys.exit(f"Debian package {pkg} is not installed: run "
                     f"'apt-get install {pkg}' (or pretrain.py corpus --install)")
        subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", pkg],
                       check=True)
        return deb_files(pkg, False)
    return [line for line in st.stdout.splitlines() if Path(line).is_file()]


def deb_version(pkg: str) -> str:
    st = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True,
                        text=True)
    return st.stdout.strip()


def read_member(name: str, raw: bytes) -> bytes:
    if name.endswith((".gz", ".dz")):
        return gzip.decompress(raw)
    return raw


def deb_source(src: Source, install: bool) -> tuple[list[tuple[str, bytes]], dict]:
    files: list[tuple[str, bytes]] = []
    for pkg in src.packages:
        for path in deb_files(pkg, install):
            if src.under not in path or not path.endswith(src.suffixes):
                continue
            if src.suffixes == ("",) and Path(path).suffix in (".dat", ".u8"):
                continue  # fortune's index files and symlinked copies
            files.append((path, read_member(path, Path(path).read_bytes())))
    return files, {"packages": {p: deb_version(p) for p in src.packages}}


def pypi_archive(req: str, sdist: bool) -> Path:
    DOWNLOADS.mkdir(parents=True, exist_ok=True)
    name, version = req.split("==")
    want = "--no-binary" if sdist else "--only-binary"
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", want, ":all:",
                    "-d", str(DOWNLOADS), req], check=True)
    stem = name.lower().replace("-", "_")
    for f in sorted(DOWNLOADS.iterdir()):
        low = f.name.lower().replace("-", "_")
        if low.startswith(f"{stem}_{version}") and (
                low.endswith((".tar.gz", ".zip")) if sdist else low.endswith(".whl")):
            return f
    sys.exit(f"pip download of {req} left no archive in {DOWNLOADS}")


def archive_members(path: Path) -> list[tuple[str, bytes]]:
    if path.name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(path) as z:
            return [(n, z.read(n)) for n in sorted(z.namelist()) if not n.endswith("/")]
    with tarfile.open(path) as t:
        return [(m.name, t.extractfile(m).read()) for m in sorted(t.getmembers(),
                                                                   key=lambda m: m.name)
                if m.isfile()]


def pypi_source(src: Source) -> tuple[list[tuple[str, bytes]], dict]:
    files, archives = [], {}
    for req in src.packages:
        path = pypi_archive(req, src.sdist)
        archives[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
        for name, data in archive_members(path):
            if name.endswith(src.suffixes):
                files.append((f"{req}/{name}", data))
    return files, {"archives": archives}


LICENCES = Path("/usr/share/common-licenses")


def long_lines(root: Path, pattern: str = "*") -> set[bytes]:
    """The long lines (40 bytes or more, stripped) of every file under root."""
    lines: set[bytes] = set()
    if root.is_dir():
        for f in root.rglob(pattern):
            if f.is_file():
                lines.update(ln.strip() for ln in f.read_bytes().splitlines()
                             if len(ln.strip()) >= 40)
    return lines


def eval_lines() -> set[bytes]:
    """Long lines of the evaluation files and of the licence texts: a document made of them
    (COPYING files under other names, quoted licences, eval texts) is not trained on. The
    evaluation corpus must be there: without it the filter would pass everything."""
    if not EVAL_CORPUS.is_dir():
        raise SystemExit(f"pretrain: the evaluation corpus {EVAL_CORPUS} is missing (set "
                         "RWKVZIP_CORPUS): its lines are what the training corpus must avoid")
    return long_lines(EVAL_CORPUS) | long_lines(LICENCES)


def overlaps_eval(data: bytes, lines: set[bytes]) -> bool:
    long = [ln.strip() for ln in data.splitlines() if len(ln.strip()) >= 40]
    return bool(long) and sum(ln in lines for ln in long) > 0.1 * len(long)


def build_corpus(out: Path, install: bool, cap_scale: float, source_set: str = "v3") -> dict:
    banned = eval_lines()
    docs: list[corp.Document] = []
    sources = []
    for src in SOURCE_SETS[source_set]:
        files, origin = (deb_source(src, install) if src.kind == "deb" else pypi_source(src))
        kept, skipped = 0, 0
        order = sorted(files, key=lambda f: hashlib.sha256(f[0].encode()).digest())
        cap = int(src.cap * cap_scale)
        for name, data in order:
            base = Path(name).name
            if (corp.is_skipped_name(base) or base in EVAL_NAMES or corp.looks_binary(data)
                    or not data.strip() or corp.looks_like_table(data)
                    or overlaps_eval(data, banned)):
                skipped += 1
                continue
            if kept >= cap:
                break
            data = data[:cap - kept]
            kept += len(data)
            docs.extend(corp.pieces(src.name, name, data))
        sources.append({"name": src.name, "kind": src.kind, "bytes": kept,
                        "skipped_files": skipped, **origin})
        log(f"{src.name}: {kept:,} bytes ({skipped} files left out)")
    man = corp.save(docs, out, sources)
    log(f"corpus {out}: {man['train_bytes']:,} train + {man['val_bytes']:,} validation "
        f"bytes, manifest {man['digest'][:16]}")
    return man


# ---------------------------------------------------------------- train / export

VAL_CAP = 512 * 1024  # validation bytes evaluated, spread over every source


def validation(docs: list[corp.Document]) -> list[corp.Document]:
    """Every k-th validation document, so that about VAL_CAP bytes of all sources remain."""
    val = [d for d in docs if d.split == "val"]
    step = max(1, round(sum(len(d.data) for d in val) / VAL_CAP))
    return val[::step]


def per_source(recipe: Recipe, W, val: list[corp.Document]) -> dict[str, float]:
    """Validation bpb of each source, and of all (key "all")."""
    out = {src: training.evaluate(recipe, W, [d for d in val if d.source == src])
           for src in sorted({d.source for d in val})}
    total = sum(len(d.data) for d in val)
    out["all"] = sum(out[src] * sum(len(d.data) for d in val if d.source == src)
                     for src in out) / total
    return {k: round(v, 4) for k, v in out.items()}


def pretrain_recipe(arch: str, settings: str) -> Recipe:
    """The network and online learner of a pre-training run (no mixing)."""
    base = Recipe(arch=arch, model=ARCHS[arch][0](), bptt=8, ckpt=8, lr=0.001, decay=MiB,
                  lr_min=0.0001)
    return with_overrides(base, **parse_settings(settings))


def run_paths(work: Path, name: str) -> tuple[Path, Path, Path]:
    work.mkdir(parents=True, exist_ok=True)
    return work / f"{name}.ckpt.npz", work / f"{name}.json", work / f"{name}.log"


def cmd_train(a: argparse.Namespace) -> None:
    docs, man = corp.load(a.corpus)
    ckpt, info_path, log_path = run_paths(Path(a.work), a.name)
    log_to(log_path)
    # resuming: the run's own recipe, with a new learning-rate schedule if one is given
    recipe = (training.checkpoint_recipe(ckpt) if ckpt.exists()
              else pretrain_recipe(a.arch, a.set))
    schedule = {k: v for k, v in (("lr", a.lr), ("decay", a.decay), ("lr_min", a.lr_min))
                if v is not None}
    recipe = replace(recipe, **schedule)
    val = validation(docs)
    log(f"{a.name}: {recipe.arch} {recipe.model}, {recipe.build_model().layout.size:,} "
        f"parameters; {man['train_bytes']:,} training bytes, {len(val)} validation documents")
    W, st = training.fit(recipe, docs, seconds=a.time, epochs=a.epochs, seed=a.seed,
                           checkpoint=ckpt, checkpoint_every=a.checkpoint_every, log=log,
                           average=a.average)
    val_bpb = per_source(recipe, W, val)
    log(f"{a.name}: {st.bytes_trained:,} bytes in {st.seconds:.0f} s, epoch {st.epoch}; "
        f"validation {val_bpb} bpb ({'averaged' if a.average else 'last'} weights)")
    info = {"recipe": recipe.to_dict(), "manifest": man["digest"], "val_bpb": val_bpb,
            "averaged": a.average,
            "bytes_trained": st.bytes_trained, "seconds": round(st.seconds, 1),
            "epochs": round(st.epoch + st.doc / max(1, sum(d.split == "train" for d in docs)),
                            3),
            "history": st.history}
    info_path.write_text(json.dumps(info, indent=1) + "\n")


def import_torchnet():
    """(torch, scripts/torchnet.py), imported under the name its numba cache knows."""
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torchnet

    return torch, torchnet


def cmd_train_torch(a: argparse.Namespace) -> None:
    """The batched trainer (scripts/torchnet.py): many documents side by side, TBPTT over
    windows, AdamW with a cosine rate; needs PyTorch (pip install torch)."""
    torch, torchnet = import_torchnet()
    torch.set_num_threads(a.threads)
    try:
        torch.zeros(1, device=a.device)
    except (RuntimeError, AssertionError) as exc:  # no such device, or a CPU-only PyTorch
        sys.exit(f"train: device {a.device!r} is not usable here: {str(exc).splitlines()[0]}")
    docs, man = corp.load(a.corpus)
    _, info_path, log_path = run_paths(Path(a.work), a.name)
    ckpt = Path(a.work) / f"{a.name}.torch.pt"
    log_to(log_path)
    if ckpt.exists():
        if a.source:
            sys.exit(f"train: {ckpt} exists (a run of that name has started); drop --from "
                     "to resume it")
        extra = torchnet.load_run(ckpt)["extra"]
        recipe = Recipe.from_dict(extra["recipe"])
        model = recipe.build_model()
        W = model.init_params(recipe.seed)  # fit loads the checkpoint's weights
    elif a.source:
        prior = priors.load_prior(a.source)
        model, W = prior.model, np.array(prior.W)
        recipe = replace(pretrain_recipe(model.arch, ""), model=model.cfg)
        extra = {"recipe": recipe.to_dict(), "started_from": prior.digest}
        log(f"{a.name}: starts from {prior.name} ({priors.short(prior.digest)})")
    else:
        recipe = pretrain_recipe(a.arch, a.set)
        model = recipe.build_model()
        W = model.init_params(recipe.seed)
        extra = {"recipe": recipe.to_dict()}
    net = torchnet.make_net(model, W, recurrence=a.recurrence, device=a.device)
    sched = torchnet.Schedule(lr=a.lr or torchnet.Schedule.lr, batch=a.batch,
                              window=a.window)
    train = [d for d in docs if d.split == "train"]
    val = validation(docs)
    log(f"{a.name}: torch trainer, {recipe.arch} {recipe.model}, {model.layout.size:,} "
        f"parameters; {man['train_bytes']:,} training bytes, {len(val)} validation "
        f"documents; {sched}; on {net.device}")
    prog = torchnet.fit(net, train, sched, a.time, seed=a.seed, checkpoint=ckpt,
                        checkpoint_every=a.checkpoint_every, log=log, extra=extra)
    val_bpb = torchnet.evaluate(net, val)
    log(f"{a.name}: {prog.bytes_trained:,} bytes in {prog.seconds:.0f} s, "
        f"{prog.steps} steps; validation {val_bpb} bpb")
    info = {"trainer": "torch", "recipe": recipe.to_dict(), "manifest": man["digest"],
            "val_bpb": val_bpb, "schedule": sched.__dict__, "steps": prog.steps,
            "device": str(net.device), **{k: v for k, v in extra.items() if k != "recipe"},
            "bytes_trained": prog.bytes_trained, "seconds": round(prog.seconds, 1),
            "epochs": round(prog.bytes_trained / man["train_bytes"], 3),
            "history": prog.history}
    info_path.write_text(json.dumps(info, indent=1) + "\n")


def trained_weights(work: Path, name: str, info: dict, recipe: Recipe):
    """(model, weights) a run ended with."""
    if info.get("trainer") == "torch":
        import torch

        run = torch.load(work / f"{name}.torch.pt", weights_only=False, map_location="cpu")
        return recipe.build_model(), run["W"]
    ckpt, _, _ = run_paths(work, name)
    predictor = training.NetworkPredictor(recipe)
    _, avg = training.load_checkpoint(ckpt, predictor)
    return predictor.model, avg if info.get("averaged") else predictor.W


def shrink_mlp(model, W, units: int):
    """(model, weights) of a GDN with its MLP cut to the `units` hidden units whose gate, up
    and down weights have the largest product of norms, kept in their order."""
    if model.arch != "gdn":
        sys.exit(f"shrink: only a GDN prior has an MLP to narrow, not {model.arch}")
    if not 0 < units < model.cfg.mlp:
        sys.exit(f"shrink: --mlp must be below the prior's {model.cfg.mlp}")
    small = type(model)(replace(model.cfg, mlp=units))
    tensors = model.layout.tensors(W)
    W2 = np.zeros(small.layout.size, dtype=np.float32)
    for name, value in tensors.items():
        if ".mlp." not in name:
            small.layout.set(W2, name, value)
    for layer in range(model.cfg.layers):
        p = f"model.layers.{layer}.mlp."
        gate, up = tensors[p + "gate_proj.weight"], tensors[p + "up_proj.weight"]
        down = tensors[p + "down_proj.weight"]
        score = (np.linalg.norm(gate, axis=1) * np.linalg.norm(up, axis=1)
                 * np.linalg.norm(down, axis=0))
        keep = np.sort(np.argsort(-score, kind="stable")[:units])
        small.layout.set(W2, p + "gate_proj.weight", gate[keep])
        small.layout.set(W2, p + "up_proj.weight", up[keep])
        small.layout.set(W2, p + "down_proj.weight", down[:, keep])
    return small, W2


def cmd_shrink(a: argparse.Namespace) -> None:
    """A torch run's first checkpoint (no steps taken, fresh AdamW) from a shrunk prior."""
    torch, torchnet = import_torchnet()
    ckpt = Path(a.work) / f"{a.name}.torch.pt"
    if ckpt.exists():
        sys.exit(f"shrink: {ckpt} exists (a run of that name has started)")
    _, _, log_path = run_paths(Path(a.work), a.name)
    log_to(log_path)
    prior = priors.load_prior(a.source)
    model, W = shrink_mlp(prior.model, np.array(prior.W), a.mlp)
    recipe = replace(pretrain_recipe(model.arch, ""), model=model.cfg)
    net = torchnet.make_net(model, W)
    opt = torch.optim.AdamW(list(net.parameters()))
    torchnet.save_run(ckpt, net, opt, torchnet.Progress(),
                      {"recipe": recipe.to_dict(), "shrunk_from": prior.digest})
    log(f"{a.name}: {prior.name} ({priors.short(prior.digest)}) with its MLP cut "
        f"{prior.model.cfg.mlp} -> {a.mlp}, {model.layout.size:,} parameters; train it with "
        f"`train --trainer torch --name {a.name}`")


def cmd_bf16(a: argparse.Namespace) -> None:
    """The prior with its matrices rounded to bfloat16 (nearest, ties to even) and stored
    so: half the bytes, and a frozen network then runs from a bfloat16 copy of them
    (rwkvzip/ops/bf16.py), with the same bits as from float32. The vectors stay float32.
    With --corpus, the validation bpb before and after, by the numba forward."""
    prior = priors.load_prior(a.source)
    W = round_matrices(np.array(prior.W), prior.model.layout.twin_table())
    info = {k: v for k, v in prior.training.items() if k != "rwkvzip"}  # save adds its own
    info["bf16_from"] = prior.digest
    digest = priors.save_prior(a.output, prior.model, W, prior.metadata[priors.KEY_MANIFEST],
                               info, prior.dictionary, bf16_matrices=True)
    log(f"{a.output}: {prior.name} ({priors.short(prior.digest)}) with its matrices in "
        f"bfloat16: {priors.short(digest)}, {Path(a.output).stat().st_size:,} bytes")
    if a.corpus:
        docs, _ = corp.load(a.corpus)
        val = validation(docs)
        recipe = replace(pretrain_recipe(prior.model.arch, ""), model=prior.model.cfg)
        before = training.evaluate(replace(recipe, prior=prior.digest), prior.W, val)
        after = training.evaluate(replace(recipe, prior=digest), W, val)
        log(f"validation {before:.4f} -> {after:.4f} bpb ({100 * (after / before - 1):+.3f} %)")


def cmd_export(a: argparse.Namespace) -> None:
    docs, man = corp.load(a.corpus)
    work = Path(a.work)
    info = json.loads((work / f"{a.name}.json").read_text())
    recipe = Recipe.from_dict(info["recipe"])
    model, weights = trained_weights(work, a.name, info, recipe)
    val = validation(docs)
    trained = info["val_bpb"]  # measured by the trainer itself
    training_info = {k: info[k] for k in ("bytes_trained", "seconds", "epochs")}
    training_info["val_bpb"] = trained
    training_info["data"] = {s["name"]: s["bytes"] for s in man["sources"]}
    if info.get("trainer") == "torch":
        training_info["trainer"] = {"tool": "torch", "steps": info["steps"],
                                    **info["schedule"],
                                    **{k: info[k] for k in ("device", "started_from",
                                                            "shrunk_from") if k in info}}
    else:
        training_info["averaged"] = info.get("averaged")
        training_info["trainer"] = {"bptt": recipe.bptt, "lr": recipe.lr,
                                    "decay": recipe.decay, "lr_min": recipe.lr_min,
                                    "optimizer": recipe.optimizer}
    digest = priors.save_prior(a.output, model, weights, man["digest"], training_info)
    prior = priors.load_prior(a.output)
    bpb = training.evaluate(replace(recipe, prior=digest), prior.W, val)
    rel = abs(bpb - trained["all"]) / trained["all"]
    log(f"{a.output}: {priors.short(digest)}, {Path(a.output).stat().st_size:,} bytes; "
        f"validation {bpb:.4f} bpb by the numba forward on the file vs {trained['all']:.4f} "
        f"by the trainer ({100 * rel:.3f} %); by source {trained}")
    if rel > 0.005:
        sys.exit("the exported prior does not reproduce the trainer's validation loss")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("corpus", help="build the training corpus")
    c.add_argument("--out", required=True)
    c.add_argument("--install", action="store_true", help="apt-get install missing packages")
    c.add_argument("--cap-scale", type=float, default=1.0, help="scale every source's cap")
    c.add_argument("--sources", choices=sorted(SOURCE_SETS), default="v3",
                   help="the source set (v2: the corpus of the v2 priors)")
    for name in ("train", "export"):
        p = sub.add_parser(name)
        p.add_argument("--corpus", required=True)
        p.add_argument("--name", required=True, help="run name (checkpoint, log, info)")
        p.add_argument("--work", default=str(ROOT / "build" / "pretrain"))
    t = sub.choices["train"]
    t.add_argument("--arch", default="rwkv7", choices=sorted(ARCHS))
    t.add_argument("--set", default="", help="recipe settings, e.g. hidden=64,layers=1")
    t.add_argument("--time", type=float, default=None, help="seconds of training in all")
    t.add_argument("--epochs", type=int, default=None)
    t.add_argument("--seed", type=int, default=0, help="document order")
    t.add_argument("--checkpoint-every", type=float, default=300.0)
    t.add_argument("--average", type=float, default=4 * MiB,
                   help="bytes over which the exported weights are averaged (0: last)")
    t.add_argument("--lr", type=float, help="base learning rate (also on resuming)")
    t.add_argument("--decay", type=int, help="lr / sqrt(1 + bytes / DECAY)")
    t.add_argument("--lr-min", type=float, help="floor of the decayed rate")
    t.add_argument("--trainer", choices=("online", "torch"), default="online",
                   help="online: the compressor's own learner; torch: batched (PyTorch)")
    t.add_argument("--batch", type=int, default=128, help="torch: documents side by side")
    t.add_argument("--window", type=int, default=128, help="torch: bytes of BPTT a step")
    t.add_argument("--threads", type=int, default=1, help="torch: CPU threads")
    t.add_argument("--device", default="cpu", help="torch: where to train (cpu, cuda)")
    t.add_argument("--recurrence", default="", choices=("", "numba", "loop", "chunked"),
                   help="torch: the recurrences' form (default: numba on the CPU, chunked "
                        "off it)")
    t.add_argument("--from", dest="source",
                   help="torch: start a new run from this prior file's weights")
    sub.choices["export"].add_argument("-o", "--output", required=True)
    s = sub.add_parser("shrink", help="start a torch run from a GDN prior with a narrower MLP")
    s.add_argument("--from", dest="source", required=True, help="the prior file")
    s.add_argument("--mlp", type=int, required=True, help="MLP units to keep")
    s.add_argument("--name", required=True, help="run name (checkpoint, log, info)")
    s.add_argument("--work", default=str(ROOT / "build" / "pretrain"))
    b = sub.add_parser("bf16", help="a prior's matrices rounded to bfloat16 (a faster frozen "
                       "forward, half the file)")
    b.add_argument("--from", dest="source", required=True, help="the prior file")
    b.add_argument("-o", "--output", required=True)
    b.add_argument("--corpus", help="measure the validation bpb before and after on it")
    a = ap.parse_args(argv)
    if a.cmd == "corpus":
        build_corpus(Path(a.out), a.install, a.cap_scale, a.sources)
    elif a.cmd == "train":
        if a.time is None and a.epochs is None:
            ap.error("give --time or --epochs")
        cmd_train_torch(a) if a.trainer == "torch" else cmd_train(a)
    elif a.cmd == "shrink":
        cmd_shrink(a)
    elif a.cmd == "bf16":
        cmd_bf16(a)
    else:
        cmd_export(a)


if __name__ == "__main__":
    main()
