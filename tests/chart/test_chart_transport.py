"""Only the API server asks: the chart's client CA (serve --client-ca) and its NetworkPolicy."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from tests.chart.chart_helpers import (
    FULLNAME,
    NAMESPACE,
    SCENARIOS,
    args,
    container,
    kinds,
    notes,
    one,
    render,
    render_error,
)
from tests.chart.test_chart_render import KUBERNETES_VERSIONS

CLIENT_CA_DIR = "/etc/storage-affinity-webhook/client-ca"


def test_no_network_policy_unless_enabled() -> None:
    assert not kinds(render(), "NetworkPolicy")
    assert not kinds(render({"networkPolicy": {"webhookFrom": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}}), "NetworkPolicy")


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_network_policy_admits_the_api_servers_and_the_scrape_on_the_server_port(version: str) -> None:
    docs = render(SCENARIOS["network-policy"])
    policy = one(docs, "NetworkPolicy", FULLNAME)
    kubernetes_validate.validate(policy, version, strict=True)
    assert policy["metadata"]["namespace"] == NAMESPACE
    deployment = one(docs, "Deployment", FULLNAME)
    assert policy["spec"]["podSelector"] == deployment["spec"]["selector"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]  # egress (the API server, the node) is left alone
    (port,) = container(docs)["ports"]
    only_the_port = [{"port": port["name"], "protocol": "TCP"}]
    values = SCENARIOS["network-policy"]["networkPolicy"]
    assert policy["spec"]["ingress"] == [
        {"from": values["webhookFrom"], "ports": only_the_port},
        {
            "from": [
                {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                    "podSelector": values["metrics"]["podSelector"],
                }
            ],
            "ports": only_the_port,
        },
    ]


def test_no_metrics_namespace_no_metrics_ingress() -> None:
    values = {"networkPolicy": {"enabled": True, "webhookFrom": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}}
    values["networkPolicy"]["metrics"] = {"namespace": ""}
    (rule,) = one(render(values), "NetworkPolicy")["spec"]["ingress"]
    assert rule["from"] == [{"ipBlock": {"cidr": "10.0.0.0/8"}}]


def test_an_enabled_network_policy_without_api_server_peers_does_not_render() -> None:
    error = render_error({"networkPolicy": {"enabled": True}})
    assert "networkPolicy.enabled is true: set networkPolicy.webhookFrom" in error


def test_without_a_client_ca_any_tls_client_may_ask() -> None:
    docs = render()
    assert "--client-ca" not in args(docs)
    assert "client-ca" not in {v["name"] for v in one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]}


@pytest.mark.parametrize(
    ("scenario", "source", "key"),
    [("client-ca", "configMap", "ca.crt"), ("client-ca-secret", "secret", "tls-ca.pem")],
)
def test_the_client_ca_is_mounted_as_a_directory_and_given_to_serve(scenario: str, source: str, key: str) -> None:
    docs = render(SCENARIOS[scenario])
    assert args(docs)["--client-ca"] == f"{CLIENT_CA_DIR}/{key}"
    spec = one(docs, "Deployment")["spec"]["template"]["spec"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == "client-ca"]
    assert volume[source][{"configMap": "name", "secret": "secretName"}[source]] == "apiserver-client-ca"
    assert volume[source]["items"] == [{"key": key, "path": key}]
    (mount,) = [m for m in container(docs)["volumeMounts"] if m["name"] == "client-ca"]
    assert mount == {"name": "client-ca", "mountPath": CLIENT_CA_DIR, "readOnly": True}  # no subPath: updates land


@pytest.mark.parametrize("scenario", ["client-ca", "client-ca-secret"])
def test_each_client_name_is_given_to_serve(scenario: str) -> None:
    """The identities kube-apiserver's certificate may present, each one `--client-name`, in order."""
    (deployment,) = kinds(render(SCENARIOS[scenario]), "Deployment")
    (server,) = deployment["spec"]["template"]["spec"]["containers"]
    given = [arg.removeprefix("--client-name=") for arg in server["args"] if arg.startswith("--client-name=")]
    assert given == SCENARIOS[scenario]["clientCA"]["names"]


@pytest.mark.parametrize("source", [{"configMap": "apiserver-ca"}, {"secret": "apiserver-ca"}])
def test_a_client_ca_without_names_does_not_render(source: dict[str, str]) -> None:
    """A CA alone would let every certificate it signs ask: with a shared CA, a tenant's."""
    error = render_error({"clientCA": source})
    assert "clientCA is set: set clientCA.names to the CN or DNS SAN of kube-apiserver's client certificate" in error


@pytest.mark.parametrize("names", [[""], [" kube-apiserver"], ["kube-apiserver", "kube-apiserver"], "kube-apiserver"])
def test_a_bad_client_name_is_refused_by_the_values_schema(names: Any) -> None:
    error = render_error({"clientCA": {"configMap": "apiserver-ca", "names": names}})
    assert "clientCA.names" in error or "clientCA/names" in error, error


def test_a_client_ca_from_both_a_configmap_and_a_secret_is_refused() -> None:
    error = render_error({"clientCA": {"configMap": "a", "secret": "b"}})
    assert "clientCA" in error


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({}, "Client certificates: not required"),
        (
            {"clientCA": {"secret": "apiserver-ca", "names": ["kube-apiserver"]}},
            "the CA in Secret apiserver-ca\n(key ca.crt) signed itself, with extended key usage clientAuth, naming "
            "kube-apiserver:",
        ),
        (
            {"clientCA": {"configMap": "apiserver-ca", "key": "ca.pem", "names": ["a", "b"]}},
            "the CA in ConfigMap apiserver-ca\n(key ca.pem)",
        ),
    ],
)
def test_the_install_notes_say_who_may_ask_for_reviews(values: dict[str, Any], said: str) -> None:
    assert said in notes(values)
