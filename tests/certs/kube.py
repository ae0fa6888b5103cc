"""kmock's Kubernetes emulator in a background event loop, with the apiserver's optimistic concurrency added.

kmock stores objects and answers 409 on a duplicate create, but it has no resourceVersion. The subclass adds
what the real apiserver does: every write gets a new resourceVersion (and creates a uid), and a patch that
carries a `metadata.resourceVersion` other than the stored one fails with 409 Conflict. Writes are serialized so
check-and-write is atomic, like etcd's compare-and-swap.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import aiohttp.web
import attrs
import kmock
from kmock._internal import rendering
from kubernetes import client

SECRETS = kmock.resource("v1/secrets")
MUTATING_PLURAL = "mutatingwebhookconfigurations"
VALIDATING_PLURAL = "validatingwebhookconfigurations"
MUTATING = kmock.resource(f"admissionregistration.k8s.io/v1/{MUTATING_PLURAL}")
VALIDATING = kmock.resource(f"admissionregistration.k8s.io/v1/{VALIDATING_PLURAL}")


@attrs.define(kw_only=True)
class ApiServer(kmock.KubernetesEmulator):
    _version: int = attrs.field(default=0, init=False)
    _writes: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False)
    conflicts: list[str] = attrs.field(factory=list, init=False)
    forbidden: set[str] = attrs.field(factory=set, init=False)  # plurals whose writes answer 403, as RBAC would

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        writing = request.action in (kmock.action.CREATE, kmock.action.UPDATE) and isinstance(request.data, dict)
        if request.resource is None or not writing:
            return await super()._handle(request)
        if request.resource.plural in self.forbidden:
            return await self._render_error(kmock.KubernetesError(status=403, reason="Forbidden", message="RBAC"))
        async with self._writes:
            meta = request.data.setdefault("metadata", {})
            if request.action == kmock.action.UPDATE:
                key = (request.resource, request.namespace, request.name or "")
                stored = self.objects[key] if key in self.objects else None  # noqa: SIM401 - no .get()
                expected = meta.get("resourceVersion")
                if stored is not None and not stored.deleted and expected is not None:
                    current = stored.raw.get("metadata", {}).get("resourceVersion")
                    if expected != current:
                        self.conflicts.append(f"{request.resource.plural}/{request.name}")
                        return await self._render_error(
                            kmock.KubernetesError(
                                status=409,
                                reason="Conflict",
                                message="the object has been modified; please apply your changes to the latest version",
                            )
                        )
            self._version += 1
            meta["resourceVersion"] = str(self._version)
            if request.action == kmock.action.CREATE:
                meta.setdefault("uid", str(uuid.uuid4()))
                meta.setdefault("creationTimestamp", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
            return await super()._handle(request)

    def seed(self, resource: kmock.resource, namespace: str | None, name: str, obj: dict[str, Any]) -> None:
        """Seed an object as if it had been created through the API."""
        self._version += 1
        meta = obj.setdefault("metadata", {})
        meta.update(name=name, resourceVersion=str(self._version), uid=meta.get("uid") or str(uuid.uuid4()))
        if namespace:
            meta["namespace"] = namespace
        self.objects[resource, namespace, name] = obj

    def stored(self, resource: kmock.resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        key = (resource, namespace, name)
        if key not in self.objects or self.objects[key].deleted:
            return None
        raw: dict[str, Any] = self.objects[key].raw
        return raw

    def writes(self, method: str, plural: str) -> int:
        return sum(1 for r in self if r.method == method and r.resource and r.resource.plural == plural)


@contextmanager
def api_server() -> Iterator[tuple[ApiServer, str]]:
    """Run the emulator on 127.0.0.1 in its own thread; yields it and its URL."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start() -> tuple[ApiServer, kmock.Server]:
        handler = ApiServer()
        await handler.__aenter__()
        server = kmock.Server(handler)
        await server.__aenter__()
        return handler, server

    handler, server = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    try:
        yield handler, str(server.url).rstrip("/")
    finally:

        async def stop() -> None:
            await server.__aexit__(None, None, None)
            await handler.__aexit__(None, None, None)

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def api_client(url: str) -> client.ApiClient:
    """A separate client (own connection pool), as each replica has."""
    configuration = client.Configuration(host=url)
    return client.ApiClient(configuration)
