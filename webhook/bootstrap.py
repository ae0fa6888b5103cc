"""Assemble a Runtime and its app from Settings: policy, cluster state, readiness checks."""

from __future__ import annotations

import logging

from flask import Flask

from webhook.app import create_app
from webhook.policyfile import load_policy_file
from webhook.runtime import Runtime
from webhook.settings import Settings
from webhook.state.static import load_static_state

log = logging.getLogger(__name__)


def build_runtime(settings: Settings) -> Runtime:
    policy, source = load_policy_file(settings.policy_file)
    view = load_static_state(settings.cluster_files)
    return Runtime(
        policy=policy, view=view, namespace=settings.namespace, cert_file=settings.cert, policy_source=source
    )


def build_app(settings: Settings) -> Flask:
    runtime = build_runtime(settings)
    return create_app(runtime, max_body=settings.max_body, trivial_endpoint=settings.trivial_endpoint)
