"""Certificate mode `self` against kmock's Kubernetes emulator over real HTTP, with the official client."""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store
from kubernetes.client.exceptions import ApiException

from certs.issue import CertKeyPair, certs_to_pem, issue_ca, issue_serving, load_certs_pem, load_pair, san_strings
from certs.rotation import (
    BUNDLE_SOURCE,
    GENERATION,
    CertificateRotator,
    KubeApi,
    RotationError,
    RotationSettings,
    StoredBundle,
    needs_renewal,
)
from tests.certs.kube import (
    MUTATING,
    MUTATING_PLURAL,
    SECRETS,
    VALIDATING,
    VALIDATING_PLURAL,
    ApiServer,
    api_client,
    api_server,
)
from tests.support import dig

NS = "storage-affinity"
SECRET = "storage-affinity-webhook-tls"
SERVICE = "storage-affinity-webhook"
MWC = "storage-affinity-webhook"
VWC = "storage-affinity-webhook"
DNS = f"{SERVICE}.{NS}.svc"


@pytest.fixture
def apiserver() -> Iterator[tuple[ApiServer, str]]:
    with api_server() as (server, url):
        hook = {"clientConfig": {"service": {"namespace": NS, "name": SERVICE, "path": "/mutate"}}}
        server.seed(
            MUTATING,
            None,
            MWC,
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "webhooks": [
                    {"name": "pods.storage-affinity.io", **hook},
                    {"name": "jobs.storage-affinity.io", **hook},
                ],
            },
        )
        server.seed(
            VALIDATING,
            None,
            VWC,
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "webhooks": [{"name": "validate.storage-affinity.io", **hook}],
            },
        )
        yield server, url


def rotator(url: str, out_dir: Path | None, **kwargs: Any) -> CertificateRotator:
    settings_kw = {k: kwargs.pop(k) for k in list(kwargs) if k in RotationSettings.__dataclass_fields__}
    settings = RotationSettings(
        namespace=NS,
        secret_name=SECRET,
        service=SERVICE,
        mutating_webhook=MWC,
        validating_webhook=VWC,
        out_dir=out_dir,
        **settings_kw,
    )
    return CertificateRotator(settings, KubeApi(api_client(url)), **kwargs)


def secret_files(server: ApiServer) -> dict[str, bytes]:
    secret = server.stored(SECRETS, NS, SECRET)
    assert secret is not None
    return {k: base64.b64decode(v) for k, v in secret["data"].items()}


def ca_bundles(server: ApiServer) -> list[bytes]:
    """The caBundle of every webhook of both configurations."""
    result = []
    for resource, name in ((MUTATING, MWC), (VALIDATING, VWC)):
        config = server.stored(resource, None, name)
        assert config is not None
        result += [base64.b64decode(w["clientConfig"].get("caBundle", "")) for w in config["webhooks"]]
    return result


def verifies(trusted: list[x509.Certificate], leaf: x509.Certificate, at: datetime | None = None) -> bool:
    builder = PolicyBuilder().store(Store(trusted))
    if at is not None:
        builder = builder.time(at)
    try:
        builder.build_server_verifier(x509.DNSName(DNS)).verify(leaf, [])
    except Exception:
        return False
    return True


def seed(server: ApiServer, ca: CertKeyPair, leaf: CertKeyPair, trusted: list[x509.Certificate], gen: int = 1) -> None:
    data = {
        "tls.crt": leaf.cert_pem(),
        "tls.key": leaf.key_pem(),
        "ca.crt": certs_to_pem(trusted),
        "ca.key": ca.key_pem(),
    }
    seed_secret(server, data, gen)


def seed_secret(server: ApiServer, data: dict[str, bytes], gen: int) -> None:
    """The webhook's TLS Secret holding `data`, written by generation `gen` of the rotator."""
    server.seed(
        SECRETS,
        NS,
        SECRET,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {"annotations": {GENERATION: str(gen)}},
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
        },
    )


def aged(days_ago: float, *, ca_days: float = 365, leaf_days: float = 90) -> tuple[CertKeyPair, CertKeyPair]:
    """A CA and serving certificate issued `days_ago` days ago with the given lifetimes."""
    then = datetime.now(UTC) - timedelta(days=days_ago)
    ca = issue_ca(validity=timedelta(days=ca_days), now=then)
    return ca, issue_serving(ca, SERVICE, NS, local=False, validity=timedelta(days=leaf_days), now=then)


def check_consistent(server: ApiServer, out_dir: Path, bundle: StoredBundle) -> dict[str, bytes]:
    """The Secret, the caBundles and the files agree, and the served certificate verifies against the caBundle."""
    files = secret_files(server)
    assert files["tls.crt"] == bundle.leaf.cert_pem()
    assert (out_dir / "tls.crt").read_bytes() == files["tls.crt"]
    assert (out_dir / "tls.key").read_bytes() == files["tls.key"]
    assert (out_dir / "ca.crt").read_bytes() == files["ca.crt"]
    assert ca_bundles(server) == [files["ca.crt"]] * 3
    assert verifies(load_certs_pem(files["ca.crt"]), load_pair(files["tls.crt"], files["tls.key"]).cert)
    return files


def test_a_missing_secret_is_issued_created_and_published(apiserver: tuple[ApiServer, str], tmp_path: Path) -> None:
    server, url = apiserver
    rot = rotator(url, tmp_path)
    assert rot.not_after is None
    bundle = rot.reconcile()
    secret = server.stored(SECRETS, NS, SECRET)
    assert secret is not None
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["annotations"][GENERATION] == "1"
    files = check_consistent(server, tmp_path, bundle)
    assert set(files) == {"tls.crt", "tls.key", "ca.crt", "ca.key"}
    assert load_pair(files["ca.crt"], files["ca.key"]).cert == bundle.ca.cert
    assert san_strings(bundle.leaf.cert) == [SERVICE, f"{SERVICE}.{NS}", DNS, f"{DNS}.cluster.local"]
    assert rot.not_after == bundle.leaf.not_after
    assert rot.ca_not_after == bundle.ca.not_after
    assert (tmp_path / "tls.key").stat().st_mode & 0o777 == 0o600


def test_reconciling_a_valid_state_writes_nothing(apiserver: tuple[ApiServer, str], tmp_path: Path) -> None:
    server, url = apiserver
    first = rotator(url, tmp_path).reconcile()
    writes = [server.writes(m, p) for m in ("POST", "PATCH") for p in ("secrets", MUTATING_PLURAL, VALIDATING_PLURAL)]
    assert writes == [1, 0, 0, 0, 1, 1]  # one create, one caBundle patch per configuration
    inode = (tmp_path / "tls.crt").stat().st_ino
    again = rotator(url, tmp_path).reconcile()
    assert again.leaf.cert == first.leaf.cert
    assert [
        server.writes(m, p) for m in ("POST", "PATCH") for p in ("secrets", MUTATING_PLURAL, VALIDATING_PLURAL)
    ] == writes
    assert (tmp_path / "tls.crt").stat().st_ino == inode  # unchanged files are not rewritten


@pytest.mark.parametrize("content", ["empty", "garbage", "mismatched"])
def test_an_empty_or_broken_secret_is_reissued_in_place(
    apiserver: tuple[ApiServer, str], tmp_path: Path, content: str
) -> None:
    server, url = apiserver
    data = {"tls.crt": b"", "tls.key": b""}
    if content != "empty":
        ca, leaf = aged(0)
        other = issue_serving(ca, SERVICE, NS)
        data = {
            "tls.crt": leaf.cert_pem() if content == "mismatched" else b"junk",
            "tls.key": other.key_pem(),
            "ca.crt": ca.cert_pem(),
            "ca.key": ca.key_pem(),
        }
    seed_secret(server, data, 7)
    uid = dig(server.stored(SECRETS, NS, SECRET), "metadata", "uid")
    assert uid
    bundle = rotator(url, tmp_path).reconcile()
    secret = server.stored(SECRETS, NS, SECRET)
    assert secret is not None
    assert secret["metadata"]["uid"] == uid  # patched, not recreated
    assert secret["metadata"]["annotations"][GENERATION] == "8"  # the counter continues
    assert server.writes("POST", "secrets") == 0
    check_consistent(server, tmp_path, bundle)


def test_a_serving_certificate_near_expiry_is_renewed_under_the_same_ca(
    apiserver: tuple[ApiServer, str], tmp_path: Path
) -> None:
    server, url = apiserver
    ca, leaf = aged(70, leaf_days=90)  # 20 of 90 days left: less than a third
    assert needs_renewal(leaf.cert, datetime.now(UTC), 1 / 3)
    seed(server, ca, leaf, [ca.cert])
    for resource, name in ((MUTATING, MWC), (VALIDATING, VWC)):  # already published
        config = server.stored(resource, None, name)
        assert config is not None
        for hook in config["webhooks"]:
            hook["clientConfig"]["caBundle"] = base64.b64encode(ca.cert_pem()).decode()
        server.seed(resource, None, name, config)

    bundle = rotator(url, tmp_path).reconcile()
    assert bundle.leaf.cert != leaf.cert
    assert bundle.ca.cert == ca.cert
    assert bundle.trusted == (ca.cert,)
    assert bundle.leaf.not_after > leaf.not_after
    assert server.writes("PATCH", MUTATING_PLURAL) == server.writes("PATCH", VALIDATING_PLURAL) == 0  # same CA
    check_consistent(server, tmp_path, bundle)


def test_a_ca_near_expiry_is_rotated_with_both_cas_trusted_during_the_overlap(
    apiserver: tuple[ApiServer, str], tmp_path: Path
) -> None:
    server, url = apiserver
    old_ca, old_leaf = aged(300, ca_days=365, leaf_days=365)  # CA: 65 of 365 days left
    seed(server, old_ca, old_leaf, [old_ca.cert])
    rotator(url, None, clock=lambda: datetime.now(UTC) - timedelta(days=299)).reconcile()  # publish the old CA
    assert ca_bundles(server) == [old_ca.cert_pem()] * 3

    bundle = rotator(url, tmp_path).reconcile()
    assert bundle.ca.cert != old_ca.cert
    assert bundle.trusted == (bundle.ca.cert, old_ca.cert)
    files = check_consistent(server, tmp_path, bundle)
    trusted = load_certs_pem(files["ca.crt"])
    assert verifies(trusted, old_leaf.cert)  # replicas still serving the old certificate keep working
    assert verifies(trusted, bundle.leaf.cert)
    assert not verifies([old_ca.cert], bundle.leaf.cert)
    for resource, name in ((MUTATING, MWC), (VALIDATING, VWC)):
        config = server.stored(resource, None, name)
        assert config is not None
        assert config["metadata"]["annotations"][BUNDLE_SOURCE].endswith("/2")  # the generation of the rotated Secret


def test_an_expired_old_ca_leaves_the_bundle(apiserver: tuple[ApiServer, str], tmp_path: Path) -> None:
    server, url = apiserver
    ca, leaf = aged(0)
    expired = issue_ca(validity=timedelta(days=10), now=datetime.now(UTC) - timedelta(days=20))
    seed(server, ca, leaf, [ca.cert, expired.cert])
    bundle = rotator(url, tmp_path, extra_dns=()).reconcile()
    assert bundle.trusted == (ca.cert,)
    check_consistent(server, tmp_path, bundle)


def test_changed_service_names_reissue_the_serving_certificate(
    apiserver: tuple[ApiServer, str], tmp_path: Path
) -> None:
    server, url = apiserver
    first = rotator(url, tmp_path).reconcile()
    second = rotator(url, tmp_path, extra_dns=("webhook.example.com",)).reconcile()
    assert second.ca.cert == first.ca.cert
    assert second.leaf.cert != first.leaf.cert
    assert san_strings(second.leaf.cert)[-1] == "webhook.example.com"
    check_consistent(server, tmp_path, second)


def gate(barrier: threading.Barrier, issue: Callable[..., CertKeyPair]) -> Callable[..., CertKeyPair]:
    """Issue only when both replicas got here: both have read the same Secret and both will write."""

    def issue_when_both_ready(*args: Any, **kwargs: Any) -> CertKeyPair:
        barrier.wait(timeout=10)
        return issue(*args, **kwargs)

    return issue_when_both_ready


def race(replicas: list[CertificateRotator]) -> list[StoredBundle]:
    results: list[StoredBundle | BaseException] = [RuntimeError("did not run")] * len(replicas)

    def run(i: int) -> None:
        try:
            results[i] = replicas[i].reconcile()
        except BaseException as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(replicas))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return [r for r in results if isinstance(r, StoredBundle)]


def test_two_replicas_creating_at_once_end_with_one_certificate(
    apiserver: tuple[ApiServer, str], tmp_path: Path
) -> None:
    server, url = apiserver
    barrier = threading.Barrier(2)
    replicas = [rotator(url, tmp_path / f"r{i}", issue_ca_fn=gate(barrier, issue_ca)) for i in range(2)]
    a, b = race(replicas)
    assert server.writes("POST", "secrets") == 2  # both tried...
    assert len(server.objects) == 3  # ...one Secret exists (plus the two webhook configurations)
    assert a.leaf.cert == b.leaf.cert and a.ca.cert == b.ca.cert  # ...and both adopted it
    for i, bundle in enumerate((a, b)):
        check_consistent(server, tmp_path / f"r{i}", bundle)
    assert (tmp_path / "r0" / "tls.key").read_bytes() == (tmp_path / "r1" / "tls.key").read_bytes()


def test_two_replicas_renewing_at_once_end_with_one_certificate(
    apiserver: tuple[ApiServer, str], tmp_path: Path
) -> None:
    server, url = apiserver
    ca, leaf = aged(70, leaf_days=90)
    seed(server, ca, leaf, [ca.cert])
    barrier = threading.Barrier(2)
    replicas = [rotator(url, tmp_path / f"r{i}", issue_serving_fn=gate(barrier, issue_serving)) for i in range(2)]
    a, b = race(replicas)
    assert server.writes("PATCH", "secrets") == 2
    assert server.conflicts.count(f"secrets/{SECRET}") == 1  # the loser's compare-and-swap failed
    assert a.leaf.cert == b.leaf.cert != leaf.cert
    secret = server.stored(SECRETS, NS, SECRET)
    assert secret is not None
    assert secret["metadata"]["annotations"][GENERATION] == "2"
    for i, bundle in enumerate((a, b)):
        check_consistent(server, tmp_path / f"r{i}", bundle)


def test_a_replica_with_an_old_snapshot_does_not_put_an_old_ca_bundle_back(
    apiserver: tuple[ApiServer, str], tmp_path: Path
) -> None:
    """Replica B reads the Secret, then A rotates the CA and publishes, then B publishes: B must re-read."""
    server, url = apiserver
    old_ca, old_leaf = aged(300, ca_days=365, leaf_days=365)
    seed(server, old_ca, old_leaf, [old_ca.cert])
    before = datetime.now(UTC) - timedelta(days=299)  # when the old CA was fine
    rotator(url, None, clock=lambda: before).reconcile()
    a = rotator(url, tmp_path / "a")
    calls: list[int] = []

    def b_clock() -> datetime:
        calls.append(1)
        if len(calls) == 1:  # B has read the old Secret; now A rotates
            a.reconcile()
            return before
        return datetime.now(UTC)

    b = rotator(url, tmp_path / "b", clock=b_clock)
    result = b.reconcile()
    assert a.bundle is not None
    assert result.ca.cert == a.bundle.ca.cert != old_ca.cert
    history = [
        base64.b64decode(v["webhooks"][0]["clientConfig"].get("caBundle", ""))
        for v in server.objects[MUTATING, None, MWC].history
        if v is not None
    ]
    assert history[-1] == certs_to_pem([a.bundle.ca.cert, old_ca.cert])
    assert history.count(old_ca.cert_pem()) == 1  # published once, before the rotation, never again
    check_consistent(server, tmp_path / "b", result)


def test_a_wrong_bundle_stamp_does_not_block_publishing(apiserver: tuple[ApiServer, str], tmp_path: Path) -> None:
    server, url = apiserver
    bundle = rotator(url, tmp_path).reconcile()
    config = server.stored(MUTATING, None, MWC)
    assert config is not None
    config["metadata"]["annotations"][BUNDLE_SOURCE] = f"{bundle.uid}/99"  # hand-edited, ahead of the Secret
    config["webhooks"][0]["clientConfig"]["caBundle"] = base64.b64encode(b"stale").decode()
    server.seed(MUTATING, None, MWC, config)
    rotator(url, tmp_path).reconcile()
    check_consistent(server, tmp_path, bundle)


def test_a_missing_webhook_configuration_does_not_stop_the_server_files(tmp_path: Path) -> None:
    with api_server() as (server, url):
        bundle = rotator(url, tmp_path).reconcile()
        assert (tmp_path / "tls.crt").read_bytes() == bundle.leaf.cert_pem()
        assert server.stored(SECRETS, NS, SECRET) is not None


def test_files_are_written_only_after_the_ca_bundle_is_published(
    apiserver: tuple[ApiServer, str], tmp_path: Path
) -> None:
    """A replica must not serve a certificate whose CA the apiserver does not trust yet."""
    server, url = apiserver
    server.forbidden.add(VALIDATING_PLURAL)
    rot = rotator(url, tmp_path)
    with pytest.raises(ApiException) as failure:
        rot.reconcile()
    assert failure.value.status == 403
    assert server.stored(SECRETS, NS, SECRET) is not None
    assert not (tmp_path / "tls.crt").exists()
    assert rot.not_after is None
    server.forbidden.clear()
    check_consistent(server, tmp_path, rot.reconcile())


def test_persistent_conflicts_give_up_with_an_error(apiserver: tuple[ApiServer, str], tmp_path: Path) -> None:
    server, url = apiserver
    ca, leaf = aged(70, leaf_days=90)
    seed(server, ca, leaf, [ca.cert])

    def interfering(*args: Any, **kwargs: Any) -> CertKeyPair:
        seed(server, ca, leaf, [ca.cert])  # another writer changes the Secret before every write
        return issue_serving(*args, **kwargs)

    with pytest.raises(RotationError, match="attempts"):
        rotator(url, tmp_path, issue_serving_fn=interfering).reconcile()
    assert not (tmp_path / "tls.crt").exists()


def test_run_reconciles_until_stopped(apiserver: tuple[ApiServer, str], tmp_path: Path) -> None:
    server, url = apiserver
    rot = rotator(url, tmp_path)
    stop = threading.Event()
    thread = threading.Thread(target=rot.run, args=(stop,), kwargs={"interval": 60.0})
    thread.start()
    try:
        for _ in range(500):
            if rot.bundle is not None:
                break
            stop.wait(0.01)
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
    assert rot.bundle is not None
    check_consistent(server, tmp_path, rot.bundle)
