"""What the fake API answers when it refuses a request, in the real server's words: RBAC's 403, a stale replace's
and an unmet delete precondition's 409, and the Status body every failure carries."""

from __future__ import annotations

from rules.model import Json
from testkit.fakeapi.resources import Request
from testkit.rbac import ANY, Grant, allowed, request_grant


def forbidden(req: Request, grants: frozenset[Grant] | None) -> str | None:
    """What the API server says when RBAC refuses the request (None: allowed)."""
    needed = request_grant(req.method, req.path, req.query)
    if grants is None or needed is None or allowed(needed, grants):
        return None
    where = "at the cluster scope" if needed.namespace == ANY else f'in the namespace "{needed.namespace}"'
    return (
        f'{needed.resource} is forbidden: User "system:serviceaccount:fake:server" cannot {needed.verb} resource '
        f'"{needed.resource}" in API group "{needed.group}" {where}'
    )


def stale(stored: Json | None, body: Json) -> str | None:
    """Why a replace must be refused as the real server does: it names a resourceVersion that is not current."""
    wanted = (body.get("metadata") or {}).get("resourceVersion")
    current = (stored or {}).get("metadata", {}).get("resourceVersion")
    if wanted and stored is not None and wanted != current:
        return "the object has been modified; please apply your changes to the latest version and try again"
    return None


def unmet_preconditions(stored: Json | None, body: Json | None) -> str | None:
    """Why a delete must be refused as the real server does: its DeleteOptions name a UID or resourceVersion the
    stored object does not have."""
    wanted = (body or {}).get("preconditions") or {}
    meta = (stored or {}).get("metadata") or {}
    for field_name in ("uid", "resourceVersion"):
        if stored is not None and wanted.get(field_name) and wanted[field_name] != meta.get(field_name):
            got = meta.get(field_name)
            return f"Precondition failed: {field_name} in precondition: {wanted[field_name]}, in object meta: {got}"
    return None


def failure(code: int, reason: str, message: str) -> Json:
    """The Status body of a refused or failed request, which the client turns into an ApiException."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
