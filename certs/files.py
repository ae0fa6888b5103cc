"""Write the certificate files a server reads, so that a reloading server never reads a broken state.

Each file is written to a temporary file in the same directory (created with its final mode, so the key is never
readable by others, not even briefly), flushed to disk, then renamed over the old one: a reader sees the old or the
new file, never a partial one.

Order: `ca.crt`, then `tls.key`, then `tls.crt`. Clients that trust `ca.crt` learn the new CA before any server
presents a certificate signed by it, and `tls.crt` is the commit point: once it is new, `tls.key` already is. A
reader that catches the moment in between sees the new key with the old certificate, which `ssl.load_cert_chain`
rejects ("key values mismatch"); the reloading context then keeps its last good pair and retries when the files
change again (`certs.reload`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cryptography import x509

from certs.issue import CertKeyPair, certs_to_pem

CA_FILE = "ca.crt"
CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
# A client certificate from the same CA, for kube-apiserver (`certs --client-cert`, `serve --client-ca`).
CLIENT_CERT_FILE = "client.crt"
CLIENT_KEY_FILE = "client.key"

KEY_MODE = 0o600
CERT_MODE = 0o644  # certificates are public; other users (e.g. a sidecar) may read them


@dataclass(frozen=True)
class BundlePaths:
    """Where a bundle was written: the server needs `cert` and `key`, the webhook configuration `ca`."""

    ca: Path
    cert: Path
    key: Path


def write_bundle(
    out_dir: Path, ca: CertKeyPair | x509.Certificate | list[x509.Certificate], leaf: CertKeyPair
) -> BundlePaths:
    """Write `ca.crt`, `tls.crt` and `tls.key` into `out_dir` (created if missing) atomically, in commit order.

    `ca` may be several certificates: during a CA rotation `ca.crt` holds the old and the new CA. The CA key is
    never written here; the server does not need it.
    """
    if isinstance(ca, CertKeyPair):
        cas = [ca.cert]
    elif isinstance(ca, x509.Certificate):
        cas = [ca]
    else:
        cas = list(ca)
    return write_pem_files(out_dir, certs_to_pem(cas), leaf.cert_pem(), leaf.key_pem())


def write_pem_files(out_dir: Path, ca_pem: bytes, cert_pem: bytes, key_pem: bytes) -> BundlePaths:
    """`write_bundle` for PEM bytes as they come from a Secret; files whose content is unchanged are not touched.

    Skipping identical files keeps their inode and mtime, so a reloading server does not rebuild its context on
    every periodic rotation check.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = BundlePaths(ca=out_dir / CA_FILE, cert=out_dir / CERT_FILE, key=out_dir / KEY_FILE)
    atomic_write(paths.ca, ca_pem, CERT_MODE)
    atomic_write(paths.key, key_pem, KEY_MODE)
    atomic_write(paths.cert, cert_pem, CERT_MODE)
    return paths


def atomic_write(path: Path, data: bytes, mode: int) -> bool:
    """Replace `path` with `data` via a same-directory temporary file and `os.replace`; False if already equal.

    The temporary file is created with O_EXCL and `mode` (a pre-existing file or symlink at that name is never
    followed), and fsynced with its directory so a crash leaves the old or the new file, not an empty one.
    """
    with contextlib.suppress(OSError):
        if path.read_bytes() == data and (path.stat().st_mode & 0o777) == mode:
            return False
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        try:
            os.fchmod(fd, mode)  # the umask may have narrowed it; the mode is already at most `mode`
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(path.parent)
    return True


def read_not_after(cert_path: Path) -> datetime:
    """The expiry (UTC) of the first certificate in a PEM file: the served certificate for `tls.crt`."""
    cert = x509.load_pem_x509_certificates(cert_path.read_bytes())
    if not cert:
        raise ValueError(f"{cert_path}: no PEM certificate found")
    return cert[0].not_valid_after_utc


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
