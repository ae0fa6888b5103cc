"""The gunicorn master, with a shutdown that resets none of the connections the kernel has accepted.

The listening sockets are shared by the master and its workers. When the last process holding one closes it,
Linux resets every connection still waiting in its accept queue: handshakes the kernel completed on the server's
behalf, whose clients are already sending their request. gunicorn's master closes its copies and then sends
SIGTERM to the workers, which close theirs, so every shutdown under load reset the connections queued at that
moment (measured: 12 to 16 per SIGTERM under `hey -c 16`).

This master first attaches a socket filter that drops every packet to its TCP listening sockets: from then on no
handshake completes (a client's SYN goes unanswered, and its retransmission a second later finds the port closed
and is refused), while the connections already queued stay queued. Each worker then accepts what is queued,
closes its copy and answers those connections (webhook/serving/worker.py). The filter belongs to the master's shutdown
alone: a worker stopped by itself (a restart) shares the listening sockets with its siblings, which go on
accepting.
"""

from __future__ import annotations

import ctypes
import socket
import struct
from typing import Any

from gunicorn.arbiter import Arbiter
from gunicorn.sock import TCPSocket

SO_ATTACH_FILTER = 26  # Linux, <asm-generic/socket.h>; the socket module does not name it
_DROP_EVERYTHING = struct.pack("HBBI", 0x06, 0, 0, 0)  # classic BPF `ret #0` (BPF_RET|BPF_K): keep 0 bytes


def refuse_handshakes(listener: Any) -> None:
    """Attach a filter that drops every packet to the listening socket (SYNs and handshake ACKs alike).

    The connections already in the accept queue completed their handshakes before the filter existed: they can
    still be accepted, and carry no filter (a connection copies its listener's filter as its handshake completes).
    Raises OSError where the kernel has no socket filters.
    """
    program = ctypes.create_string_buffer(_DROP_EVERYTHING, len(_DROP_EVERYTHING))
    fprog = struct.pack("HP", 1, ctypes.addressof(program))  # struct sock_fprog {len; filter *}; copied by the kernel
    listener.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


class DrainingArbiter(Arbiter):  # type: ignore[misc]
    def stop(self, graceful: bool = True) -> None:
        # Only when the sockets are this master's alone: not under systemd socket activation (systemd keeps them
        # for the next start) and not during a USR2 re-exec (the other master serves on them).
        if self.reexec_pid == self.master_pid == 0 and not self.systemd:
            for listener in self.LISTENERS:
                if isinstance(listener, TCPSocket):
                    try:
                        refuse_handshakes(listener)
                    except OSError as exc:
                        self.log.warning("Connections queued at shutdown may be reset: %s", exc)
        super().stop(graceful)
