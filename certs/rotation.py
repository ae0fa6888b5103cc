"""Certificate mode `self`: the webhook issues, stores, renews and publishes its own CA and serving certificate.

The Secret is the single source of truth shared by all replicas; every replica runs the same reconcile loop:

1. read the Secret; if it is missing, empty, broken or due for renewal, issue what is needed and write it back
   with optimistic concurrency (create: 409 AlreadyExists, patch with `resourceVersion`: 409 Conflict). The loser of
   a race re-reads and adopts the winner's certificate, so replicas never fight and never serve different CAs;
2. put the Secret's CA bundle into every webhook of the named webhook configurations (patched only when
   different, also with `resourceVersion`);
3. only then write the files the server reads (`certs.files`), so a replica never serves a certificate whose CA the
   apiserver does not trust yet.

A CA rotation keeps the previous CA in `ca.crt` and in the caBundle until it expires, so certificates signed by
either verify during the overlap. A generation counter (Secret annotation, copied onto the webhook configurations)
stops a replica holding an old Secret snapshot from putting an older bundle back.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from certs.files import write_pem_files
from certs.issue import (
    CA_VALIDITY,
    CLUSTER_DOMAIN,
    LEAF_VALIDITY,
    CertKeyPair,
    certs_to_pem,
    issue_ca,
    issue_serving,
    load_certs_pem,
    load_key_pem,
    load_pair,
    serving_sans,
)

log = logging.getLogger(__name__)

Json = dict[str, Any]

TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"
CA_CERT = "ca.crt"  # current CA first, then older CAs that are still valid
CA_KEY = "ca.key"  # key of the current CA only
SECRET_TYPE = "kubernetes.io/tls"  # noqa: S105 - a Secret type, not a password
GENERATION = "storage-affinity.io/cert-generation"
BUNDLE_SOURCE = "storage-affinity.io/ca-bundle-source"  # "<secret uid>/<generation>" on webhook configurations
MANAGED_BY = {"app.kubernetes.io/managed-by": "storage-affinity-webhook"}
MUTATING = "mutatingwebhookconfigurations"
VALIDATING = "validatingwebhookconfigurations"
MAX_ATTEMPTS = 5
MAX_TRUSTED = 3  # current CA plus at most two older ones still valid


class RotationError(RuntimeError):
    """Reconciling did not converge (e.g. conflicts on every attempt) or the API refused a write."""


class _StaleSnapshot(Exception):
    """The webhook configurations already carry a newer generation than the Secret this replica read."""


@dataclass(frozen=True)
class RotationSettings:
    """What to manage. `local=False`: in a cluster nothing connects through localhost, so it is not a SAN."""

    namespace: str
    secret_name: str
    service: str
    mutating_webhook: str | None = None
    validating_webhook: str | None = None
    out_dir: Path | None = None
    extra_dns: tuple[str, ...] = ()
    extra_ips: tuple[str, ...] = ()
    local: bool = False
    cluster_domain: str = CLUSTER_DOMAIN
    ca_validity: timedelta = CA_VALIDITY
    leaf_validity: timedelta = LEAF_VALIDITY
    renew_fraction: float = 1 / 3  # renew when less than this share of a certificate's lifetime remains


@dataclass(frozen=True)
class StoredBundle:
    """The Secret's certificates, parsed and checked to belong together."""

    ca: CertKeyPair
    trusted: tuple[x509.Certificate, ...]
    leaf: CertKeyPair
    generation: int = 0
    uid: str | None = None
    resource_version: str | None = None

    @property
    def not_after(self) -> datetime:
        return self.leaf.not_after


def needs_renewal(cert: x509.Certificate, now: datetime, fraction: float) -> bool:
    """True when less than `fraction` of the certificate's lifetime is left (or it is not valid yet/anymore)."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return now < start or end - now < (end - start) * fraction


def parse_secret(secret: Json | None) -> tuple[StoredBundle | None, str]:
    """The bundle stored in `secret`, or None with the reason it cannot be used as is."""
    if secret is None:
        return None, "the Secret does not exist"
    data = secret.get("data") or {}
    missing = [k for k in (TLS_CERT, TLS_KEY, CA_CERT, CA_KEY) if not data.get(k)]
    if missing:
        return None, f"the Secret lacks {', '.join(missing)}"
    try:
        raw = {k: base64.b64decode(data[k], validate=True) for k in (TLS_CERT, TLS_KEY, CA_CERT, CA_KEY)}
        leaf = load_pair(raw[TLS_CERT], raw[TLS_KEY])
        trusted = tuple(load_certs_pem(raw[CA_CERT]))
        ca = CertKeyPair(trusted[0], load_key_pem(raw[CA_KEY]))
        if ca.cert.public_key() != ca.key.public_key():
            return None, "ca.key does not belong to the first certificate of ca.crt"
    except ValueError as exc:
        return None, f"the Secret holds unusable data: {exc}"
    meta = secret.get("metadata") or {}
    return StoredBundle(ca, trusted, leaf, generation(secret), meta.get("uid"), meta.get("resourceVersion")), ""


def generation(secret: Json | None) -> int:
    """The Secret's write counter (0 when absent or garbled), readable even when its certificates are not."""
    value = (((secret or {}).get("metadata") or {}).get("annotations") or {}).get(GENERATION, "0")
    return int(value) if str(value).isdigit() else 0


class KubeApi:
    """The few API calls rotation needs, on plain JSON (no client models: nothing lost in conversion)."""

    def __init__(self, api_client: client.ApiClient, *, timeout: float = 10.0) -> None:
        self.core = client.CoreV1Api(api_client)
        self.admission = client.AdmissionregistrationV1Api(api_client)
        self.timeout = timeout

    def get_secret(self, namespace: str, name: str) -> Json | None:
        return self._call_or_none(self.core.read_namespaced_secret, name, namespace)

    def create_secret(self, namespace: str, body: Json) -> Json:
        return self._call(self.core.create_namespaced_secret, namespace, body)

    def patch_secret(self, namespace: str, name: str, patch: Json) -> Json:
        return self._call(self.core.patch_namespaced_secret, name, namespace, patch, merge=True)

    def get_webhook_configuration(self, kind: str, name: str) -> Json | None:
        read = (
            self.admission.read_mutating_webhook_configuration
            if kind == MUTATING
            else self.admission.read_validating_webhook_configuration
        )
        return self._call_or_none(read, name)

    def patch_webhook_configuration(self, kind: str, name: str, patch: Json) -> Json:
        method = (
            self.admission.patch_mutating_webhook_configuration
            if kind == MUTATING
            else self.admission.patch_validating_webhook_configuration
        )
        return self._call(method, name, patch, merge=True)

    def _call(self, method: Callable[..., Any], *args: Any, merge: bool = False) -> Json:
        # JSON merge patch: replaces lists as a whole (the webhooks list is sent complete) and honours a
        # `metadata.resourceVersion` in the patch as a precondition, which makes patches compare-and-swap.
        extra: Json = {"_content_type": "application/merge-patch+json"} if merge else {}
        response = method(*args, _preload_content=False, _request_timeout=self.timeout, **extra)
        result: Json = json.loads(response.data)
        return result

    def _call_or_none(self, method: Callable[..., Any], *args: Any) -> Json | None:
        try:
            return self._call(method, *args)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise


@dataclass
class CertificateRotator:
    """Reconciles the Secret, the webhook configurations' caBundle and the server's files; see the module doc.

    `issue_ca_fn` and `issue_serving_fn` exist so tests can hold two replicas at the same point of a race.
    """

    settings: RotationSettings
    api: KubeApi
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    issue_ca_fn: Callable[..., CertKeyPair] = issue_ca
    issue_serving_fn: Callable[..., CertKeyPair] = issue_serving
    bundle: StoredBundle | None = field(default=None, init=False)

    @property
    def not_after(self) -> datetime | None:
        """Expiry of the serving certificate this replica last published (None before the first success)."""
        return self.bundle.not_after if self.bundle else None

    @property
    def ca_not_after(self) -> datetime | None:
        return self.bundle.ca.not_after if self.bundle else None

    def reconcile(self) -> StoredBundle:
        """One pass: Secret, then caBundle, then files. Raises RotationError or ApiException on failure."""
        s = self.settings
        for _ in range(MAX_ATTEMPTS):
            secret = self.api.get_secret(s.namespace, s.secret_name)
            stored, reason = parse_secret(secret)
            now = self.clock()
            planned = self._plan(stored, reason, now, generation(secret) + 1)
            if planned is None:
                assert stored is not None
                bundle = stored
            else:
                written = self._write_secret(secret, planned)
                if written is None:
                    continue  # someone else wrote first: re-read and adopt (or renew what they wrote)
                parsed, problem = parse_secret(written)
                if parsed is None:
                    raise RotationError(f"the Secret as written does not parse: {problem}")
                bundle = parsed
            try:
                self._publish_ca_bundle(bundle)
            except _StaleSnapshot:
                log.info("webhook configurations are ahead of the Secret this replica read; re-reading")
                continue
            if s.out_dir is not None:
                write_pem_files(s.out_dir, certs_to_pem(bundle.trusted), bundle.leaf.cert_pem(), bundle.leaf.key_pem())
            self.bundle = bundle
            return bundle
        raise RotationError(f"no consistent certificate state after {MAX_ATTEMPTS} attempts (conflicts)")

    def run(self, stop: threading.Event, interval: float = 600.0, retry: float = 15.0) -> None:
        """Reconcile until `stop` is set: every `interval` seconds (±10 %), after a failure every `retry` seconds."""
        while not stop.is_set():
            try:
                self.reconcile()
                wait = interval * random.uniform(0.9, 1.1)  # jitter spreads the replicas' API calls
            except Exception:
                log.exception("certificate rotation failed; serving the current certificate and retrying")
                wait = retry
            stop.wait(wait)

    def _plan(self, stored: StoredBundle | None, reason: str, now: datetime, next_gen: int) -> StoredBundle | None:
        """The bundle to store instead of `stored`, or None when `stored` is fine as it is.

        `next_gen` continues the Secret's counter even when its content was unusable, so webhook configurations
        stamped with an earlier generation never look newer than the replacement.
        """
        s = self.settings
        if stored is None:
            log.info("issuing a new CA and serving certificate: %s", reason)
            ca = self._new_ca(now)
            return StoredBundle(ca, (ca.cert,), self._new_leaf(ca, now), next_gen)
        still_valid = tuple(c for c in stored.trusted if c.not_valid_after_utc > now)
        if needs_renewal(stored.ca.cert, now, s.renew_fraction):
            log.info("rotating the CA (valid until %s); the old one stays trusted", stored.ca.not_after.isoformat())
            ca = self._new_ca(now)
            trusted = (ca.cert, *(c for c in still_valid if c != ca.cert))[:MAX_TRUSTED]
            return StoredBundle(ca, trusted, self._new_leaf(ca, now), next_gen)
        leaf_reason = self._leaf_problem(stored, now)
        if leaf_reason:
            log.info("renewing the serving certificate: %s", leaf_reason)
            return StoredBundle(stored.ca, still_valid, self._new_leaf(stored.ca, now), next_gen)
        if still_valid != stored.trusted:
            return StoredBundle(stored.ca, still_valid, stored.leaf, next_gen)
        return None

    def _leaf_problem(self, stored: StoredBundle, now: datetime) -> str:
        s = self.settings
        leaf = stored.leaf.cert
        if needs_renewal(leaf, now, s.renew_fraction):
            return f"less than {s.renew_fraction:.0%} of its lifetime left (valid until {stored.not_after.isoformat()})"
        try:
            leaf.verify_directly_issued_by(stored.ca.cert)
        except (ValueError, TypeError, InvalidSignature):
            return "it is not signed by the current CA"
        want = serving_sans(s.service, s.namespace, **self._names())
        try:
            have = list(leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
        except x509.ExtensionNotFound:
            have = []
        if have != want:
            return "its names differ from the configured service names"
        return ""

    def _new_ca(self, now: datetime) -> CertKeyPair:
        return self.issue_ca_fn(validity=self.settings.ca_validity, now=now)

    def _new_leaf(self, ca: CertKeyPair, now: datetime) -> CertKeyPair:
        s = self.settings
        return self.issue_serving_fn(ca, s.service, s.namespace, **self._names(), validity=s.leaf_validity, now=now)

    def _names(self) -> dict[str, Any]:
        """The naming settings the leaf is issued with, and checked against."""
        s = self.settings
        return {
            "extra_dns": s.extra_dns,
            "extra_ips": s.extra_ips,
            "local": s.local,
            "cluster_domain": s.cluster_domain,
        }

    def _write_secret(self, secret: Json | None, bundle: StoredBundle) -> Json | None:
        """Create or compare-and-swap the Secret; None when another writer got there first."""
        s = self.settings
        data = {
            TLS_CERT: bundle.leaf.cert_pem(),
            TLS_KEY: bundle.leaf.key_pem(),
            CA_CERT: certs_to_pem(bundle.trusted),
            CA_KEY: bundle.ca.key_pem(),
        }
        encoded = {k: base64.b64encode(v).decode() for k, v in data.items()}
        meta: Json = {"labels": MANAGED_BY, "annotations": {GENERATION: str(bundle.generation)}}
        try:
            if secret is None:
                body = {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "type": SECRET_TYPE,
                    "metadata": {"name": s.secret_name, "namespace": s.namespace, **meta},
                    "data": encoded,
                }
                return self.api.create_secret(s.namespace, body)
            # No `type`: it is immutable, and a pre-created (e.g. Helm-owned, empty) Secret keeps its own.
            meta["resourceVersion"] = (secret.get("metadata") or {}).get("resourceVersion")
            return self.api.patch_secret(s.namespace, s.secret_name, {"metadata": meta, "data": encoded})
        except ApiException as exc:
            if exc.status == 409:
                log.info("Secret %s/%s was written by another replica; adopting it", s.namespace, s.secret_name)
                return None
            raise

    def _publish_ca_bundle(self, bundle: StoredBundle) -> None:
        s = self.settings
        ca_bundle = base64.b64encode(certs_to_pem(bundle.trusted)).decode()
        for kind, name in ((MUTATING, s.mutating_webhook), (VALIDATING, s.validating_webhook)):
            if name:
                self._publish_to(kind, name, ca_bundle, bundle)

    def _publish_to(self, kind: str, name: str, ca_bundle: str, bundle: StoredBundle) -> None:
        source = f"{bundle.uid}/{bundle.generation}"
        for _ in range(MAX_ATTEMPTS):
            config = self.api.get_webhook_configuration(kind, name)
            if config is None:
                log.warning("%s %s does not exist; its caBundle cannot be set", kind, name)
                return
            meta = config.get("metadata") or {}
            webhooks: list[Json] = config.get("webhooks") or []
            if all((w.get("clientConfig") or {}).get("caBundle") == ca_bundle for w in webhooks):
                return
            if _is_newer(str((meta.get("annotations") or {}).get(BUNDLE_SOURCE, "")), bundle):
                live = self.api.get_secret(self.settings.namespace, self.settings.secret_name) or {}
                if (live.get("metadata") or {}).get("resourceVersion") != bundle.resource_version:
                    raise _StaleSnapshot
                # The Secret is exactly what this replica read: the stamp is wrong (edited by hand), not newer.
            patched = [
                {**w, "clientConfig": {**(w.get("clientConfig") or {}), "caBundle": ca_bundle}} for w in webhooks
            ]
            patch = {
                "metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": {BUNDLE_SOURCE: source}},
                "webhooks": patched,
            }
            try:
                self.api.patch_webhook_configuration(kind, name, patch)
            except ApiException as exc:
                if exc.status == 409:
                    continue
                raise
            log.info(
                "set the caBundle of %s %s (%d webhooks) from Secret generation %s",
                kind,
                name,
                len(webhooks),
                bundle.generation,
            )
            return
        raise RotationError(f"could not update {kind} {name}: conflicts on every attempt")


def _is_newer(source: str, bundle: StoredBundle) -> bool:
    """Whether the caBundle was written from a later generation of the same Secret than `bundle`."""
    uid, _, generation = source.rpartition("/")
    return uid == str(bundle.uid) and generation.isdigit() and int(generation) > bundle.generation
