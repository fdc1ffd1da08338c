#!/usr/bin/env python3
"""The report of scripts/gpu-check.sh: one JSON object from the files a run collected.

  gpucheck.py report --dir RUN_DIR [--out FILE]   compare; exit 1 on any mismatch or error
  gpucheck.py skip --reason TEXT                  a machine without a driver: exit 0
  gpucheck.py abort --reason TEXT                 the check could not run: exit 1
  gpucheck.py expected-resources --dir RUN_DIR    how many resources the device plugin should
                                                  register (from nvidia-smi), for the probe

RUN_DIR holds what gpu-check.sh wrote (a recorded run is the same, see testdata/):
  steps.tsv  notes.txt  load.tsv   each command's exit code; notes; the load ("kind<TAB>detail")
  smi-idle-before.xml  tessera-gpus.json  smi-idle-after.xml     identity and idle readings
  topo.txt  smi-list.txt  nvlink-status.txt                      topology, MIG UUIDs, links
  smi-load-before.xml  dcgm.prom  smi-load-after.xml             DCGM metrics under the load
  deviceplugin.json  dev-nodes.txt                               kubelet's view; /dev/nvidia*
  health-watch.txt                                               60 s of events and health
A missing input is an "error" check (and fails the run), never a silent pass.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import compare  # noqa: E402
import smi_parse  # noqa: E402

SCHEMA = "tessera.gpu-check/v1"


def _read(run_dir, name):
    path = os.path.join(run_dir, name)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def _error(area, field, note):
    return compare.check(area, None, field, None, None, "error", note)


def _lines(run_dir, name):
    return [l for l in (_read(run_dir, name) or "").splitlines() if l.strip()]


def build_report(run_dir):
    checks = []
    notes = _lines(run_dir, "notes.txt")
    steps = {}
    for l in _lines(run_dir, "steps.tsv"):
        name, _, rc = l.rpartition("\t")
        steps[name] = int(rc) if rc.lstrip("-").isdigit() else rc
    load = None
    for l in _lines(run_dir, "load.tsv")[:1]:
        kind, _, detail = l.partition("\t")
        load = {"kind": kind, "detail": detail}

    def parsed(name, parser, area):
        text = _read(run_dir, name)
        if text is None:
            checks.append(_error(area, name, "not collected"))
            return None
        try:
            return parser(text)
        except (ValueError, SyntaxError) as e:  # xml.etree's ParseError is a SyntaxError
            checks.append(_error(area, name, "cannot parse: %s" % e))
            return None

    idle_before = parsed("smi-idle-before.xml", smi_parse.parse_smi_xml, "gpus")
    idle_after = parsed("smi-idle-after.xml", smi_parse.parse_smi_xml, "gpus")
    tessera = parsed("tessera-gpus.json", json.loads, "gpus")
    topo = parsed("topo.txt", smi_parse.parse_topo_matrix, "topology")
    listing = parsed("smi-list.txt", smi_parse.parse_smi_list, "gpus")
    nvlink = None
    if _read(run_dir, "nvlink-status.txt") is not None:
        nvlink = smi_parse.parse_nvlink_status(_read(run_dir, "nvlink-status.txt"))
    else:
        notes.append("nvidia-smi nvlink -s gave nothing: NVLink states not compared")
    if idle_before and idle_after and tessera is not None:
        checks += compare.compare_gpus(tessera, idle_before, idle_after, topo, listing, nvlink)

    load_before = parsed("smi-load-before.xml", smi_parse.parse_smi_xml, "dcgm")
    load_after = parsed("smi-load-after.xml", smi_parse.parse_smi_xml, "dcgm")
    samples = parsed("dcgm.prom", smi_parse.parse_prometheus, "dcgm")
    if load_before and load_after and samples is not None:
        checks += compare.compare_dcgm(samples, load_before, load_after)

    probe = parsed("deviceplugin.json", json.loads, "device-plugin")
    dev_nodes = (_read(run_dir, "dev-nodes.txt") or "").split()
    if probe is not None and idle_before:
        checks += compare.compare_deviceplugin(probe, idle_before, listing, set(dev_nodes))

    watch = _read(run_dir, "health-watch.txt")
    if watch is None:
        checks.append(_error("health", "health-watch.txt", "not collected"))
    elif idle_before:
        checks += compare.check_health(watch, idle_before)

    counts = {}
    for c in checks:
        counts[c["result"]] = counts.get(c["result"], 0) + 1
    failed = counts.get("mismatch", 0) + counts.get("error", 0)
    machine = {}
    if idle_before:
        machine = {
            "driver_version": idle_before["driver_version"],
            "cuda_version": idle_before["cuda_version"],
            "gpus": [g["name"] for g in idle_before["gpus"]],
            "nvidia_smi_timestamp": idle_before["timestamp"],
        }
    return {
        "schema": SCHEMA,
        "status": "fail" if failed else "pass",
        "machine": machine,
        "load": load,
        "steps": steps,
        "summary": counts,
        "mismatches": [c for c in checks if c["result"] in ("mismatch", "error")],
        "explained": [c for c in checks if c["result"] == "explained"],
        "notes": notes,
        "checks": checks,
    }


def skip_report(reason):
    return {"schema": SCHEMA, "status": "skipped", "reason": reason}


def abort_report(reason):
    return {"schema": SCHEMA, "status": "fail", "reason": reason}


def expected_resources(run_dir):
    """Resources NVIDIA's mixed strategy gives this machine: nvidia.com/gpu when a GPU is not in
    MIG mode, one per MIG profile otherwise."""
    smi = smi_parse.parse_smi_xml(_read(run_dir, "smi-idle-before.xml"))
    listing = smi_parse.parse_smi_list(_read(run_dir, "smi-list.txt") or "")
    names = set()
    for i, g in enumerate(smi["gpus"]):
        if not g["mig_mode"]["current"]:
            names.add("nvidia.com/gpu")
        elif i < len(listing):
            names.update(compare.nvidia_mig_resource(m["profile"]) for m in listing[i]["mig"])
    return len(names)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("report")
    r.add_argument("--dir", required=True)
    r.add_argument("--out")
    for name in ("skip", "abort"):
        s = sub.add_parser(name)
        s.add_argument("--reason", required=True)
        s.add_argument("--out")
    e = sub.add_parser("expected-resources")
    e.add_argument("--dir", required=True)
    a = p.parse_args(argv)
    if a.cmd == "expected-resources":
        print(expected_resources(a.dir))
        return 0
    if a.cmd == "report":
        rep = build_report(a.dir)
    elif a.cmd == "skip":
        rep = skip_report(a.reason)
    else:
        rep = abort_report(a.reason)
    text = json.dumps(rep, indent=2, sort_keys=False)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(text)
    return 1 if rep["status"] == "fail" else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
