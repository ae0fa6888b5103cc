"""Reading the policy from a file (the CLI's `--policy`)."""

from __future__ import annotations

from pathlib import Path

from rules.policy import Policy, PolicyError, default_policy, parse_policy_text
from rules.safeload import unreadable
from webhook.files import read_text


def load_policy_file(path: Path | None, *, root: Path | None = None) -> tuple[Policy, str]:
    """The policy from a file (bare document or ConfigMap; a regular file under `root` when given,
    webhook/files.py), or the embedded default, with its source name."""
    if path is None:
        return default_policy(), "embedded default"
    try:
        text = read_text(path, root=root)
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError([("", unreadable(str(path), exc))]) from None
    return parse_policy_text(text, str(path)), str(path)
