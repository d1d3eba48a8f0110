# SPDX-License-Identifier: BSD-3-Clause
"""How hard the model-based tests and history checkers work.

`make test` runs them bounded (a few dozen examples each, well under a minute per
file); `make soak` sets MC_SOAK=1 and they run many more examples and longer
histories. Every such test takes its sizes from here, so one switch scales them all.

    from soak import SOAK, scaled, model_settings
    @model_settings()                       # hypothesis settings for a state machine
    class LockModel(RuleBasedStateMachine): ...
    rounds = scaled(200, 5000)              # a history length: bounded, soak
"""

import os

from hypothesis import HealthCheck, Phase, settings

SOAK = os.environ.get("MC_SOAK", "") not in ("", "0")


def scaled(bounded, soak):
    """`bounded` under make test, `soak` under make soak (MC_SOAK=1)."""
    return soak if SOAK else bounded


def model_settings(examples=25, steps=40, soak_examples=400, soak_steps=80):
    """hypothesis settings for a RuleBasedStateMachine that drives a real server:
    no deadline (a step waits for server state), no example database (the
    checkout stays clean), health checks that time steps off. Shrinking a
    failure against a live server can take many minutes: it runs only with
    MC_SHRINK=1 (the failing steps are printed either way)."""
    phases = [Phase.explicit, Phase.reuse, Phase.generate]
    if os.environ.get("MC_SHRINK", "") not in ("", "0"):
        phases.append(Phase.shrink)
    return settings(phases=phases, max_examples=scaled(examples, soak_examples),
                    stateful_step_count=scaled(steps, soak_steps),
                    deadline=None, database=None, derandomize=not SOAK,
                    suppress_health_check=list(HealthCheck), print_blob=True)
