"""Comparisons of what Tessera reports with nvidia-smi's readings (scripts/gpu-check.sh).

Each function returns a list of checks, dicts:
  {"area", "gpu", "field", "tessera", "nvidia_smi", "result", "note"}
where result is one of
  "match"      equal (static fields) or within the stated tolerance (readings);
  "mismatch"   differs: a defect to fix (the script then exits non-zero);
  "explained"  differs for a stated, known reason that is not a defect (note says why);
  "error"      a step of the check did not produce its input.
Readings that change from one moment to the next (power, temperature, utilization, clocks, used
memory) are taken by nvidia-smi just before and just after Tessera's reading: Tessera's value
must lie within [min, max] of the two, widened by the tolerance. Pure functions of their inputs.
"""

MIB = 1024 * 1024

# nvidia-smi topo -m codes and the link class / PCIe level Tessera reports for the same pair.
TOPO_CODES = {
    "PIX": ("pcie-switch", "SINGLE"),
    "PXB": ("pcie-switch", "MULTIPLE"),
    "PHB": ("host-bridge", "HOSTBRIDGE"),
    "NODE": ("host-bridge", "NODE"),
    "SYS": ("cross-numa", "SYSTEM"),
}


def check(area, gpu, field, tessera, smi, result, note=""):
    return {"area": area, "gpu": gpu, "field": field, "tessera": tessera, "nvidia_smi": smi,
            "result": result, "note": note}


def _exact(area, gpu, field, tessera, smi, note=""):
    return check(area, gpu, field, tessera, smi, "match" if tessera == smi else "mismatch", note)


def _within(area, gpu, field, tessera, readings, tol_abs, tol_rel=0.0, note=""):
    """`tessera` within [min, max] of nvidia-smi's `readings` widened by max(abs, rel * max)."""
    vals = [r for r in readings if r is not None]
    if not vals:
        if tessera is None:
            return check(area, gpu, field, None, None, "match", "neither reports it")
        return check(area, gpu, field, tessera, None, "explained",
                     "nvidia-smi has no reading (N/A) on this GPU")
    if tessera is None:
        return check(area, gpu, field, None, vals, "mismatch", "Tessera has no reading")
    lo, hi = min(vals), max(vals)
    tol = max(tol_abs, tol_rel * abs(hi))
    ok = lo - tol <= tessera <= hi + tol
    bracket = vals[0] if len(vals) == 1 else vals
    return check(area, gpu, field, tessera, bracket, "match" if ok else "mismatch",
                 note or "tolerance +-%g" % tol)


def _mib(b):
    return None if b is None else b // MIB


def _power_readings(smi_gpu):
    """The reading nvmlDeviceGetPowerUsage corresponds to: the 1 s average on Hopper and newer
    (average_power_draw, v13 schema), else power_draw; instant as a fallback."""
    p = smi_gpu["power"]
    for k in ("average_w", "draw_w", "instant_w"):
        if p.get(k) is not None:
            return p[k]
    return None


def compare_gpus(tessera, smi_before, smi_after, topo=None, listing=None, nvlink=None):
    """`tessera gpus --backend nvml -o json` against nvidia-smi (identity, configuration,
    topology and the readings in the snapshot)."""
    out = []
    area = "gpus"
    tg, sg, sa = tessera.get("gpus", []), smi_before["gpus"], smi_after["gpus"]
    out.append(_exact(area, None, "count", len(tg), len(sg)))
    out.append(_exact(area, None, "driver_version", tessera.get("driver_version"),
                      smi_before["driver_version"]))
    out.append(_exact(area, None, "cuda_version", tessera.get("cuda_driver_version") or None,
                      smi_before["cuda_version"]))
    for i, s in enumerate(sg):
        if i >= len(tg):
            break
        t = tg[i]
        if t.get("error"):
            out.append(check(area, i, "query", t["error"], "answers", "mismatch",
                             "Tessera could not query a GPU nvidia-smi reads"))
            continue
        after = sa[i] if i < len(sa) else s
        out.append(_exact(area, i, "uuid", t.get("uuid"), s["uuid"]))
        out.append(_exact(area, i, "name", t.get("name"), s["name"]))
        out.append(_exact(area, i, "pci_bus_id", (t.get("pci_bus_id") or "").upper() or None,
                          (s["pci_bus_id"] or "").upper() or None))
        out.append(_exact(area, i, "minor_number", t.get("minor"), s["minor"]))
        mem, smem = t.get("memory") or {}, s["memory"] or {}
        tot = _mib(mem.get("total_bytes"))
        out.append(_within(area, i, "memory.total_mib", tot, [smem.get("total")], 1,
                           note="MiB, rounding"))
        out.append(_within(area, i, "memory.reserved_mib", _mib(mem.get("reserved_bytes")),
                           [smem.get("reserved")], 1, note="MiB, rounding"))
        out.append(_within(area, i, "memory.used_mib", _mib(mem.get("used_bytes")),
                           [smem.get("used"), (after["memory"] or {}).get("used")], 1,
                           note="MiB, between the two nvidia-smi readings"))
        # MIG mode: nvidia-smi N/A (no MIG on this GPU) is Tessera's null.
        tm = t.get("mig")
        t_mig = None if tm is None else {"current": tm.get("enabled"), "pending": tm.get("pending")}
        s_mig = None if s["mig_mode"]["current"] is None else s["mig_mode"]
        out.append(_exact(area, i, "mig_mode", t_mig, s_mig))
        out.extend(_compare_mig(i, t, s, listing))
        te = t.get("ecc_mode")
        t_ecc = None if te is None else {"current": te.get("enabled"), "pending": te.get("pending")}
        s_ecc = None if s["ecc_mode"]["current"] is None else s["ecc_mode"]
        out.append(_exact(area, i, "ecc_mode", t_ecc, s_ecc))
        out.extend(_compare_readings(area, i, t.get("metrics") or {}, s, after))
        if topo is not None:
            name = "GPU%d" % i
            numa = topo["numa_affinity"].get(name)
            out.append(_exact(area, i, "numa_node", t.get("numa_node"), numa,
                              "nvidia-smi topo -m NUMA Affinity"))
        if nvlink is not None:
            t_links = {l["link"]: l["active"] for l in t.get("nvlinks", [])}
            s_links = nvlink.get(i, {})
            if not s_links and t_links and not any(t_links.values()):
                out.append(check(area, i, "nvlinks", t_links, s_links, "explained",
                                 "nvidia-smi lists no links; Tessera's are all inactive"))
            else:
                out.append(_exact(area, i, "nvlinks", t_links, s_links,
                                  "link -> active, nvidia-smi nvlink -s"))
    if topo is not None:
        out.extend(_compare_topology(tessera, topo))
    return out


def _compare_mig(i, t, s, listing):
    """MIG devices: UUIDs and profiles against `nvidia-smi -L`, instance ids and memory against
    the XML's <mig_devices>."""
    out = []
    tm = t.get("mig")
    inst = (tm or {}).get("instances", [])
    if listing is not None and i < len(listing):
        want = sorted((m["uuid"], m["profile"]) for m in listing[i]["mig"])
        got = sorted((m["uuid"], m["profile"]) for m in inst)
        out.append(_exact("gpus", i, "mig_devices(uuid, profile)", got, want, "nvidia-smi -L"))
    want = sorted((d["gpu_instance_id"], d["compute_instance_id"],
                   (d["memory"] or {}).get("total")) for d in s["mig_devices"])
    got = sorted((m.get("gpu_instance_id"), m.get("compute_instance_id"),
                  _mib(m.get("memory_bytes"))) for m in inst)
    out.append(_exact("gpus", i, "mig_devices(gi, ci, total_mib)", got, want,
                      "nvidia-smi -q -x <mig_devices>"))
    return out


def _compare_readings(area, i, m, s, after):
    """Readings Tessera's snapshot (and the DCGM metrics) carry, against the two nvidia-smi
    readings around them."""
    out = [
        _within(area, i, "temperature_c", m.get("temperature_c"),
                [s["temperature_c"], after["temperature_c"]], 2),
        _within(area, i, "power_w", m.get("power_watts"),
                [_power_readings(s), _power_readings(after)], 10, 0.10,
                note="W, 1 s average, +-max(10 W, 10%)"),
        _within(area, i, "utilization.gpu", m.get("gpu_util_percent"),
                [s["util_gpu"], after["util_gpu"]], 10,
                note="%, sampled over different windows: +-10"),
        _within(area, i, "utilization.memory", m.get("mem_copy_util_percent"),
                [s["util_memory"], after["util_memory"]], 10,
                note="%, sampled over different windows: +-10"),
        _within(area, i, "clocks.sm_mhz", m.get("sm_clock_mhz"),
                [s["sm_clock_mhz"], after["sm_clock_mhz"]], 50, 0.10),
        _within(area, i, "clocks.mem_mhz", m.get("mem_clock_mhz"),
                [s["mem_clock_mhz"], after["mem_clock_mhz"]], 50, 0.10),
    ]
    t_ev, b_ev, a_ev = m.get("throttle_reasons"), s["clock_events"], after["clock_events"]
    if b_ev is None and a_ev is None:
        out.append(check(area, i, "clock_event_reasons", t_ev, None,
                         "match" if t_ev is None else "explained",
                         "" if t_ev is None else "nvidia-smi reports none"))
    elif t_ev in (b_ev, a_ev):
        out.append(check(area, i, "clock_event_reasons", t_ev, b_ev, "match"))
    elif b_ev != a_ev:
        out.append(check(area, i, "clock_event_reasons", t_ev, [b_ev, a_ev], "explained",
                         "the reasons changed between the two nvidia-smi readings"))
    else:
        out.append(check(area, i, "clock_event_reasons", t_ev, b_ev, "mismatch", "bit mask"))
    for field, tkey, skey, kind in (
        ("ecc.volatile.correctable", "ecc_sbe_volatile", "ecc_volatile", "correctable"),
        ("ecc.volatile.uncorrectable", "ecc_dbe_volatile", "ecc_volatile", "uncorrectable"),
        ("ecc.aggregate.correctable", "ecc_sbe_aggregate", "ecc_aggregate", "correctable"),
        ("ecc.aggregate.uncorrectable", "ecc_dbe_aggregate", "ecc_aggregate", "uncorrectable"),
    ):
        out.append(_exact(area, i, field, m.get(tkey), s[skey][kind],
                          "sum over SRAM and DRAM locations"))
    rr = s["remapped_rows"]
    if rr is None:
        out.append(_exact(area, i, "remapped_rows", m.get("remapped_rows_correctable"), None,
                          "nvidia-smi N/A: no row remapping"))
    else:
        out.append(_exact(area, i, "remapped_rows.correctable",
                          m.get("remapped_rows_correctable"), rr["correctable"]))
        out.append(_exact(area, i, "remapped_rows.uncorrectable",
                          m.get("remapped_rows_uncorrectable"), rr["uncorrectable"]))
        out.append(_exact(area, i, "remapped_rows.pending", m.get("row_remap_pending"),
                          rr["pending"]))
        out.append(_exact(area, i, "remapped_rows.failure", m.get("row_remap_failure"),
                          rr["failure"]))
    return out


def _compare_topology(tessera, topo):
    """The GPU x GPU matrix against `nvidia-smi topo -m`."""
    out = []
    links = (tessera.get("topology") or {}).get("links") or []
    levels = (tessera.get("topology") or {}).get("pcie_levels") or []
    n = len(topo["gpus"])
    out.append(_exact("topology", None, "size", len(links), n))
    for a in range(min(n, len(links))):
        for b in range(min(n, len(links))):
            code = topo["matrix"]["GPU%d" % a]["GPU%d" % b]
            field = "GPU%d-GPU%d" % (a, b)
            t_link = links[a][b]
            t_level = levels[a][b] if a < len(levels) and b < len(levels[a]) else None
            if code == "X":
                out.append(_exact("topology", None, field, t_link, "self"))
            elif code.startswith("NV"):
                out.append(check("topology", None, field, t_link, code,
                                 "match" if t_link == "nvlink" else "mismatch"))
            elif code in TOPO_CODES:
                want_link, want_level = TOPO_CODES[code]
                ok = t_link == want_link and t_level == want_level
                out.append(check("topology", None, field, [t_link, t_level], code,
                                 "match" if ok else "mismatch",
                                 "expected %s / %s" % (want_link, want_level)))
            else:
                out.append(check("topology", None, field, t_link, code, "error",
                                 "unknown nvidia-smi topology code"))
    return out


# dcgm-exporter field -> (our reading, tolerance) against nvidia-smi.
def compare_dcgm(samples, smi_before, smi_after):
    """`tessera gpus -o prometheus` (dcgm-exporter names) against nvidia-smi readings taken
    just before and just after it."""
    out = []
    by_gpu = {}
    for smp in samples:
        gpu = smp["labels"].get("gpu")
        by_gpu.setdefault(gpu, {})[smp["name"]] = smp
    for i, s in enumerate(smi_before["gpus"]):
        after = smi_after["gpus"][i] if i < len(smi_after["gpus"]) else s
        got = by_gpu.get(str(i))
        if got is None:
            out.append(check("dcgm", i, "samples", None, s["uuid"], "mismatch",
                             "no DCGM_FI_* samples for this GPU"))
            continue
        any_sample = next(iter(got.values()))
        lab = any_sample["labels"]
        out.append(_exact("dcgm", i, "label UUID", lab.get("UUID"), s["uuid"]))
        out.append(_exact("dcgm", i, "label modelName", lab.get("modelName"), s["name"]))
        out.append(_exact("dcgm", i, "label device", lab.get("device"),
                          None if s["minor"] is None else "nvidia%d" % s["minor"]))

        def val(name):
            smp = got.get(name)
            return None if smp is None else smp["value"]

        sm = lambda k: [s[k], after[k]]  # noqa: E731
        mem_used = [(s["memory"] or {}).get("used"), (after["memory"] or {}).get("used")]
        mem_free = [(s["memory"] or {}).get("free"), (after["memory"] or {}).get("free")]
        out += [
            _within("dcgm", i, "DCGM_FI_DEV_GPU_TEMP", val("DCGM_FI_DEV_GPU_TEMP"),
                    sm("temperature_c"), 2),
            _within("dcgm", i, "DCGM_FI_DEV_POWER_USAGE", val("DCGM_FI_DEV_POWER_USAGE"),
                    [_power_readings(s), _power_readings(after)], 10, 0.10),
            _within("dcgm", i, "DCGM_FI_DEV_GPU_UTIL", val("DCGM_FI_DEV_GPU_UTIL"),
                    sm("util_gpu"), 10),
            _within("dcgm", i, "DCGM_FI_DEV_MEM_COPY_UTIL", val("DCGM_FI_DEV_MEM_COPY_UTIL"),
                    sm("util_memory"), 10),
            _within("dcgm", i, "DCGM_FI_DEV_SM_CLOCK", val("DCGM_FI_DEV_SM_CLOCK"),
                    sm("sm_clock_mhz"), 50, 0.10),
            _within("dcgm", i, "DCGM_FI_DEV_MEM_CLOCK", val("DCGM_FI_DEV_MEM_CLOCK"),
                    sm("mem_clock_mhz"), 50, 0.10),
            _within("dcgm", i, "DCGM_FI_DEV_FB_USED", val("DCGM_FI_DEV_FB_USED"), mem_used, 2,
                    note="MiB"),
            _within("dcgm", i, "DCGM_FI_DEV_FB_FREE", val("DCGM_FI_DEV_FB_FREE"), mem_free, 2,
                    note="MiB"),
            _exact("dcgm", i, "DCGM_FI_DEV_XID_ERRORS", val("DCGM_FI_DEV_XID_ERRORS"), 0.0,
                   "no XID on a healthy GPU"),
        ]
        for name, key, kind in (
            ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "ecc_volatile", "correctable"),
            ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "ecc_volatile", "uncorrectable"),
            ("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "ecc_aggregate", "correctable"),
            ("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "ecc_aggregate", "uncorrectable"),
        ):
            want = s[key][kind]
            out.append(_exact("dcgm", i, name, val(name), None if want is None else float(want)))
        rr = s["remapped_rows"]
        if rr is not None:
            out.append(_exact("dcgm", i, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
                              val("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"),
                              float(rr["correctable"])))
            out.append(_exact("dcgm", i, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
                              val("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"),
                              float(rr["uncorrectable"])))
            out.append(_exact("dcgm", i, "DCGM_FI_DEV_ROW_REMAP_FAILURE",
                              val("DCGM_FI_DEV_ROW_REMAP_FAILURE"),
                              1.0 if rr["failure"] else 0.0))
        energy = val("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
        out.append(check("dcgm", i, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", energy, None,
                         "match" if energy is not None and energy > 0 else "mismatch",
                         "nvidia-smi -q has no energy counter; checked present and positive"))
    return out


def nvidia_mig_resource(profile):
    """NVIDIA's k8s-device-plugin name of a MIG profile's resource: "+" becomes "."."""
    return "nvidia.com/mig-" + profile.replace("+", ".")


def compare_deviceplugin(probe, smi, listing, dev_nodes):
    """gpu_check_kubelet's JSON (kubelet's view of `tessera device-plugin --backend nvml`)
    against nvidia-smi: resources, device ids, health, NUMA hints, Allocate's device nodes."""
    out = []
    area = "device-plugin"
    out.append(check(area, None, "protocol", probe.get("errors"), [],
                     "match" if not probe.get("errors") else "mismatch",
                     "registration, ListAndWatch, Allocate, GetPreferredAllocation, SIGTERM"))
    res = probe.get("resources", {})
    want = {}
    for i, g in enumerate(smi["gpus"]):
        if g["mig_mode"]["current"]:
            for m in (listing[i]["mig"] if listing is not None and i < len(listing) else []):
                want.setdefault(nvidia_mig_resource(m["profile"]), set()).add(m["uuid"])
        else:
            want.setdefault("nvidia.com/gpu", set()).add(g["uuid"])
    out.append(_exact(area, None, "resources", sorted(res), sorted(want),
                      "NVIDIA's naming (mixed strategy)"))
    minors = {g["uuid"]: g["minor"] for g in smi["gpus"]}
    for name, r in sorted(res.items()):
        ids = sorted(d["id"] for d in r.get("devices", []))
        out.append(_exact(area, None, name + " devices", ids, sorted(want.get(name, set()))))
        unhealthy = [d["id"] for d in r.get("last_list", r.get("devices", []))
                     if d["health"] != "Healthy"]
        out.append(_exact(area, None, name + " unhealthy", unhealthy, [], "at the end of the watch"))
        out.append(_exact(area, None, name + " lists_received", r.get("lists_received"), 1,
                          "one list, no health change over the watch (no flapping)"))
        alloc = (r.get("allocate") or {}).get("response")
        if alloc is None:
            out.append(check(area, None, name + " allocate", None, "a response", "mismatch"))
            continue
        dev_id = r["allocate"]["device_ids"][0]
        out.append(_exact(area, None, name + " NVIDIA_VISIBLE_DEVICES",
                          alloc["envs"].get("NVIDIA_VISIBLE_DEVICES"), dev_id))
        paths = [d["host_path"] for d in alloc["devices"]]
        missing = [p for p in paths if p not in dev_nodes]
        out.append(_exact(area, None, name + " device nodes exist", missing, [],
                          "every host_path in Allocate exists on the node"))
        if name == "nvidia.com/gpu" and minors.get(dev_id) is not None:
            # The GPU's own node, /dev/nvidia<minor>, is passed exactly when the node has it.
            node = "/dev/nvidia%d" % minors[dev_id]
            want_node = node in dev_nodes
            out.append(check(area, None, name + " gpu device node", paths, node,
                             "match" if (node in paths) == want_node else "mismatch",
                             "present on the node" if want_node else "absent on the node"))
    return out


def check_health(watch_text, smi):
    """`tessera gpus --backend nvml --watch 60s` on a healthy machine: no event, no health
    transition, every GPU healthy at the end."""
    out = []
    tail = watch_text.split("Watching GPU events", 1)
    if len(tail) != 2:
        return [check("health", None, "watch", None, "a watch", "error",
                      "no 'Watching GPU events' in the output")]
    body = tail[1]
    events = [l.strip() for l in body.splitlines() if "  event " in l]
    transitions = [l.strip() for l in body.splitlines() if " -> " in l]
    out.append(_exact("health", None, "events", events, [], "no XID, ECC or lost-GPU event"))
    out.append(_exact("health", None, "transitions", transitions, [], "no flapping"))
    verdicts = {}
    if "Health:" in body:
        for l in body.split("Health:", 1)[1].splitlines():
            parts = l.split()
            if len(parts) >= 2 and parts[0].startswith("GPU-"):
                verdicts[parts[0]] = parts[1]
    for i, g in enumerate(smi["gpus"]):
        out.append(_exact("health", i, "verdict", verdicts.get(g["uuid"]), "healthy"))
    if "delivers no events" in body:
        out.append(check("health", None, "event API", "none", "NVML events", "mismatch",
                         "the backend found no usable NVML event API"))
    return out
