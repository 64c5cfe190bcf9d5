"""Command line (click): argument handling only; the work is in commands.py and selftest.py.

Two forms share one set of options:
  rwkvzip compress|decompress|test|info|selftest [OPTIONS] [FILE]...
  rwkvzip [-d|-t|-l] [OPTIONS] [FILE]...      gzip's form (compress by default)
"""

from __future__ import annotations

import os
import signal
import sys

import click

from rwkvzip import __version__
from rwkvzip.fileio import UserError

EXIT_OK, EXIT_ERROR = 0, 1
CONTEXT = {"help_option_names": ["-h", "--help"]}
GROUP_ONLY_ARGS = {"-h", "--help", "-V", "--version"}


def _last_wins(dest: str, value):
    """Callback for flags that share one setting (-1 ... -9, -d/-t/-l, -k/--rm): click runs
    callbacks in command-line order, so the last flag given wins, as in gzip."""

    def callback(ctx: click.Context, param: click.Parameter, given: bool) -> None:
        if given:
            ctx.meta[dest] = value

    return callback


class _LevelOption(click.Option):
    """-1: its help line covers -1 ... -9 and names the default (read from recipe.py only
    when help is shown, so starting up stays fast)."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str]:
        from rwkvzip.recipe import DEFAULT_LEVEL, LEVELS

        runs: list[list] = []  # consecutive levels naming the same card: [first, last, card]
        for level, card in sorted(LEVELS.items()):
            if runs and runs[-1][2] == card:
                runs[-1][1] = level
            else:
                runs.append([level, level, card])
        cards = ", ".join(f"-{a}: {card}" if a == b else f"-{a} ... -{b}: {card}"
                          for a, b, card in runs)
        return ("-1 ... -9, --fast, --best",
                f"Compression level, as preset cards: {cards} [default: -{DEFAULT_LEVEL}]")


def _options(*decorators):
    def apply(f):
        for decorator in reversed(decorators):
            f = decorator(f)
        return f
    return apply


LEVEL = _options(
    click.option("-1", "level_1", cls=_LevelOption, is_flag=True, expose_value=False,
                 callback=_last_wins("level", 1)),
    *[click.option(f"-{n}", f"level_{n}", is_flag=True, expose_value=False, hidden=True,
                   callback=_last_wins("level", n)) for n in range(2, 10)],
    click.option("--fast", is_flag=True, expose_value=False, hidden=True,
                 callback=_last_wins("level", 1)),
    click.option("--best", is_flag=True, expose_value=False, hidden=True,
                 callback=_last_wins("level", 9)),
)
RECIPE = _options(
    click.option("--arch", type=click.Choice(["rwkv7", "gdn"]),
                 help="Predictor architecture (RWKV-7 or Gated DeltaNet)."),
    click.option("--hidden", type=int, help="Hidden size (RWKV-7: a multiple of 64)."),
    click.option("--layers", type=int, help="Number of layers."),
    click.option("--seed", type=int, help="Seed of the initial weights."),
    click.option("--optimizer", type=click.Choice(["sgd", "adam"]), help="Online optimizer."),
    click.option("--lr", type=float, help="Learning rate."),
    click.option("--bptt", type=int,
                 help="0: train the output layer only; 1: exact one-step gradient; "
                      "N >= 2: truncated BPTT over N-byte segments."),
    click.option("--scope", help="Parameter groups trained, joined by '+': embed, norm, "
                                 "attn, ffn, head, bias (or 'all')."),
    click.option("--clip", type=float, help="Per-element gradient clip (0: off)."),
    click.option("--mix/--no-mix", default=None,
                 help="Mix the network with context models and a match model (--no-mix: "
                      "the network alone)."),
)
OUTPUT = _options(
    click.option("-c", "--stdout", "--to-stdout", "stdout", is_flag=True,
                 help="Write to standard output; keep inputs."),
    click.option("-o", "--output", metavar="OUT",
                 help="Write to OUT ('-': standard output); one input file only."),
    click.option("-k", "--keep", is_flag=True, expose_value=False,
                 callback=_last_wins("keep", True), help="Keep input files (the default)."),
    click.option("--rm", is_flag=True, expose_value=False, callback=_last_wins("keep", False),
                 help="Delete each input once its output is complete."),
)
FORCE = click.option("-f", "--force", is_flag=True,
                     help="Overwrite outputs; compress FILE.rwkz again; allow a terminal as "
                          "compressed output or input.")
FEEDBACK = _options(
    click.option("-v", "--verbose", is_flag=True,
                 help="Report size, ratio, bits per byte and speed for each file."),
    click.option("-q", "--quiet", is_flag=True, help="No warnings and no progress bar."),
)
def _size(value: str, check=lambda size: size) -> int:
    """A SIZE option's bytes ('4M', '512K'; blocks.parse_size), through `check`; a bad one is
    click's one-line usage error."""
    from rwkvzip.coding import blocks

    try:
        return check(blocks.parse_size(value))
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _block_size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    from rwkvzip.coding import blocks

    return None if value is None else _size(value, lambda n: blocks.block_size_for(0, n))


def _dictionary_size(ctx: click.Context, param: click.Parameter, value: str) -> int:
    from rwkvzip.priors import MAX_DICTIONARY

    def at_most(size: int) -> int:
        if size > MAX_DICTIONARY:
            raise ValueError(f"at most {MAX_DICTIONARY // 1024}K")
        return size

    return _size(value, at_most)


THREADS = click.option("-T", "--threads", type=click.IntRange(min=0), default=1,
                       show_default=True, metavar="N",
                       help="Code independent blocks on N cores (0: one per core); the "
                            "output depends on the block size, never on N.")
BLOCKS = click.option("--block-size", metavar="SIZE", callback=_block_size,
                      help="Cut the input into independent blocks of SIZE bytes (e.g. 4M; "
                           "default with -T other than 1: 16M; with -T 1: one block).")
SCHEDULER = click.option("--scheduler", metavar="ADDRESS",
                         help="Code the blocks on the workers of this Dask scheduler (e.g. "
                              "tcp://host:8786; pip install 'rwkvzip[dask]'); the output is "
                              "-T's for the same --block-size.")
PRIOR = click.option("-D", "--prior", metavar="FILE",
                     help="Start the network from this prior file (made by 'rwkvzip train'); "
                          "decompressing needs the same file.")
MODE = _options(
    click.option("-z", "--compress", "mode_z", is_flag=True, expose_value=False,
                 callback=_last_wins("mode", "compress"), help="Compress (the default)."),
    click.option("-d", "--decompress", "--uncompress", "mode_d", is_flag=True,
                 expose_value=False, callback=_last_wins("mode", "decompress"),
                 help="Decompress."),
    click.option("-t", "--test", "mode_t", is_flag=True, expose_value=False,
                 callback=_last_wins("mode", "test"),
                 help="Test: decode and check every CRC, write nothing."),
    click.option("-l", "--list", "mode_l", is_flag=True, expose_value=False,
                 callback=_last_wins("mode", "list"),
                 help="List sizes, ratio, bpb, frames, check and recipe (-lv: verify too)."),
)
FILES = click.argument("files", nargs=-1, metavar="[FILE]...")


def _run(mode: str, files, stdout=False, output=None, force=False, verbose=False, quiet=False,
         prior=None, threads=1, block_size=None, scheduler=None, **recipe_options) -> int:
    from rwkvzip import commands

    meta = click.get_current_context().meta
    options = commands.Options(
        stdout=stdout, output=output, keep=meta.get("keep", True), force=force,
        verbose=verbose, quiet=quiet, level=meta.get("level"), prior=prior, threads=threads,
        block_size=block_size, scheduler=scheduler,
        recipe_options=recipe_options)  # whatever RECIPE declares, passed to with_overrides
    return commands.run(meta.get("mode", mode), list(files), options)


@click.group(context_settings=CONTEXT, epilog=(
    "Short form, as gzip: rwkvzip [-d|-t|-l] [OPTIONS] [FILE]... "
    "(see 'rwkvzip -z --help'). FILE '-' or none: standard input. "
    "Exit status: 0 ok, 1 error, 2 warning (a file skipped)."))
@click.version_option(__version__, "-V", "--version", prog_name="rwkvzip")
def cli() -> None:
    """Lossless compression: a pre-trained Gated DeltaNet (the default, -6) mixed with
    context models predicts each byte for a range coder."""


@cli.command(context_settings=CONTEXT)
@FILES
@OUTPUT
@FORCE
@FEEDBACK
@LEVEL
@PRIOR
@THREADS
@SCHEDULER
@BLOCKS
@RECIPE
def compress(files, **options) -> int:
    """Compress each FILE (or stdin) to FILE.rwkz (or stdout)."""
    return _run("compress", files, **options)


@cli.command(context_settings=CONTEXT)
@FILES
@OUTPUT
@FORCE
@FEEDBACK
@PRIOR
@THREADS
@SCHEDULER
def decompress(files, **options) -> int:
    """Decompress each FILE.rwkz (or stdin) to FILE (or stdout)."""
    return _run("decompress", files, **options)


@cli.command(context_settings=CONTEXT)
@FILES
@FORCE
@FEEDBACK
@PRIOR
@THREADS
@SCHEDULER
def test(files, **options) -> int:
    """Decode each FILE and check it; writes nothing."""
    return _run("test", files, **options)


@cli.command(context_settings=CONTEXT)
@FILES
@FORCE
@FEEDBACK
@PRIOR
def info(files, **options) -> int:
    """List sizes, ratio, bits per byte, frames, check and recipe of each FILE, from its
    headers (no decoding; with -v every frame is decoded and its CRC checked too)."""
    return _run("list", files, **options)


@cli.command(context_settings=CONTEXT)
@click.argument("samples", nargs=-1, required=True, metavar="SAMPLE...")
@click.option("-o", "--output", required=True, metavar="FILE", help="The prior file to write.")
@click.option("--from-scratch", is_flag=True,
              help="Start from the level's seeded weights, not its shipped prior.")
@click.option("--time", "seconds", type=float, default=600.0, show_default=True,
              help="Seconds of training at most.")
@click.option("--epochs", type=int, default=20, show_default=True,
              help="Passes over the samples at most.")
@click.option("--dict-size", "dictionary_size", metavar="SIZE", default="32K",
              show_default=True, callback=_dictionary_size,
              help="Bytes of the samples kept in the prior as a dictionary that every file "
                   "learns first (helps small files most; costs start-up time; 0: none).")
@FORCE
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no report.")
@LEVEL
def train(samples, output, from_scratch, seconds, epochs, dictionary_size, force,
          quiet) -> int:
    """Train a prior on SAMPLE files or directories of the kind you compress (like
    'zstd --train'), starting from the level's shipped prior; then compress and decompress
    with 'rwkvzip -D FILE'. About a tenth of the samples is held out to measure it."""
    from rwkvzip import commands

    level = click.get_current_context().meta.get("level")
    return commands.train(list(samples), output, level=level, from_scratch=from_scratch,
                          seconds=seconds, epochs=epochs, dictionary_size=dictionary_size,
                          force=force, quiet=quiet)


@cli.command(context_settings=CONTEXT)
@click.option("-v", "--verbose", is_flag=True, help="One line per golden vector.")
def selftest(verbose: bool) -> int:
    """Check this machine writes and reads the same files as everyone else (golden vectors
    shipped with rwkvzip, one per preset card and architecture)."""
    from rwkvzip import selftest as golden

    return EXIT_OK if golden.run(verbose) else EXIT_ERROR


@click.command(context_settings=CONTEXT)
@FILES
@MODE
@OUTPUT
@FORCE
@FEEDBACK
@LEVEL
@PRIOR
@THREADS
@SCHEDULER
@BLOCKS
@RECIPE
@click.version_option(__version__, "-V", "--version", prog_name="rwkvzip")
def short_form(files, **options) -> int:
    """Compress each FILE to FILE.rwkz as gzip does (-d: decompress FILE.rwkz to FILE,
    -t: test, -l: list); standard input to standard output without FILE or with '-'.
    Inputs are kept unless --rm. Also: rwkvzip compress|decompress|test|info|selftest."""
    return _run("compress", files, **options)


def _command_for(argv: list[str]) -> click.Command:
    """A subcommand name (or -h/-V) first selects the group; anything else is gzip's form."""
    if argv and (argv[0] in cli.commands or argv[0] in GROUP_ONLY_ARGS):
        return cli
    return short_form


# Signals that unwind like Ctrl-C, so partial outputs are removed (no SIGHUP on Windows).
STOP_SIGNALS = [s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None))
                if s is not None]


def _terminate(signum, frame):
    """Unwind like Ctrl-C; later signals are ignored so the clean-up cannot be cut short."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Entry point: every error a user can meet is one line on stderr; exit status 0 ok,
    1 error (click's usage errors too), 2 warning."""
    from rwkvzip.coding.container import FormatError
    from rwkvzip.net.params import ModelFileError

    for sig in STOP_SIGNALS:
        signal.signal(sig, _terminate)
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        status = _command_for(argv).main(args=argv, prog_name="rwkvzip", standalone_mode=False)
        return status if isinstance(status, int) else EXIT_OK
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.UsageError as exc:
        click.echo(f"rwkvzip: {exc.format_message()} (see 'rwkvzip -h')", err=True)
        return EXIT_ERROR
    except click.ClickException as exc:
        click.echo(f"rwkvzip: {exc.format_message()}", err=True)
        return EXIT_ERROR
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("rwkvzip: interrupted", err=True)
        return EXIT_ERROR
    except (UserError, FormatError, ModelFileError) as exc:
        click.echo(f"rwkvzip: {exc}", err=True)
        return EXIT_ERROR
    except BrokenPipeError:  # the reader went away; say nothing more to it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except OSError as exc:
        name = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"rwkvzip: {name}{exc.strerror or exc}", err=True)
        return EXIT_ERROR


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
