"""The `certs` command's work, without argument parsing (that belongs to `webhook.cli.certscmd`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import TextIO

from certs.files import CERT_MODE, CLIENT_CERT_FILE, CLIENT_KEY_FILE, KEY_MODE, BundlePaths, atomic_write, write_bundle
from certs.issue import (
    CA_VALIDITY,
    CLUSTER_DOMAIN,
    LEAF_VALIDITY,
    CertKeyPair,
    issue_ca,
    issue_client,
    issue_serving,
    san_strings,
)


def issue_to_dir(
    service: str,
    namespace: str,
    out: Path,
    *,
    extra_dns: Sequence[str] = (),
    extra_ips: Sequence[str] = (),
    local: bool = True,
    cluster_domain: str = CLUSTER_DOMAIN,
    ca_validity: timedelta = CA_VALIDITY,
    leaf_validity: timedelta = LEAF_VALIDITY,
    client: str | None = None,
    stdout: TextIO | None = None,
) -> BundlePaths:
    """Issue a fresh CA and serving certificate into `out` and report what was written on `stdout`.

    The CA key is discarded, not written: a development CA that can sign nothing else cannot be misused, and a new
    run issues a new CA. With `client`, a client certificate of that name from the same CA is written too
    (`client.crt`, `client.key`): the one kube-apiserver presents when the server runs with `--client-ca ca.crt`.
    Raises ValueError for an invalid service, namespace, DNS name or IP (a usage error).
    """
    ca = issue_ca(validity=ca_validity)
    leaf = issue_serving(
        ca,
        service,
        namespace,
        extra_dns=extra_dns,
        extra_ips=extra_ips,
        local=local,
        cluster_domain=cluster_domain,
        validity=leaf_validity,
    )
    client_pair = issue_client(ca, client, validity=leaf_validity) if client is not None else None
    paths = write_bundle(out, ca, leaf)
    print_bundle(paths, ca, leaf, stdout or sys.stdout)
    if client_pair is not None:
        atomic_write(out / CLIENT_KEY_FILE, client_pair.key_pem(), KEY_MODE)
        atomic_write(out / CLIENT_CERT_FILE, client_pair.cert_pem(), CERT_MODE)
        print(
            f"wrote {out / CLIENT_CERT_FILE} and {out / CLIENT_KEY_FILE} (client certificate {client!r}, "
            f"valid until {client_pair.not_after:%Y-%m-%d %H:%M:%SZ})",
            file=stdout or sys.stdout,
        )
    return paths


def print_bundle(paths: BundlePaths, ca: CertKeyPair, leaf: CertKeyPair, stdout: TextIO) -> None:
    """Say what was written, and the SANs, so a wrong `--service`/`--namespace` is visible immediately."""
    print(f"wrote {paths.ca} (CA, valid until {ca.not_after:%Y-%m-%d %H:%M:%SZ})", file=stdout)
    print(f"wrote {paths.cert} (serving certificate, valid until {leaf.not_after:%Y-%m-%d %H:%M:%SZ})", file=stdout)
    print(f"wrote {paths.key} (private key, mode 0600)", file=stdout)
    print(f"SANs: {', '.join(san_strings(leaf.cert))}", file=stdout)
