"""pytest plugin (loaded by scripts/test.sh with `-p`): bound Hypothesis for the test command.

Registers and loads the "vyre-test" profile at import, before conftest files load, so a
conftest or `--hypothesis-profile` can still override it. Limits come from the environment:
VYRE_HYPOTHESIS_MAX_EXAMPLES (default 50); under CI=true examples are derandomized so CI is
reproducible. It must never change anything but Hypothesis settings.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "vyre-test",
    max_examples=int(os.environ.get("VYRE_HYPOTHESIS_MAX_EXAMPLES", "50")),
    deadline=None,  # shared 2-core CI machines make per-example deadlines flaky
    derandomize=os.environ.get("CI", "").lower() == "true",
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("vyre-test")
