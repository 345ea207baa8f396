"""pytest plugin (loaded by scripts/test.sh with `-p`): bound Hypothesis for the test command.

Registers and loads the "vyre-test" profile at import, before conftest files load, so a
conftest or `--hypothesis-profile` can still override it. Limits come from the environment:
VYRE_HYPOTHESIS_MAX_EXAMPLES (default 50); under CI=true examples are derandomized so CI is
reproducible. Every phase runs but `explain`: after a failure has been found and shrunk,
it reruns the minimal example under a line tracer to say which parts could vary (minutes
for a case that dispatches a large Program, all of it traced); the failure, its shrunk
example and the blob that replays it are reported without it. It must never change
anything but Hypothesis settings.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

settings.register_profile(
    "vyre-test",
    max_examples=int(os.environ.get("VYRE_HYPOTHESIS_MAX_EXAMPLES", "50")),
    deadline=None,  # shared 2-core CI machines make per-example deadlines flaky
    derandomize=os.environ.get("CI", "").lower() == "true",
    print_blob=True,
    phases=[p for p in Phase if p is not Phase.explain],
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("vyre-test")
