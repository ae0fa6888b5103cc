"""The two webhook configurations: what they match, how they fail, where they call."""

from __future__ import annotations

from typing import Any

from tests.chart.chart_helpers import CA_BUNDLE, FULLNAME, NAMESPACE, SCENARIOS, Manifest, one, render, webhooks

ALWAYS_EXCLUDED = [NAMESPACE, "kube-system", "kube-node-lease"]
POD_HOOKS = ("mutate.storage-affinity.io", "validate.storage-affinity.io")
POLICY_HOOK = "policy.validate.storage-affinity.io"
VELERO_HOOK = "velero-config.validate.storage-affinity.io"

NOT_MIRROR = "!has(object.metadata.annotations) || !('kubernetes.io/config.mirror' in object.metadata.annotations)"
NOT_KUBEVIRT = (
    "!has(object.metadata.annotations) || !('kubevirt.io/ephemeral-provisioning' in object.metadata.annotations)"
    " || object.metadata.annotations['kubevirt.io/ephemeral-provisioning'] != 'true'"
)


def _excluded(hook: dict[str, Any]) -> list[str]:
    (expression,) = [e for e in hook["namespaceSelector"]["matchExpressions"] if e["operator"] == "NotIn"]
    assert expression["key"] == "kubernetes.io/metadata.name"
    values: list[str] = expression["values"]
    return values


def test_every_webhook_is_side_effect_free_v1(rendered: list[Manifest]) -> None:
    hooks = webhooks(rendered)
    assert set(hooks) >= {*POD_HOOKS, POLICY_HOOK}
    for name, hook in hooks.items():
        assert hook["sideEffects"] == "None", name
        assert hook["admissionReviewVersions"] == ["v1"], name
        assert hook["timeoutSeconds"] == 5, name
        assert hook["clientConfig"]["service"] == {
            "name": FULLNAME,
            "namespace": NAMESPACE,
            "path": "/mutate" if name.startswith("mutate.") else "/validate",
            "port": 443,
        }


def test_failure_policy_defaults() -> None:
    hooks = webhooks(render())
    assert hooks["mutate.storage-affinity.io"]["failurePolicy"] == "Ignore"
    assert hooks["mutate.storage-affinity.io"]["reinvocationPolicy"] == "IfNeeded"
    assert hooks["validate.storage-affinity.io"]["failurePolicy"] == "Ignore"
    assert hooks[POLICY_HOOK]["failurePolicy"] == "Fail"
    assert VELERO_HOOK not in hooks  # only when policy.loadAffinitySource names a ConfigMap


def test_failure_policy_and_timeout_values() -> None:
    hooks = webhooks(
        render(
            {
                "webhook": {
                    "timeoutSeconds": 12,
                    "mutate": {"failurePolicy": "Fail", "reinvocationPolicy": "Never"},
                    "validate": {"failurePolicy": "Fail"},
                    "validateConfigMaps": {"failurePolicy": "Ignore"},
                }
            }
        )
    )
    assert hooks["mutate.storage-affinity.io"]["failurePolicy"] == "Fail"
    assert hooks["mutate.storage-affinity.io"]["reinvocationPolicy"] == "Never"
    assert hooks["validate.storage-affinity.io"]["failurePolicy"] == "Fail"
    assert hooks[POLICY_HOOK]["failurePolicy"] == "Ignore"
    assert {h["timeoutSeconds"] for h in hooks.values()} == {12}


def test_rules() -> None:
    hooks = webhooks(render())
    pods_and_jobs = [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods"],
            "operations": ["CREATE"],
            "scope": "Namespaced",
        },
        {
            "apiGroups": ["batch"],
            "apiVersions": ["v1"],
            "resources": ["jobs"],
            "operations": ["CREATE"],
            "scope": "Namespaced",
        },
    ]
    assert hooks["mutate.storage-affinity.io"]["rules"] == pods_and_jobs
    validate_rules = hooks["validate.storage-affinity.io"]["rules"]
    assert validate_rules[0]["resources"] == ["pods"]
    assert validate_rules[0]["operations"] == ["CREATE", "UPDATE"]
    assert validate_rules[1] == pods_and_jobs[1]
    (configmaps,) = hooks[POLICY_HOOK]["rules"]
    assert configmaps["resources"] == ["configmaps"]
    assert configmaps["operations"] == ["CREATE", "UPDATE"]


def test_pod_and_job_webhooks_always_exclude_system_and_own_namespace(rendered: list[Manifest]) -> None:
    hooks = webhooks(rendered)
    for name in POD_HOOKS:
        assert _excluded(hooks[name])[:3] == ALWAYS_EXCLUDED, name


def test_excluded_namespaces_are_added_not_replacing() -> None:
    hooks = webhooks(render(SCENARIOS["excluded-namespaces"]))
    for name in POD_HOOKS:
        assert _excluded(hooks[name]) == [*ALWAYS_EXCLUDED, "velero", "volsync-system"], name


def test_release_namespace_follows_the_release() -> None:
    docs = render({"webhook": {"excludedNamespaces": ["kube-system", "tenant"]}}, namespace="ops")
    hooks = webhooks(docs)
    for name in POD_HOOKS:
        assert _excluded(hooks[name]) == ["ops", "kube-system", "kube-node-lease", "tenant"]
    assert hooks[POLICY_HOOK]["namespaceSelector"]["matchExpressions"][0]["values"] == ["ops"]


def test_policy_configmap_webhook_sees_only_labelled_configmaps_of_the_release_namespace() -> None:
    hook = webhooks(render())[POLICY_HOOK]
    assert hook["namespaceSelector"] == {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": [NAMESPACE]}]
    }
    assert hook["objectSelector"] == {"matchLabels": {"storage-affinity.io/policy": "true"}}
    policy = one(render(), "ConfigMap", "storage-affinity-policy")
    assert policy["metadata"]["labels"]["storage-affinity.io/policy"] == "true"


def test_velero_node_agent_configmap_webhook() -> None:
    hook = webhooks(render(SCENARIOS["velero-source"]))[VELERO_HOOK]
    assert hook["failurePolicy"] == "Fail"
    assert hook["namespaceSelector"]["matchExpressions"][0] == {
        "key": "kubernetes.io/metadata.name",
        "operator": "In",
        "values": ["velero"],
    }
    assert _excluded(hook) == ALWAYS_EXCLUDED
    assert hook["matchConditions"] == [
        {"name": "velero-node-agent-configmap", "expression": "object.metadata.name == 'node-agent-config'"}
    ]
    assert "objectSelector" not in hook


def test_match_conditions_skip_mirror_and_kubevirt_first_consumer_pods() -> None:
    """Then `storage-pod` (tests/chart/test_chart_match_conditions.py), unless webhook.onlyStoragePods is false."""
    hooks = webhooks(render())
    assert hooks["mutate.storage-affinity.io"]["matchConditions"][:-1] == [
        {"name": "not-mirror-pod", "expression": NOT_MIRROR},
        {"name": "not-kubevirt-first-consumer", "expression": NOT_KUBEVIRT},
    ]
    assert hooks["validate.storage-affinity.io"]["matchConditions"][:-1] == [
        {"name": "not-mirror-pod", "expression": NOT_MIRROR}
    ]
    for hook in ("mutate.storage-affinity.io", "validate.storage-affinity.io"):
        assert hooks[hook]["matchConditions"][-1]["name"] == "storage-pod"
    every_pod = webhooks(render({"webhook": {"onlyStoragePods": False}}))
    assert [c["name"] for c in every_pod["validate.storage-affinity.io"]["matchConditions"]] == ["not-mirror-pod"]


def test_ca_bundle_per_certificate_mode() -> None:
    for name in ("default", "cert-manager"):
        docs = render(SCENARIOS[name])
        for hook in webhooks(docs).values():
            assert "caBundle" not in hook["clientConfig"], name
    for hook in webhooks(render(SCENARIOS["provided"])).values():
        assert hook["clientConfig"]["caBundle"] == CA_BUNDLE


def test_cert_manager_injects_the_ca_of_the_serving_certificate() -> None:
    docs = render(SCENARIOS["cert-manager"])
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = one(docs, kind)["metadata"]["annotations"]
        assert annotations == {"cert-manager.io/inject-ca-from": f"{NAMESPACE}/{FULLNAME}-tls"}
    one(docs, "Certificate", f"{FULLNAME}-tls")
    for name in ("default", "provided"):
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            assert "annotations" not in one(render(SCENARIOS[name]), kind)["metadata"]


def test_workload_templates_webhook() -> None:
    """Workloads are checked on creation and update of their templates; a Job's creation stays with the pod
    webhook (which checks it whole), its template updates come here. Both follow webhook.validate's policy."""
    hooks = webhooks(render({"webhook": {"validate": {"failurePolicy": "Fail"}}}))
    hook = hooks["workloads.validate.storage-affinity.io"]
    assert hook["clientConfig"]["service"]["path"] == "/validate"
    assert hook["failurePolicy"] == "Fail"
    assert [(r["apiGroups"], r["resources"], r["operations"]) for r in hook["rules"]] == [
        (["apps"], ["deployments", "statefulsets", "daemonsets", "replicasets"], ["CREATE", "UPDATE"]),
        (["batch"], ["cronjobs"], ["CREATE", "UPDATE"]),
        (["batch"], ["jobs"], ["UPDATE"]),
    ]
    assert _excluded(hook) == _excluded(hooks["validate.storage-affinity.io"])
    assert [c["name"] for c in hook["matchConditions"]] == ["template-annotations", "template-changed"]
    assert hooks["validate.storage-affinity.io"]["rules"][1]["operations"] == ["CREATE"]


def test_a_namespace_selector_is_anded_with_the_name_exclusions_in_every_tenant_webhook() -> None:
    """OpenShift: namespaces excluded by a label (`openshift.io/run-level`), not by name. Every webhook that reviews
    tenants' objects gets it beside the name exclusions; the policy ConfigMap's keeps the release namespace alone,
    so no namespace label can turn the policy's checks off."""
    run_level = {"key": "openshift.io/run-level", "operator": "DoesNotExist"}
    values = {
        **SCENARIOS["velero-source"],
        "webhook": {"namespaceSelector": {"matchExpressions": [run_level], "matchLabels": {"tenant": "yes"}}},
    }
    hooks = webhooks(render(values))
    tenant_hooks = [name for name in hooks if name != POLICY_HOOK]
    assert set(tenant_hooks) >= {*POD_HOOKS, VELERO_HOOK}
    for name in tenant_hooks:
        selector = hooks[name]["namespaceSelector"]
        assert run_level in selector["matchExpressions"], name
        assert selector["matchLabels"] == {"tenant": "yes"}, name
        assert _excluded(hooks[name])[:3] == ALWAYS_EXCLUDED, name  # ANDed: the name exclusions stay
    assert hooks[POLICY_HOOK]["namespaceSelector"] == {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": [NAMESPACE]}]
    }
    assert "matchLabels" not in webhooks(render())[POD_HOOKS[0]]["namespaceSelector"]


def test_openshift_service_ca_issues_the_certificate_and_injects_the_bundle() -> None:
    """Mode serviceCA: the Service asks OpenShift's service CA for the Secret the server mounts, both webhook
    configurations ask for the bundle, and the chart renders no bundle, Certificate or self-issuing RBAC of its own."""
    values = {**SCENARIOS["service-ca"], "monitoring": {"serviceMonitor": {"enabled": True}}}
    docs = render(values)
    service = one(docs, "Service")
    secret = f"{FULLNAME}-tls"
    assert service["metadata"]["annotations"]["service.beta.openshift.io/serving-cert-secret-name"] == secret
    volumes = one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert [v["secret"]["secretName"] for v in volumes if v["name"] == "tls"] == [secret]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        configuration = one(docs, kind)
        assert configuration["metadata"]["annotations"] == {"service.beta.openshift.io/inject-cabundle": "true"}
        assert all("caBundle" not in hook["clientConfig"] for hook in configuration["webhooks"])
    assert not [d for d in docs if d["kind"] in ("Certificate", "Issuer")]
    endpoint = one(docs, "ServiceMonitor")["spec"]["endpoints"][0]
    assert endpoint["tlsConfig"]["ca"] == {"configMap": {"name": "openshift-service-ca.crt", "key": "service-ca.crt"}}
