"""Run by test_gevent: live state inside a gevent-patched process, as in a gunicorn gevent worker."""

from gevent import monkey

monkey.patch_all()

import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import gevent  # noqa: E402

from rules.policy import default_policy  # noqa: E402
from testkit.fakeapi import running_fake_api  # noqa: E402
from tests.state.conftest import fast_options  # noqa: E402
from tests.state.objects import pod, pvc  # noqa: E402
from webhook.runtime import Runtime  # noqa: E402
from webhook.state.apisource import load_configuration  # noqa: E402
from webhook.state.live import LiveClusterState  # noqa: E402


def main(workdir: Path) -> None:
    with running_fake_api(*(pod(f"p{i}", claim="data") for i in range(3000)), pvc("data")) as api:
        configuration, _ = load_configuration(api.write_kubeconfig(workdir / "kubeconfig"))
        state = LiveClusterState(configuration, fast_options(page_size=1000))
        runtime = Runtime(policy=default_policy(), view=state)
        state.attach(runtime, base=(default_policy(), "embedded default"))
        gaps: list[float] = []

        def heartbeat() -> None:  # what the worker's request greenlets need: the hub keeps turning
            last = time.monotonic()
            while True:
                gevent.sleep(0.01)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        beat = gevent.spawn(heartbeat)
        state.start()
        deadline = time.monotonic() + 20
        while not runtime.ready():
            assert time.monotonic() < deadline, runtime.readiness()
            gevent.sleep(0.02)
        assert len(state.pods_using_claim("apps", "data")) == 3000
        api.create(pod("late", claim="data"))
        while len(state.pods_using_claim("apps", "data")) != 3001:
            assert time.monotonic() < deadline
            gevent.sleep(0.02)
        beat.kill()
        state.stop()
        print(f"ok max-gap={max(gaps):.3f}", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
