"""A small Kubernetes API server over real HTTP for the live-state tests (and the lead's end-to-end test).

Why not kmock alone: kmock 0.8's emulator gives lists the resourceVersion '...', stamps no resourceVersion on
objects, ignores labelSelector/fieldSelector and the watch's resourceVersion (it replays every object as ADDED),
sends no bookmarks and never answers 410. The behaviours under test — resume from a resourceVersion, expiry with
410, a stream cut mid-chunk, selector-scoped watches — need those semantics, so this server implements them:

- list (with `limit`/`continue`), watch from a resourceVersion (history replay, `ERROR 410` when compacted,
  `BOOKMARK` events when allowed, `timeoutSeconds`), get, create (POST), replace (PUT), delete;
- labelSelector (`k=v`, `k!=v`, `k`, `!k`) and fieldSelector (`metadata.name`, `metadata.namespace`), with the
  real server's ADDED/DELETED translation when an update moves an object in or out of a watch's selector;
- the CRD groups (snapshot.storage.k8s.io, kubevirt.io, cdi.kubevirt.io, gateway.networking.k8s.io,
  openreports.io, wgpolicyk8s.io) while
  they are installed (`served_groups`), with discovery (`/apis` and each group's resource list), and
  coordination.k8s.io Leases; a replace naming a stale resourceVersion, and a delete whose preconditions (uid,
  resourceVersion) the object does not meet, get 409 Conflict;
- RBAC, when given `grants` (testkit/rbac.py `chart_grants()`: what the chart grants the server's
  ServiceAccount): a request they do not allow gets 403 Forbidden, as from a real API server;
- faults: `expire_watches()` (410), `break_watches()` (connection cut without the final chunk),
  `silently()` (changes no watch sees, only a re-list), `fail(status)` and `delay(seconds)` for requests,
  `holding()` (requests unanswered until the test lets them go), `stop()`/`start()` (API down and back on the
  same port).

Start one with `running_fake_api()` (a context manager) or the pytest fixture `fake_api` in conftest.py.

The parts: `resources` (what is served, paths, discovery), `selectors`, `watch` (one watch and its events),
`store` (`FakeKubeAPI`: state, watch fan-out, faults), `handler` (HTTP), `refusals` (403, 409 and Status bodies).
"""

from testkit.fakeapi.resources import OPTIONAL_GROUPS, PLURAL_OF, REPORT_GROUPS, RESOURCES, Request, plural_of
from testkit.fakeapi.selectors import selector_matcher
from testkit.fakeapi.store import FakeKubeAPI, running_fake_api

__all__ = [
    "OPTIONAL_GROUPS",
    "PLURAL_OF",
    "REPORT_GROUPS",
    "RESOURCES",
    "FakeKubeAPI",
    "Request",
    "plural_of",
    "running_fake_api",
    "selector_matcher",
]
