"""Command line (click): argument handling only; the work is in api.py and fileio.py."""

from __future__ import annotations

import signal
import sys

import click

from rwkvzip import __version__
from rwkvzip.fileio import (
    UserError,
    atomic_output,
    compressed_name,
    decompressed_name,
    open_input,
)

EXIT_OK, EXIT_ERROR = 0, 1


def _recipe_from_options(**options):
    from rwkvzip.recipe import RecipeError, default_recipe, with_overrides

    try:
        return with_overrides(default_recipe(), **options)
    except RecipeError as exc:
        raise UserError(str(exc)) from None


def _output_path(file, output, stdout, name_for):
    if stdout:
        return None
    if output is not None:
        return None if output == "-" else output
    if file is None or file == "-":
        return None
    return name_for(file)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="rwkvzip")
def cli() -> None:
    """Lossless compression by a byte-level RWKV-7 that learns while it codes."""


@cli.command()
@click.argument("file", required=False)
@click.option("-o", "--output", help="Write to this file ('-' for stdout).")
@click.option("-c", "--stdout", is_flag=True, help="Write to standard output.")
@click.option("-f", "--force", is_flag=True, help="Overwrite; allow a terminal as output.")
@click.option("--arch", type=click.Choice(["rwkv7", "gdn"]),
              help="Predictor architecture (RWKV-7 or Gated DeltaNet).")
@click.option("--hidden", type=int, help="Hidden size (RWKV-7: a multiple of 64).")
@click.option("--layers", type=int, help="Number of layers.")
@click.option("--seed", type=int, help="Seed of the initial weights.")
@click.option("--optimizer", type=click.Choice(["sgd", "adam"]), help="Online optimizer.")
@click.option("--lr", type=float, help="Learning rate.")
@click.option("--bptt", type=int,
              help="0: train the output layer only; 1: exact one-step gradient; "
                   "N >= 2: truncated BPTT over N-byte segments.")
@click.option("--scope", help="Parameter groups trained, joined by '+': embed, norm, attn, "
                              "ffn, head, bias (or 'all').")
@click.option("--clip", type=float, help="Per-element gradient clip (0: off).")
def compress(file, output, stdout, force, **recipe_options) -> None:
    """Compress FILE (or stdin) to FILE.rwkz (or stdout)."""
    from rwkvzip.api import compress_stream

    recipe = _recipe_from_options(**recipe_options)
    out = _output_path(file, output, stdout, compressed_name)
    if out is None and sys.stdout.isatty() and not force:
        raise UserError("refusing to write compressed data to a terminal (use -f to force)")
    with open_input(file) as fin, atomic_output(out, force, like=_real(file)) as fout:
        compress_stream(fin, fout, recipe)


@cli.command()
@click.argument("file", required=False)
@click.option("-o", "--output", help="Write to this file ('-' for stdout).")
@click.option("-c", "--stdout", is_flag=True, help="Write to standard output.")
@click.option("-f", "--force", is_flag=True, help="Overwrite; allow a terminal as input.")
def decompress(file, output, stdout, force) -> None:
    """Decompress FILE.rwkz (or stdin) to FILE (or stdout)."""
    from rwkvzip.api import decompress_stream

    out = _output_path(file, output, stdout, decompressed_name)
    if _real(file) is None and sys.stdin.isatty() and not force:
        raise UserError("refusing to read compressed data from a terminal (use -f to force)")
    with open_input(file) as fin, atomic_output(out, force, like=_real(file)) as fout:
        decompress_stream(fin, fout)


def _real(file):
    return None if file is None or file == "-" else file


def _terminate(signum, frame):  # SIGTERM unwinds like Ctrl-C, so partial outputs are removed
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Entry point: every error a user can meet is one line on stderr and exit status 1."""
    from rwkvzip.container import FormatError
    from rwkvzip.params import ModelFileError

    signal.signal(signal.SIGTERM, _terminate)
    try:
        cli.main(args=argv, prog_name="rwkvzip", standalone_mode=False)
        return EXIT_OK
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return EXIT_ERROR
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("rwkvzip: interrupted", err=True)
        return EXIT_ERROR
    except (UserError, FormatError, ModelFileError) as exc:
        click.echo(f"rwkvzip: {exc}", err=True)
        return EXIT_ERROR
    except BrokenPipeError:
        return EXIT_ERROR
    except OSError as exc:
        name = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"rwkvzip: {name}{exc.strerror or exc}", err=True)
        return EXIT_ERROR


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
