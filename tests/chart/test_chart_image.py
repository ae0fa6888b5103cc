"""The image: the default repository names no registry, and NOTES.txt says so with where the kubelet would pull."""

from __future__ import annotations

import pytest

from tests.chart.chart_helpers import container, notes, render

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("image", "pulled"),
    [
        ({}, "docker.io/library/storage-affinity-webhook:0.1.0"),
        (
            {"repository": "myorg/storage-affinity-webhook", "tag": "1.2.3"},
            "docker.io/myorg/storage-affinity-webhook:1.2.3",
        ),
        ({"repository": "saw", "digest": DIGEST}, f"docker.io/library/saw@{DIGEST}"),
    ],
)
def test_a_repository_without_a_registry_is_warned_about(image: dict[str, str], pulled: str) -> None:
    text = notes({"image": image})
    assert "WARNING: image.repository" in text
    assert f"names no registry: the kubelet pulls\n  {pulled}\nfrom Docker Hub" in text
    assert "image.repository=REGISTRY/storage-affinity-webhook" in text
    # what the Deployment runs is the image the warning names, without the registry Docker fills in
    assert pulled.removeprefix("docker.io/").removeprefix("library/") == container(render({"image": image}))["image"]


@pytest.mark.parametrize(
    "repository",
    [
        "registry.example.com/storage-affinity-webhook",
        "localhost:5000/storage-affinity-webhook",
        "localhost/storage-affinity-webhook",
        "docker.io/myorg/storage-affinity-webhook",
        "registry.example.com:8443/team/storage-affinity-webhook",
    ],
)
def test_a_repository_with_a_registry_gets_no_warning(repository: str) -> None:
    text = notes({"image": {"repository": repository}})
    assert "WARNING" not in text
    assert text.startswith("storage-affinity-webhook 0.1.0 is installed")
