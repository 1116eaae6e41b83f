#!/usr/bin/env python3
"""The outcome of a conformance run from ginkgo's JSON report.

usage: conformance-summary.py [--conformance | --selected] REPORT.json [GINKGO.log]

Counts the specs labelled [NodeConformance] (with --conformance: those labelled
[Conformance] but not [NodeConformance]): passed; failed (also panicked, timed out,
aborted, interrupted); skipped (left out by the run's --skip, or skipped by the spec
itself, e.g. a feature the node does not report). Prints each failure with the first
lines of its message, each spec that skipped itself with its reason, and as the last
line "N passed, M failed, K skipped". Without a report (ginkgo did not get that far) it
prints the log's tail and exits 1.
"""
import json
import sys

FAILED = {"failed", "panicked", "timedout", "aborted", "interrupted"}


def full_text(spec):
    return " ".join([*(spec.get("ContainerHierarchyTexts") or []), spec.get("LeafNodeText", "")])


def counted(text, conformance, selected):
    if selected:
        return True
    if conformance:
        return "[Conformance]" in text and "[NodeConformance]" not in text
    return "[NodeConformance]" in text


def main():
    args = sys.argv[1:]
    conformance = "--conformance" in args
    # --selected: the specs the run's own focus chose (conformance.sh's SPECS), labelled
    # or not; of the others ginkgo reports as skipped, only those that skipped
    # themselves count.
    selected = "--selected" in args
    args = [a for a in args if a not in ("--conformance", "--selected")]
    try:
        with open(args[0]) as f:
            suites = json.load(f)
    except (OSError, ValueError) as e:
        print(f"conformance: no report ({e})", file=sys.stderr)
        if len(args) > 1:
            with open(args[1], errors="replace") as f:
                sys.stderr.write("".join(f.readlines()[-40:]))
        return 1
    passed, failed, skipped, self_skipped = [], [], [], []
    for suite in suites:
        for spec in suite.get("SpecReports") or []:
            if spec.get("LeafNodeType") != "It":
                continue
            text = full_text(spec)
            if not counted(text, conformance, selected):
                continue
            state = spec.get("State", "")
            message = (spec.get("Failure") or {}).get("Message", "").strip()
            if state == "passed":
                passed.append(text)
            elif state in FAILED:
                failed.append((text, message))
            elif selected and not message:
                continue
            else:
                skipped.append(text)
                if message:
                    self_skipped.append((text, message))
    for text, message in sorted(failed):
        print(f"FAILED {text}")
        for line in message.splitlines()[:3]:
            print(f"    {line[:300]}")
    for text, message in sorted(self_skipped):
        print(f"SKIPPED {text}: {message.splitlines()[0][:200]}")
    print(f"{len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
