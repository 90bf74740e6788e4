"""One scenario per module; each ``run(context)`` returns its rows of figures."""

from __future__ import annotations

from collections.abc import Callable

from benchmarks.scenarios import (
    adopt_large,
    ansible_playbook,
    apply_rate_limit,
    gateway,
    gateway_apache,
    gateway_haproxy,
    http_layer,
    load_latency,
    plan_cpu,
    plan_huge,
    plan_large,
    plan_latency,
    plan_short_tokens,
    resend_limit,
    startup,
    validate_large,
    validate_policies,
)
from benchmarks.scenarios.common import Context
from benchmarks.targets import Row

Scenario = Callable[[Context], list[Row]]

# name -> (letter, scenario), in the order they run
SCENARIOS: dict[str, tuple[str, Scenario]] = {
    "startup": ("0", startup.run),
    "validate-large": ("v", validate_large.run),
    "validate-policies": ("p", validate_policies.run),
    "plan-large": ("m", plan_large.run),
    "plan-huge": ("h", plan_huge.run),
    "plan-cpu": ("c", plan_cpu.run),
    "plan-latency": ("a", plan_latency.run),
    "apply-rate-limit": ("b", apply_rate_limit.run),
    "gateway": ("g", gateway.run),
    "gateway-haproxy": ("k", gateway_haproxy.run),
    "gateway-apache": ("e", gateway_apache.run),
    "resend-limit": ("r", resend_limit.run),
    "load-latency": ("l", load_latency.run),
    "http-layer": ("x", http_layer.run),
    "plan-short-tokens": ("t", plan_short_tokens.run),
    "adopt-large": ("d", adopt_large.run),
    "ansible": ("n", ansible_playbook.run),
    "ansible-near": ("q", ansible_playbook.run_near),
}
