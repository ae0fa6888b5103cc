"""The worker's connection registry: which connection is the idlest, and that a busy one is never offered."""

from __future__ import annotations

from webhook.serving.connections import Connections


def order(conns: Connections) -> list[tuple[str, bool]]:
    return [(conn, new) for conn, _, new in conns.waiting()]


def test_new_connections_oldest_first_before_kept_alive_ones_longest_silent_first() -> None:
    conns = Connections()
    for i, name in enumerate(["kept-a", "kept-b", "new-a", "new-b"]):
        conns.accepted(name, float(i))
    for name, answered in (("kept-b", 10.0), ("kept-a", 11.0)):
        conns.requested(name)
        conns.answered(name, answered)
    assert order(conns) == [("new-a", True), ("new-b", True), ("kept-b", False), ("kept-a", False)]
    assert len(conns) == 4


def test_a_busy_connection_is_never_offered_and_a_closed_one_not_revived() -> None:
    conns = Connections()
    conns.accepted("busy", 0.0)
    conns.accepted("idle", 1.0)
    conns.requested("busy")
    assert order(conns) == [("idle", True)]
    conns.closed("busy")  # shut under its handler, which then writes its answer
    conns.answered("busy", 2.0)
    assert order(conns) == [("idle", True)]
    assert len(conns) == 1


def test_a_connection_answered_again_moves_to_the_end() -> None:
    conns = Connections()
    for name in ("a", "b"):
        conns.accepted(name, 0.0)
        conns.requested(name)
        conns.answered(name, 1.0)
    conns.requested("a")
    conns.answered("a", 2.0)
    assert [(c, since) for c, since, _ in conns.waiting()] == [("b", 1.0), ("a", 2.0)]
