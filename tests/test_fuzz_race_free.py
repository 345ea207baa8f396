"""The fuzzer's generator draws no races (issue 30, item 5): its Programs promise results
independent of scheduling (vyre.tools.fuzz's docstring), so a bounded sample must run on
the reference's checked mode without a race, an atomic mixed with plain accesses, a read
of never-written workgroup memory or a divergent barrier. Accesses past the end of a
buffer are drawn on purpose (the IR defines them), so bounds findings are off here."""

from __future__ import annotations

import os

from hypothesis import given, settings

from vyre.backends.reference import ReferenceBackend
from vyre.backends.reference.checked import CheckSetting
from vyre.tools.fuzz import FuzzCase, cases, operator_cases, options_for

CHECKED = ReferenceBackend(check=CheckSetting(mode="error", bounds="off"))
EXAMPLES = int(os.environ.get("VYRE_FUZZ_RACE_EXAMPLES", "12"))  # 150 ran clean (issue 30)


@settings(settings.get_profile("ci"), max_examples=EXAMPLES, deadline=None)
@given(cases(options_for([CHECKED])))
def test_generated_programs_are_race_free(case: FuzzCase) -> None:
    CHECKED.dispatch(case.program, case.inputs, case.config)  # raises DispatchError on a finding
    report = CHECKED.last_check_report
    assert report is not None and report.ok, str(report)


@settings(settings.get_profile("ci"), max_examples=max(2, EXAMPLES // 4), deadline=None)
@given(operator_cases(options_for([CHECKED])))
def test_operator_sweep_programs_are_race_free(case: FuzzCase) -> None:
    """The operator sweep's Programs (every operator on every type, one store per result
    at the invocation's own slot) too."""
    CHECKED.dispatch(case.program, case.inputs, case.config)
    report = CHECKED.last_check_report
    assert report is not None and report.ok, str(report)
