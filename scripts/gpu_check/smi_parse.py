"""Parsers for nvidia-smi's output, the independent reference of scripts/gpu-check.sh.

Only the Python standard library is used (the GPU machine has nothing else we can count on).
Every parser takes text and returns plain dicts and lists; a value nvidia-smi prints as "N/A" (or
any reading it could not take) becomes None, never a made-up number.

  parse_smi_xml(text)        `nvidia-smi -q -x` (DTD nvsmi_device_v12 / v13)
  parse_topo_matrix(text)    `nvidia-smi topo -m`
  parse_smi_list(text)       `nvidia-smi -L` (GPU and MIG device UUIDs, MIG profiles)
  parse_nvlink_status(text)  `nvidia-smi nvlink -s`
  parse_prometheus(text)     the text exposition format (`tessera gpus -o prometheus`)
"""

import re
import xml.etree.ElementTree as ET

# nvidia-smi's names for the clock event (formerly throttle) reasons, and NVML's
# nvmlClocksEventReason* bit for each.
CLOCK_EVENT_BITS = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clocks_setting": 0x100,
}


def _text(el, path):
    """Stripped text at `path` under `el`; None when absent, empty or not a reading."""
    if el is None:
        return None
    node = el.find(path)
    if node is None or node.text is None:
        return None
    t = node.text.strip()
    if t == "" or t == "N/A" or t.startswith("Requested functionality") or t.startswith("Unknown"):
        return None
    return t


def _number(el, path):
    """The leading number of "143771 MiB", "76.42 W", "29 C", "0 %"; None when not a reading."""
    t = _text(el, path)
    if t is None:
        return None
    m = re.match(r"^(-?[0-9]+(?:\.[0-9]+)?)", t)
    if not m:
        return None
    v = float(m.group(1))
    return int(v) if v.is_integer() else v


def _mode(el, path):
    """"Enabled"/"Disabled" -> True/False; None for "N/A"."""
    t = _text(el, path)
    if t is None:
        return None
    return t.lower() == "enabled"


def _yes_no(el, path):
    t = _text(el, path)
    if t is None:
        return None
    return t.lower() == "yes"


def _memory(el):
    if el is None:
        return None
    return {k: _number(el, k) for k in ("total", "reserved", "used", "free")}


def _ecc_total(section, kind):
    """Sum over memory locations of one counter kind ("correctable" or "uncorrectable").

    v12 lists sram_correctable, sram_uncorrectable, dram_correctable, dram_uncorrectable; v13
    splits SRAM uncorrectable into _parity and _secded. NVML's nvmlDeviceGetTotalEccErrors is the
    total over locations. None when nvidia-smi has no reading at all.
    """
    if section is None:
        return None
    total, seen = 0, False
    for child in section:
        tag = child.tag
        if not (tag.startswith("sram_") or tag.startswith("dram_")):
            continue
        rest = tag.split("_", 1)[1]
        if kind == "correctable" and rest != "correctable":
            continue
        if kind == "uncorrectable" and not rest.startswith("uncorrectable"):
            continue
        if tag == "sram_uncorrectable" and section.find("sram_uncorrectable_parity") is not None:
            continue  # both spellings present: count the split ones only
        v = _number(section, tag)
        if v is not None:
            total += v
            seen = True
    return total if seen else None


def _clock_events(gpu):
    """Bitmask of active clock event reasons; None when nvidia-smi reports none."""
    for section, prefix in (
        ("clocks_event_reasons", "clocks_event_reason_"),
        ("clocks_throttle_reasons", "clocks_throttle_reason_"),
    ):
        el = gpu.find(section)
        if el is None:
            continue
        mask, seen = 0, False
        for name, bit in CLOCK_EVENT_BITS.items():
            t = _text(el, prefix + name)
            if t is None:
                continue
            seen = True
            if t.lower() == "active":
                mask |= bit
        return mask if seen else None
    return None


def _power(gpu):
    """Power readings: average (what nvmlDeviceGetPowerUsage returns on Hopper), instant, limit."""
    el = gpu.find("gpu_power_readings")
    if el is None:
        el = gpu.find("power_readings")  # drivers before 535
    if el is None:
        return {"average_w": None, "instant_w": None, "draw_w": None, "limit_w": None}
    return {
        "average_w": _number(el, "average_power_draw"),
        "instant_w": _number(el, "instant_power_draw"),
        "draw_w": _number(el, "power_draw"),
        "limit_w": _number(el, "current_power_limit") or _number(el, "power_limit"),
    }


def _mig_devices(gpu):
    out = []
    el = gpu.find("mig_devices")
    if el is None:
        return out
    for d in el.findall("mig_device"):
        out.append(
            {
                "index": _number(d, "index"),
                "gpu_instance_id": _number(d, "gpu_instance_id"),
                "compute_instance_id": _number(d, "compute_instance_id"),
                "memory": _memory(d.find("fb_memory_usage")),
            }
        )
    return out


def _remapped_rows(gpu):
    el = gpu.find("remapped_rows")
    if el is None or len(el) == 0:
        return None  # "N/A": no row remapping on this GPU
    return {
        "correctable": _number(el, "remapped_row_corr"),
        "uncorrectable": _number(el, "remapped_row_unc"),
        "pending": _yes_no(el, "remapped_row_pending"),
        "failure": _yes_no(el, "remapped_row_failure"),
    }


def parse_smi_xml(text):
    """`nvidia-smi -q -x` -> {driver_version, cuda_version, attached_gpus, timestamp, gpus[]}.

    GPUs come in nvidia-smi's order, which is NVML's enumeration order (the index).
    The document's DOCTYPE names an external DTD that is neither fetched nor needed.
    """
    root = ET.fromstring(text)
    if root.tag != "nvidia_smi_log":
        raise ValueError("not nvidia-smi -q -x output (root <%s>)" % root.tag)
    gpus = []
    for index, g in enumerate(root.findall("gpu")):
        pci = g.find("pci")
        util = g.find("utilization")
        temp = g.find("temperature")
        clocks = g.find("clocks")
        ecc = g.find("ecc_errors")
        gpus.append(
            {
                "index": index,
                "id": g.get("id"),
                "name": _text(g, "product_name"),
                "uuid": _text(g, "uuid"),
                "minor": _number(g, "minor_number"),
                "pci_bus_id": _text(pci, "pci_bus_id"),
                "pci_device_id": _text(pci, "pci_device_id"),
                "mig_mode": {"current": _mode(g, "mig_mode/current_mig"),
                             "pending": _mode(g, "mig_mode/pending_mig")},
                "mig_devices": _mig_devices(g),
                "ecc_mode": {"current": _mode(g, "ecc_mode/current_ecc"),
                             "pending": _mode(g, "ecc_mode/pending_ecc")},
                "memory": _memory(g.find("fb_memory_usage")),
                "util_gpu": _number(util, "gpu_util"),
                "util_memory": _number(util, "memory_util"),
                "temperature_c": _number(temp, "gpu_temp"),
                "power": _power(g),
                "sm_clock_mhz": _number(clocks, "sm_clock"),
                "mem_clock_mhz": _number(clocks, "mem_clock"),
                "clock_events": _clock_events(g),
                "ecc_volatile": {"correctable": _ecc_total(ecc.find("volatile") if ecc is not None
                                                           else None, "correctable"),
                                 "uncorrectable": _ecc_total(ecc.find("volatile") if ecc is not None
                                                             else None, "uncorrectable")},
                "ecc_aggregate": {"correctable": _ecc_total(ecc.find("aggregate") if ecc is not None
                                                            else None, "correctable"),
                                  "uncorrectable": _ecc_total(ecc.find("aggregate")
                                                              if ecc is not None else None,
                                                              "uncorrectable")},
                "remapped_rows": _remapped_rows(g),
            }
        )
    return {
        "timestamp": _text(root, "timestamp"),
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "attached_gpus": _number(root, "attached_gpus"),
        "gpus": gpus,
    }


def parse_topo_matrix(text):
    """`nvidia-smi topo -m` -> {"gpus": ["GPU0", ...], "matrix": {"GPU0": {"GPU1": "NV18"}},
    "numa_affinity": {"GPU0": 0 or None}, "cpu_affinity": {...}}.

    Columns are tab-separated; NIC rows and columns are ignored; the legend is skipped. The
    header is underlined with terminal escapes (also when piped), which are dropped.
    """
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    lines = [l for l in text.splitlines() if l.strip()]
    header = None
    for l in lines:
        # The header is indented (the row names' column is empty); rows start with their name.
        if "\t" in l and l[0] in " \t" and re.search(r"\bGPU0\b", l):
            header = [c.strip() for c in l.split("\t") if c.strip()]
            break
    if header is None:
        # One GPU and no tabs would be unusual; be explicit rather than guess.
        raise ValueError("no header line with GPU0 in nvidia-smi topo -m output")
    gpu_cols = [c for c in header if re.fullmatch(r"GPU[0-9]+", c)]
    out = {"gpus": gpu_cols, "matrix": {}, "numa_affinity": {}, "cpu_affinity": {}}
    for l in lines:
        cells = [c.strip() for c in l.split("\t") if c.strip()]
        if not cells or not re.fullmatch(r"GPU[0-9]+", cells[0]):
            continue
        row, values = cells[0], cells[1:]
        named = dict(zip(header, values))
        out["matrix"][row] = {c: named.get(c) for c in gpu_cols}
        numa = named.get("NUMA Affinity")
        out["numa_affinity"][row] = int(numa) if numa and re.fullmatch(r"[0-9]+", numa) else None
        out["cpu_affinity"][row] = named.get("CPU Affinity")
    return out


def parse_smi_list(text):
    """`nvidia-smi -L` -> [{"index", "name", "uuid", "mig": [{"profile", "device", "uuid"}]}]."""
    gpus = []
    for l in text.splitlines():
        m = re.match(r"^GPU (\d+): (.*) \(UUID: (GPU-[^)]+)\)\s*$", l)
        if m:
            gpus.append({"index": int(m.group(1)), "name": m.group(2), "uuid": m.group(3),
                         "mig": []})
            continue
        m = re.match(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)]+)\)\s*$", l)
        if m and gpus:
            gpus[-1]["mig"].append({"profile": m.group(1), "device": int(m.group(2)),
                                    "uuid": m.group(3)})
    return gpus


def parse_nvlink_status(text):
    """`nvidia-smi nvlink -s` -> {gpu index: {link: active(bool)}}; a GPU listed without links
    has none. Inactive links print as "<inactive>"."""
    out, current = {}, None
    for l in text.splitlines():
        m = re.match(r"^GPU (\d+):", l)
        if m:
            current = int(m.group(1))
            out[current] = {}
            continue
        m = re.match(r"^\s+Link (\d+): (.*)$", l)
        if m and current is not None:
            out[current][int(m.group(1))] = "inactive" not in m.group(2).lower()
    return out


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text):
    """Text exposition format -> [{"name", "labels": {..}, "value": float}] (comments skipped)."""
    out = []
    for l in text.splitlines():
        if not l or l.startswith("#"):
            continue
        m = _SAMPLE.match(l)
        if not m:
            raise ValueError("not a sample line: %r" % l)
        labels = {}
        if m.group(3):
            for k, v in _LABEL.findall(m.group(3)):
                labels[k] = v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        out.append({"name": m.group(1), "labels": labels, "value": float(m.group(4))})
    return out
