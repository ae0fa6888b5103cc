"""Certificate files: modes from creation on, atomic replacement, commit order, expiry read-back."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from certs.files import atomic_write, read_not_after, write_bundle, write_pem_files
from certs.issue import CertKeyPair, certs_to_pem, issue_ca, issue_serving, load_certs_pem
from tests.certs.support import NAMESPACE, SERVICE


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize("mask", [0o000, 0o022, 0o077])
def test_modes_do_not_depend_on_the_umask(out_dir: Path, ca: CertKeyPair, leaf: CertKeyPair, mask: int) -> None:
    old = os.umask(mask)
    try:
        paths = write_bundle(out_dir, ca, leaf)
    finally:
        os.umask(old)
    assert mode(paths.key) == 0o600
    assert mode(paths.cert) == 0o644
    assert mode(paths.ca) == 0o644
    assert paths.cert.read_bytes() == leaf.cert_pem()
    assert paths.key.read_bytes() == leaf.key_pem()
    assert paths.ca.read_bytes() == ca.cert_pem()


def test_files_are_replaced_in_commit_order_by_complete_files_with_their_final_mode(
    out_dir: Path, ca: CertKeyPair, leaf: CertKeyPair, monkeypatch: pytest.MonkeyPatch, umask: None
) -> None:
    """At the moment a file becomes visible it is complete and has its final mode; it was created with it."""
    created: dict[str, int] = {}
    replaced: list[tuple[str, int, bytes]] = []
    real_open, real_replace = os.open, os.replace

    def spy_open(path: Any, flags: int, mode: int = 0o777, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_CREAT:
            assert flags & os.O_EXCL  # never reuses (or follows) an existing file
            created[Path(path).name] = mode
        return real_open(path, flags, mode, *args, **kwargs)

    def spy_replace(src: Any, dst: Any) -> None:
        replaced.append((Path(dst).name, stat.S_IMODE(os.stat(src).st_mode), Path(src).read_bytes()))
        real_replace(src, dst)

    monkeypatch.setattr(os, "open", spy_open)
    monkeypatch.setattr(os, "replace", spy_replace)
    write_bundle(out_dir, ca, leaf)
    monkeypatch.undo()

    assert [name for name, _, _ in replaced] == ["ca.crt", "tls.key", "tls.crt"]
    assert replaced[1] == ("tls.key", 0o600, leaf.key_pem())
    assert replaced[2] == ("tls.crt", 0o644, leaf.cert_pem())
    key_tmp = [name for name in created if name.startswith(".tls.key.")]
    assert len(key_tmp) == 1
    assert created[key_tmp[0]] == 0o600  # never wider, even with umask 0
    assert sorted(p.name for p in out_dir.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]


def test_replacement_is_a_new_file_so_open_readers_keep_the_old_content(
    out_dir: Path, ca: CertKeyPair, leaf: CertKeyPair
) -> None:
    paths = write_bundle(out_dir, ca, leaf)
    new_ca = issue_ca()
    new_leaf = issue_serving(new_ca, SERVICE, NAMESPACE)
    with paths.cert.open("rb") as reader:
        old_inode = os.fstat(reader.fileno()).st_ino
        write_bundle(out_dir, new_ca, new_leaf)
        assert reader.read() == leaf.cert_pem()
    assert paths.cert.stat().st_ino != old_inode
    assert paths.cert.read_bytes() == new_leaf.cert_pem()
    assert paths.key.read_bytes() == new_leaf.key_pem()
    assert sorted(p.name for p in out_dir.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    out_dir: Path, ca: CertKeyPair, leaf: CertKeyPair, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = write_bundle(out_dir, ca, leaf)

    def fail(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="No space"):
        atomic_write(paths.key, b"new", 0o600)
    monkeypatch.undo()
    assert paths.key.read_bytes() == leaf.key_pem()
    assert sorted(p.name for p in out_dir.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]


def test_unchanged_files_are_left_alone_and_a_wide_key_is_narrowed(
    out_dir: Path, ca: CertKeyPair, leaf: CertKeyPair
) -> None:
    paths = write_bundle(out_dir, ca, leaf)
    inodes = {p: p.stat().st_ino for p in (paths.ca, paths.cert, paths.key)}
    write_bundle(out_dir, ca, leaf)
    assert {p: p.stat().st_ino for p in inodes} == inodes
    paths.key.chmod(0o644)
    assert atomic_write(paths.key, leaf.key_pem(), 0o600)
    assert mode(paths.key) == 0o600


def test_ca_file_can_hold_several_cas(out_dir: Path, ca: CertKeyPair, leaf: CertKeyPair) -> None:
    other = issue_ca()
    paths = write_bundle(out_dir, [other.cert, ca.cert], leaf)
    assert load_certs_pem(paths.ca.read_bytes()) == [other.cert, ca.cert]
    again = write_pem_files(out_dir, certs_to_pem([ca.cert]), leaf.cert_pem(), leaf.key_pem())
    assert load_certs_pem(again.ca.read_bytes()) == [ca.cert]


def test_read_not_after_reads_the_served_certificate(out_dir: Path, ca: CertKeyPair, leaf: CertKeyPair) -> None:
    paths = write_bundle(out_dir, ca, leaf)
    assert read_not_after(paths.cert) == leaf.not_after
    assert read_not_after(paths.cert) != ca.not_after  # the first certificate, not the CA
    paths.cert.write_bytes(b"not a certificate")
    with pytest.raises(ValueError):
        read_not_after(paths.cert)
