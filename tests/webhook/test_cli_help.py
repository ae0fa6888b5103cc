"""The command line as an operator meets it (webhook/cli/): its version, each subcommand's help (description,
exit codes, every option explained), one wording for a file that cannot be read, every problem of a bad file
named with the file, and counts that agree in number."""

from __future__ import annotations

import argparse
from importlib.metadata import version
from pathlib import Path

import pytest

from certs.issue import issue_ca
from tests.support import DATA, EXAMPLES
from webhook.cli.main import _parser, main

CLUSTER = str(EXAMPLES / "cluster.yaml")
MISSING = "no-such-manifest.yaml"
UNREADABLE = f"{MISSING}: cannot read: No such file or directory"


def subcommands() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_version_comes_from_the_package_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"storage-affinity-webhook {version('storage-affinity-webhook')}\n"


def test_every_subcommand_is_listed() -> None:
    assert set(subcommands()) == {"serve", "rotate-certs", "review", "test", "audit", "certs"}


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_subcommand_has_a_description_its_exit_codes_and_help_for_every_option(name: str) -> None:
    parser = subcommands()[name]
    assert parser.description and len(parser.description) > 40
    epilog = parser.epilog or ""
    assert epilog.startswith("exit codes:\n  0  ")
    assert "\n  1  " in epilog or name == "certs"
    assert "\n  2  bad input or usage" in epilog
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help and action.help != argparse.SUPPRESS, f"{name} {action.option_strings}: no help"
    text = parser.format_help()  # every %(default)s expands
    assert "exit codes:" in text and parser.description in text


def test_audit_usage_says_which_files_belong_to_cluster(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for command in ("serve", "review", "audit"):  # one --cluster for every command that reads manifests
        assert "--cluster MANIFEST [MANIFEST ...]" in subcommands()[command].format_usage(), command
    assert "up to the next option" in (subcommands()["audit"].description or "")
    findings = str(DATA / "audit" / "findings.yaml")
    once = main(["audit", "--cluster", CLUSTER, findings, "-o", "json"]), capsys.readouterr().out
    twice = main(["audit", "--cluster", CLUSTER, "-o", "json", "--cluster", findings]), capsys.readouterr().out
    assert once == twice and once[0] == 1
    pod = str(EXAMPLES / "mover-pod.yaml")
    reviewed = main(["review", "-f", pod, "--cluster", CLUSTER, findings, "-o", "patch"]), capsys.readouterr().out
    split = main(["review", "--cluster", CLUSTER, "-f", pod, "--cluster", findings, "-o", "patch"])
    assert (split, capsys.readouterr().out) == reviewed


@pytest.mark.parametrize(
    "args",
    [
        ["review", "-f", MISSING],
        ["review", "-f", str(EXAMPLES / "plain-pod.yaml"), "--policy", MISSING],
        ["review", "-f", str(EXAMPLES / "plain-pod.yaml"), "--cluster", MISSING],
        ["audit", "--cluster", MISSING],
        ["audit", "--cluster", CLUSTER, "--policy", MISSING],
        ["audit", "--kubeconfig", MISSING, "--policy-namespace", "storage-affinity"],
        ["serve", "--cert", MISSING, "--key", MISSING],
        ["serve", "--cert", CLUSTER, "--key", CLUSTER, "--cluster", MISSING],
        ["serve", "--cert", CLUSTER, "--key", CLUSTER, "--cluster", CLUSTER, "--client-ca", MISSING],
    ],
    ids=lambda args: " ".join(a for a in args if a.startswith("-") or a.isalpha()),
)
def test_a_missing_file_is_said_one_way(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("storage-affinity-webhook: ") and err.rstrip().endswith(UNREADABLE), err


def test_a_client_ca_file_without_a_certificate_is_refused_before_serving(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for content in ("", "not a certificate\n", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"):
        bad = tmp_path / "client-ca.crt"
        bad.write_text(content)
        assert main(["serve", "--cert", CLUSTER, "--key", CLUSTER, "--cluster", CLUSTER, "--client-ca", str(bad)]) == 2
        assert capsys.readouterr().err.startswith(
            f"storage-affinity-webhook: --client-ca {bad}: no PEM certificate could be read from it"
        )


@pytest.mark.parametrize(
    ("names", "said"),
    [
        ([], "--client-ca needs at least one --client-name: the CN or DNS SAN of kube-apiserver's client certificate"),
        (["--client-name", ""], "--client-name '': 1 to 253 printable characters, no leading or trailing space"),
        (["--client-name", "kube-apiserver "], "--client-name 'kube-apiserver ': 1 to 253 printable characters"),
        (["--client-name", "kube\napiserver"], "--client-name 'kube\\napiserver': 1 to 253 printable characters"),
    ],
    ids=["no name", "empty", "trailing space", "newline"],
)
def test_a_client_ca_needs_a_client_name_before_serving(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, names: list[str], said: str
) -> None:
    """A CA alone would let every certificate it signs ask: with a CA that signs for tenants too, any tenant."""
    ca = tmp_path / "ca.crt"
    ca.write_bytes(issue_ca().cert_pem())
    assert (
        main(["serve", "--cert", CLUSTER, "--key", CLUSTER, "--cluster", CLUSTER, "--client-ca", str(ca), *names]) == 2
    )
    assert capsys.readouterr().err.startswith(f"storage-affinity-webhook: {said}")


def test_a_client_name_needs_a_client_ca(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--cert", CLUSTER, "--key", CLUSTER, "--cluster", CLUSTER, "--client-name", "x"]) == 2
    assert capsys.readouterr().err == "storage-affinity-webhook: --client-name needs --client-ca\n"


def test_a_bad_cluster_file_is_refused_with_every_problem_and_its_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """types.go of CDI's DataVolumeStatus (phase: a string) and core/v1 PersistentVolumeClaimSpec (volumeName: a
    string); a Node without a name cannot be indexed."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataVolume\nmetadata: {name: root, namespace: vms}\n"
        "status: {phase: [Succeeded]}\n---\n"
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: shop}\n"
        "spec: {volumeName: [x]}\n---\n"
        "apiVersion: v1\nkind: Node\nmetadata: {labels: {a: b}}\n"
    )
    for args in (
        ["review", "-f", str(EXAMPLES / "plain-pod.yaml"), "--cluster", str(bad)],
        ["audit", "--cluster", str(bad)],
    ):
        assert main(args) == 2
        assert capsys.readouterr().err == (
            f"storage-affinity-webhook: {bad}: DataVolume vms/root: status.phase: must be a string, not list; "
            f"{bad}: PersistentVolumeClaim shop/data: spec.volumeName: must be a string, not list; "
            f"{bad}: a Node has no metadata.name\n"
        )


def test_a_bad_object_to_review_is_refused_with_every_problem_and_its_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: [a]}\nspec: {volumes: x}\n")
    assert main(["review", "-f", str(pod)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"storage-affinity-webhook: {pod}: ")
    assert "metadata.labels: must be" in err and "spec.volumes: must be a list" in err, err


@pytest.mark.parametrize(
    ("files", "summary"),
    [
        ([str(EXAMPLES / "pinned-away-pod.yaml")], "2 objects audited: 1 finding in 1 object, "),
        ([str(DATA / "audit" / "findings.yaml")], "10 objects audited: 11 findings in 9 objects, "),
    ],
)
def test_counts_agree_in_number(capsys: pytest.CaptureFixture[str], files: list[str], summary: str) -> None:
    assert main(["audit", "--cluster", CLUSTER, *files, "-o", "table"]) == 1
    assert capsys.readouterr().out.splitlines()[-1].startswith(summary)


def test_certs_into_a_directory_that_cannot_be_made_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["certs", "--service", "s", "--namespace", "n", "--out", str(blocker / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"storage-affinity-webhook: {blocker / 'out'}: cannot write: "), err


@pytest.mark.parametrize("service", ["Bad_Name", "a" * 64, "x.y"])
def test_certs_for_a_service_that_is_no_dns_label_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, service: str
) -> None:
    assert main(["certs", "--service", service, "--namespace", "n", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"storage-affinity-webhook: service {service!r} is not a valid DNS label"), err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


ROTATE = ["rotate-certs", "--once", "--cert-dir", "certs", "--cert-secret", "s", "--service", "svc", "--namespace", "n"]


def test_rotate_certs_with_a_missing_kubeconfig_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main([*ROTATE, "--kubeconfig", str(tmp_path / MISSING)]) == 2
    err = capsys.readouterr().err
    assert f"--kubeconfig {tmp_path / UNREADABLE}" in err and "rotation failed" not in err, err


def test_rotate_certs_without_any_api_says_what_it_takes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rotate-certs has no --cluster (static state): its message offers only what it takes."""
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    assert main(ROTATE) == 2
    err = capsys.readouterr().err
    assert err.strip().endswith("no $KUBECONFIG and no ~/.kube/config; pass --kubeconfig PATH"), err
    assert "--cluster" not in err and "live state" not in err
