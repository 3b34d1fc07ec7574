# SPDX-License-Identifier: Apache-2.0
"""prom_check.py - parse gpuqd's metrics text with prometheus_client's parser
(the reference implementation of the text format) and check it.

usage: prom_check.py FILE [NAME{label=value,...}=VALUE ...]

Checks, beyond parsing: every histogram's buckets are cumulative and end in
+Inf equal to _count; the families gpuqd documents are present; each
expectation NAME{labels}=VALUE matches a sample exactly. Exit 0 or 1 with
the reasons on stderr.
"""
import math
import re
import sys

from prometheus_client.parser import text_string_to_metric_families

REQUIRED = [
    "gpuq_build_info", "gpuq_uptime_seconds", "gpuq_draining", "gpuq_sessions",
    "gpuq_sessions_opened", "gpuq_requests", "gpuq_request_duration_seconds",
    "gpuq_in_flight", "gpuq_queue_depth", "gpuq_staging_waiting_sessions",
    "gpuq_received_bytes", "gpuq_sent_bytes", "gpuq_read_yields", "gpuq_pinned_bytes_in_use",
    "gpuq_pinned_bytes_allocated", "gpuq_pinned_bytes_limit", "gpuq_device_memory_bytes",
    "gpuq_device_memory_used_bytes", "gpuq_device_sessions", "gpuq_device_in_flight",
    "gpuq_device_bytes",
]


def main():
    text = open(sys.argv[1]).read()
    fails = []
    try:
        fams = list(text_string_to_metric_families(text))
    except Exception as e:  # the parser's own complaint is the finding
        print(f"prom_check: not valid Prometheus text: {e}", file=sys.stderr)
        return 1
    byname = {f.name: f for f in fams}
    for name in REQUIRED:
        if name not in byname:
            fails.append(f"family {name} missing")
    samples = {}
    for f in fams:
        for s in f.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            if key in samples:
                fails.append(f"duplicate sample {s.name}{s.labels}")
            samples[key] = s.value
        if f.type == "histogram":
            series = {}
            for s in f.samples:
                if s.name.endswith("_bucket"):
                    lab = {k: v for k, v in s.labels.items() if k != "le"}
                    series.setdefault(tuple(sorted(lab.items())), []).append(
                        (float(s.labels["le"]), s.value))
            for lab, buckets in series.items():
                les = [b[0] for b in buckets]
                vals = [b[1] for b in buckets]
                if les != sorted(les) or not math.isinf(les[-1]):
                    fails.append(f"{f.name}{dict(lab)}: buckets not ordered or no +Inf")
                if any(b > a for a, b in zip(vals[1:], vals[:-1])):
                    fails.append(f"{f.name}{dict(lab)}: buckets not cumulative {vals}")
                cnt = samples.get((f.name + "_count", lab))
                if cnt != vals[-1]:
                    fails.append(f"{f.name}{dict(lab)}: +Inf {vals[-1]} != _count {cnt}")
    for exp in sys.argv[2:]:
        m = re.fullmatch(r"([a-z_]+)(?:\{(.*)\})?=(.+)", exp)
        if not m:
            fails.append(f"bad expectation {exp!r}")
            continue
        name, labs, want = m.group(1), m.group(2), m.group(3)
        lab = {}
        if labs:
            for part in labs.split(","):
                k, v = part.split("=", 1)
                lab[k] = v
        key = (name, tuple(sorted(lab.items())))
        got = samples.get(key)
        if want == "present":
            if got is None:
                fails.append(f"{name}{lab} absent")
        elif want.startswith(">="):
            if got is None or got < float(want[2:]):
                fails.append(f"{name}{lab} = {got}, want {want}")
        elif got is None or got != float(want):
            fails.append(f"{name}{lab} = {got}, want {want}")
    for f in fails:
        print("prom_check: " + f, file=sys.stderr)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
