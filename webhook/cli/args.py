"""What every subcommand's parser shares: its exit codes in the epilog, and `--cluster MANIFEST...`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

EXIT_ALLOWED, EXIT_DENIED, EXIT_BAD_INPUT = 0, 1, 2


def exit_codes(codes: tuple[str, ...], bad: str) -> str:
    """The epilog of a subcommand: its exit codes, one a line, 2 (bad input or usage) last."""
    return "\n".join(["exit codes:", *(f"  {c}" for c in codes), f"  2  {bad}"])


def subcommand(
    sub: Any, name: str, summary: str, description: str, *codes: str, bad: str = "bad input or usage"
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=description,
        epilog=exit_codes(codes, bad),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def cluster_files(parser: argparse.ArgumentParser, what: str) -> None:
    """`--cluster MANIFEST...`, the same for every command: every file up to the next option, and it may repeat."""
    parser.add_argument(
        "--cluster",
        nargs="+",
        action="extend",
        type=Path,
        default=[],
        metavar="MANIFEST",
        help=f"{what}; every file up to the next option belongs to it, and it may repeat",
    )


def positive_seconds(text: str) -> float:
    """A timeout given on the command line: a finite number of seconds above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above zero: {text!r}")
    return value
