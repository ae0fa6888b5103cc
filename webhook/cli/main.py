"""The `storage-affinity-webhook` command: serve, rotate-certs, review, test, audit, certs.

Each subcommand's help gives its exit codes; 2 is always bad input or usage (argparse's own).

One module a command: servecmd.py, certscmd.py (rotate-certs, certs), reviewcmd.py, suites.py (test), auditcmd.py;
each adds its parser and runs it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from webhook.cli import auditcmd, certscmd, reviewcmd, servecmd, suites
from webhook.cli.args import EXIT_BAD_INPUT

__all__ = ["EXIT_BAD_INPUT", "kubectl_plugin", "main"]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("storage-affinity-webhook")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _parser(prog: str = "storage-affinity-webhook") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Admission webhook that places storage-bound pods where their storage can be used.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    servecmd.add_parser(sub)
    certscmd.add_rotate_parser(sub)
    reviewcmd.add_parser(sub)
    suites.add_parser(sub)
    auditcmd.add_parser(sub)
    certscmd.add_certs_parser(sub)
    return parser


def main(argv: list[str] | None = None, prog: str = "storage-affinity-webhook") -> int:
    args = _parser(prog).parse_args(argv)
    if args.command == "serve":
        return servecmd.run(args)
    try:
        if args.command == "review":
            return reviewcmd.run(args)
        if args.command == "test":
            return suites.run(args)
        if args.command == "audit":
            return auditcmd.run(args)
        if args.command == "rotate-certs":
            return certscmd.rotate(args)
        return certscmd.issue(args)
    except BrokenPipeError:
        return _reader_gone()


def kubectl_plugin() -> int:
    """`kubectl storage-affinity ...`: kubectl runs `kubectl-storage_affinity` from PATH (its plugin naming for a
    dash); the same commands, named as the user typed them."""
    return main(prog="kubectl storage-affinity")


def _reader_gone() -> int:
    """The reader of our output went away (`audit | head`): stop quietly, as a shell tool killed by SIGPIPE does,
    with its exit status. stdout is pointed at /dev/null so that the interpreter's last flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE
