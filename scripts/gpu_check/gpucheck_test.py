#!/usr/bin/env python3
"""Tests of gpu-check's comparer without a GPU: a recorded H200 run (testdata/h200, see
testdata/README.md) must pass, and each defect planted in a copy of it must be reported."""

import copy
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import compare  # noqa: E402
import gpucheck  # noqa: E402
import smi_parse  # noqa: E402

FIXTURE = os.path.join(HERE, "testdata", "h200")
UUID = "GPU-3f2a8c41-7b6e-4d19-a0c5-9e1d2b7f4a60"
MIB = 1024 * 1024

# An 8-GPU HGX node as `nvidia-smi topo -m` prints it: underlined header, NICs, NV18 everywhere.
HGX_TOPO = (
    "\t\x1b[4mGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tNIC0\tCPU Affinity\t"
    "NUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    + "".join(
        "GPU%d\t%s\t%s\t%s\t%d\t\tN/A\n"
        % (a, "\t".join(" X " if a == b else "NV18" for b in range(8)), "PIX" if a == 0 else "SYS",
           "0-55,112-167" if a < 4 else "56-111,168-223", 0 if a < 4 else 1)
        for a in range(8))
    + "NIC0\tPIX\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \n\nLegend:\n\n  X    = Self\n")

# `nvidia-smi -L` on an H100 in MIG mode, with a +me profile.
MIG_LIST = (
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaaaaaa-1111-2222-3333-444444444444)\n"
    "  MIG 3g.40gb     Device  0: (UUID: MIG-bbbbbbbb-1111-2222-3333-444444444444)\n"
    "  MIG 1g.10gb+me  Device  1: (UUID: MIG-cccccccc-1111-2222-3333-444444444444)\n"
    "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-dddddddd-1111-2222-3333-444444444444)\n")


class Run:
    """A writable copy of the recorded run."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="gpucheck-test-")
        for name in os.listdir(FIXTURE):
            shutil.copy(os.path.join(FIXTURE, name), self.dir)

    def json(self, name):
        with open(os.path.join(self.dir, name)) as f:
            return json.load(f)

    def write_json(self, name, value):
        with open(os.path.join(self.dir, name), "w") as f:
            json.dump(value, f)

    def text(self, name):
        with open(os.path.join(self.dir, name)) as f:
            return f.read()

    def write(self, name, text):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(text)

    def report(self):
        return gpucheck.build_report(self.dir)

    def close(self):
        shutil.rmtree(self.dir)


def failed(report, area, field):
    return [c for c in report["mismatches"] if c["area"] == area and c["field"] == field]


class RecordedH200Test(unittest.TestCase):
    def test_recorded_run_passes(self):
        r = gpucheck.build_report(FIXTURE)
        self.assertEqual(r["status"], "pass", json.dumps(r["mismatches"], indent=1))
        self.assertEqual(r["machine"]["gpus"], ["NVIDIA H200"])
        self.assertEqual(r["machine"]["driver_version"], "580.159.04")
        fields = {(c["area"], c["field"]) for c in r["checks"] if c["result"] == "match"}
        for want in [("gpus", "uuid"), ("gpus", "memory.used_mib"), ("gpus", "memory.reserved_mib"),
                     ("gpus", "ecc_mode"), ("gpus", "cuda_version"), ("gpus", "numa_node"),
                     ("gpus", "nvlinks"), ("gpus", "power_w"), ("topology", "GPU0-GPU0"),
                     ("dcgm", "DCGM_FI_DEV_FB_USED"), ("dcgm", "DCGM_FI_DEV_GPU_UTIL"),
                     ("device-plugin", "resources"), ("device-plugin", "protocol"),
                     ("health", "events"), ("health", "verdict")]:
            self.assertIn(want, fields)

    def test_parses_the_v13_xml(self):
        with open(os.path.join(FIXTURE, "smi-load-after.xml")) as f:
            smi = smi_parse.parse_smi_xml(f.read())
        g = smi["gpus"][0]
        self.assertEqual(smi["cuda_version"], "13.0")
        self.assertEqual(g["memory"], {"total": 143771, "reserved": 570, "used": 1075,
                                       "free": 142126})
        self.assertEqual(g["power"]["average_w"], 695.72)
        self.assertEqual(g["mig_mode"], {"current": False, "pending": False})
        self.assertEqual(g["ecc_volatile"], {"correctable": 0, "uncorrectable": 0})
        self.assertEqual(g["clock_events"], 0)
        self.assertEqual(g["remapped_rows"]["failure"], False)


class PlantedDefectTest(unittest.TestCase):
    def setUp(self):
        self.run = Run()

    def tearDown(self):
        self.run.close()

    def test_v1_memory_semantics_are_caught(self):
        # nvmlDeviceGetMemoryInfo (v1): the driver's reservation counted as used, none apart.
        t = self.run.json("tessera-gpus.json")
        mem = t["gpus"][0]["memory"]
        mem["used_bytes"] += mem.pop("reserved_bytes")
        mem["reserved_bytes"] = None
        self.run.write_json("tessera-gpus.json", t)
        r = self.run.report()
        self.assertEqual(r["status"], "fail")
        self.assertTrue(failed(r, "gpus", "memory.used_mib"))
        self.assertTrue(failed(r, "gpus", "memory.reserved_mib"))

    def test_dcgm_fb_used_with_the_reservation_is_caught(self):
        prom = self.run.text("dcgm.prom").replace(
            'Hostname="gpu-check"} 1075', 'Hostname="gpu-check"} 1645')
        self.run.write("dcgm.prom", prom)
        r = self.run.report()
        self.assertTrue(failed(r, "dcgm", "DCGM_FI_DEV_FB_USED"))

    def test_identity_mismatch_is_caught(self):
        t = self.run.json("tessera-gpus.json")
        t["gpus"][0]["uuid"] = "GPU-00000000-0000-0000-0000-000000000000"
        t["gpus"][0]["pci_bus_id"] = "00000000:1A:00.0"
        t["cuda_driver_version"] = ""
        self.run.write_json("tessera-gpus.json", t)
        r = self.run.report()
        for field in ("uuid", "pci_bus_id", "cuda_version"):
            self.assertTrue(failed(r, "gpus", field), field)

    def test_reading_outside_the_bracket_is_caught(self):
        t = self.run.json("tessera-gpus.json")
        t["gpus"][0]["metrics"]["power_watts"] = 120.0  # nvidia-smi: 75.93 .. 76.04 W
        t["gpus"][0]["metrics"]["temperature_c"] = 35  # 29 C
        self.run.write_json("tessera-gpus.json", t)
        r = self.run.report()
        self.assertTrue(failed(r, "gpus", "power_w"))
        self.assertTrue(failed(r, "gpus", "temperature_c"))

    def test_missing_nvlinks_are_caught(self):
        t = self.run.json("tessera-gpus.json")
        t["gpus"][0]["nvlinks"] = t["gpus"][0]["nvlinks"][:12]
        self.run.write_json("tessera-gpus.json", t)
        self.assertTrue(failed(self.run.report(), "gpus", "nvlinks"))

    def test_device_node_that_does_not_exist_is_caught(self):
        probe = self.run.json("deviceplugin.json")
        devs = probe["resources"]["nvidia.com/gpu"]["allocate"]["response"]["devices"]
        devs.append({"container_path": "/dev/nvidia-modeset", "host_path": "/dev/nvidia-modeset",
                     "permissions": "rw"})
        self.run.write_json("deviceplugin.json", probe)
        r = self.run.report()
        bad = failed(r, "device-plugin", "nvidia.com/gpu device nodes exist")
        self.assertEqual(bad[0]["tessera"], ["/dev/nvidia-modeset"])

    def test_flapping_and_unhealthy_devices_are_caught(self):
        probe = self.run.json("deviceplugin.json")
        res = probe["resources"]["nvidia.com/gpu"]
        res["lists_received"] = 3
        res["last_list"][0]["health"] = "Unhealthy"
        self.run.write_json("deviceplugin.json", probe)
        r = self.run.report()
        self.assertTrue(failed(r, "device-plugin", "nvidia.com/gpu lists_received"))
        self.assertTrue(failed(r, "device-plugin", "nvidia.com/gpu unhealthy"))

    def test_false_xid_in_the_health_watch_is_caught(self):
        watch = self.run.text("health-watch.txt").replace(
            "Health:\n  %s  healthy" % UUID,
            "2026-11-04T10:12:30.114Z  %s  event xid 79 (GPU has fallen off the bus, hardware)\n"
            "2026-11-04T10:12:30.114Z  %s  healthy -> unhealthy: XID 79: GPU has fallen off the "
            "bus\nHealth:\n  %s  unhealthy  (XID 79)" % (UUID, UUID, UUID))
        self.run.write("health-watch.txt", watch)
        r = self.run.report()
        for field in ("events", "transitions"):
            self.assertTrue(failed(r, "health", field), field)
        self.assertTrue([c for c in r["mismatches"] if c["field"] == "verdict"])

    def test_missing_input_fails_the_run(self):
        os.remove(os.path.join(self.run.dir, "dcgm.prom"))
        r = self.run.report()
        self.assertEqual(r["status"], "fail")
        self.assertEqual(failed(r, "dcgm", "dcgm.prom")[0]["result"], "error")

    def test_main_exits_non_zero_on_a_mismatch(self):
        t = self.run.json("tessera-gpus.json")
        t["gpus"][0]["name"] = "NVIDIA H100 80GB HBM3"
        self.run.write_json("tessera-gpus.json", t)
        with redirect_stdout(io.StringIO()) as out:
            self.assertEqual(gpucheck.main(["report", "--dir", self.run.dir]), 1)
        self.assertEqual(json.loads(out.getvalue())["status"], "fail")
        with redirect_stdout(io.StringIO()):
            self.assertEqual(gpucheck.main(["report", "--dir", FIXTURE]), 0)


class TopologyTest(unittest.TestCase):
    def test_parses_an_hgx_matrix(self):
        topo = smi_parse.parse_topo_matrix(HGX_TOPO)
        self.assertEqual(topo["gpus"], ["GPU%d" % i for i in range(8)])
        self.assertEqual(topo["matrix"]["GPU2"]["GPU5"], "NV18")
        self.assertEqual(topo["matrix"]["GPU3"]["GPU3"], "X")
        self.assertEqual(topo["numa_affinity"]["GPU6"], 1)
        self.assertNotIn("NIC0", topo["matrix"])

    def test_nvlink_pair_reported_as_pcie_is_caught(self):
        topo = smi_parse.parse_topo_matrix(HGX_TOPO)
        links = [["self" if a == b else "nvlink" for b in range(8)] for a in range(8)]
        links[1][6] = "cross-numa"
        tessera = {"topology": {"links": links, "pcie_levels": [[None] * 8] * 8}}
        bad = [c for c in compare._compare_topology(tessera, topo) if c["result"] != "match"]
        self.assertEqual([c["field"] for c in bad], ["GPU1-GPU6"])

    def test_pcie_codes_map_to_link_class_and_level(self):
        text = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tPXB\t0-7\t0\nGPU1\tPXB\t X " \
               "\t0-7\t0\n"
        topo = smi_parse.parse_topo_matrix(text)
        good = {"topology": {"links": [["self", "pcie-switch"], ["pcie-switch", "self"]],
                             "pcie_levels": [[None, "MULTIPLE"], ["MULTIPLE", None]]}}
        self.assertTrue(all(c["result"] == "match" for c in compare._compare_topology(good, topo)))
        bad = copy.deepcopy(good)
        bad["topology"]["pcie_levels"][0][1] = "SINGLE"  # PIX, not PXB
        self.assertEqual([c["field"] for c in compare._compare_topology(bad, topo)
                          if c["result"] == "mismatch"], ["GPU0-GPU1"])


class MigTest(unittest.TestCase):
    def test_parses_mig_devices_from_the_listing(self):
        gpus = smi_parse.parse_smi_list(MIG_LIST)
        self.assertEqual([m["profile"] for m in gpus[0]["mig"]], ["3g.40gb", "1g.10gb+me"])
        self.assertEqual(gpus[1]["mig"], [])

    def test_device_plugin_resources_use_nvidia_names(self):
        self.assertEqual(compare.nvidia_mig_resource("1g.10gb+me"), "nvidia.com/mig-1g.10gb.me")
        self.assertEqual(compare.nvidia_mig_resource("1g.18gb+me.all"),
                         "nvidia.com/mig-1g.18gb.me.all")
        self.assertEqual(compare.nvidia_mig_resource("1g.18gb-me"), "nvidia.com/mig-1g.18gb-me")
        smi = {"gpus": [
            {"uuid": "GPU-aaaaaaaa-1111-2222-3333-444444444444", "minor": 0,
             "mig_mode": {"current": True, "pending": True}},
            {"uuid": "GPU-dddddddd-1111-2222-3333-444444444444", "minor": 1,
             "mig_mode": {"current": False, "pending": False}}]}
        listing = smi_parse.parse_smi_list(MIG_LIST)
        probe = {"errors": [], "resources": {
            "nvidia.com/gpu": {}, "nvidia.com/mig-3g.40gb": {}, "nvidia.com/mig-1g.10gb-me": {}}}
        res = [c for c in compare.compare_deviceplugin(probe, smi, listing, set())
               if c["field"] == "resources"][0]
        self.assertEqual(res["result"], "mismatch")
        self.assertIn("nvidia.com/mig-1g.10gb.me", res["nvidia_smi"])


SCRIPT = os.path.join(HERE, "..", "gpu-check.sh")


def run_script(env_extra, *args):
    env = dict(os.environ)
    env.update(env_extra)
    p = subprocess.run(["bash", SCRIPT] + list(args), env=env, capture_output=True, text=True,
                       timeout=300)
    return p.returncode, json.loads(p.stdout), p.stderr


class ScriptTest(unittest.TestCase):
    """scripts/gpu-check.sh itself on this machine, which has no NVIDIA driver."""

    def test_no_nvidia_smi_skips(self):
        rc, rep, err = run_script({"GPU_CHECK_NVIDIA_SMI": "/nonexistent/nvidia-smi"})
        self.assertEqual(rc, 0, err)
        self.assertEqual(rep["status"], "skipped")
        self.assertIn("no NVIDIA driver", rep["reason"])
        self.assertIn("skipped", err)

    def test_nvidia_smi_without_a_driver_skips(self):
        # What nvidia-smi prints where the package is installed but no driver is loaded.
        with tempfile.TemporaryDirectory() as d:
            smi = os.path.join(d, "nvidia-smi")
            with open(smi, "w") as f:
                f.write("#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate "
                        "with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed "
                        "and running.\"\nexit 9\n")
            os.chmod(smi, 0o755)
            rc, rep, err = run_script({"GPU_CHECK_NVIDIA_SMI": smi})
        self.assertEqual(rc, 0, err)
        self.assertEqual(rep["status"], "skipped")
        self.assertIn("couldn't communicate with the NVIDIA driver", rep["reason"])

    def test_as_installed_here(self):
        """The script as CI runs it: no override. Skips unless this machine has a driver."""
        if shutil.which("nvidia-smi"):
            self.skipTest("this machine has nvidia-smi: the full check is for scripts/gpu-check.sh")
        rc, rep, _ = run_script({})
        self.assertEqual((rc, rep["status"]), (0, "skipped"))

    def test_whole_run_against_the_stub_driver(self):
        """Every step, against the agent's stub libnvidia-ml and a stand-in nvidia-smi that
        describes the same GPU: the plumbing collects every input and they all match."""
        tessera, stub = os.environ.get("TESSERA_BIN"), os.environ.get("GPU_CHECK_STUB_NVML")
        kubelet = os.environ.get("GPU_CHECK_KUBELET_BIN")
        if not tessera or not stub or not kubelet:
            self.skipTest("TESSERA_BIN, GPU_CHECK_KUBELET_BIN, GPU_CHECK_STUB_NVML not set (ctest "
                          "sets them)")
        with tempfile.TemporaryDirectory() as d:
            rc, rep, err = run_script(
                {"GPU_CHECK_NVIDIA_SMI": os.path.join(HERE, "testdata", "fake-nvidia-smi"),
                 "TESSERA_NVML_LIB": stub, "TESSERA_STUB_NVML_GPUS": "1"},
                "--tessera", tessera, "--kubelet", kubelet, "--out", d, "--watch", "1",
                "--no-load")
            files = set(os.listdir(d))
        self.assertEqual(rep["status"], "pass", json.dumps(rep.get("mismatches"), indent=1) + err)
        self.assertEqual(rc, 0)
        self.assertEqual(rep["load"], {"kind": "none", "detail": "--no-load"})
        areas = {c["area"] for c in rep["checks"]}
        self.assertEqual(areas, {"gpus", "topology", "dcgm", "device-plugin", "health"})
        self.assertTrue({"report.json", "deviceplugin.json", "dcgm.prom"} <= files)


class SkipTest(unittest.TestCase):
    def test_skip_report(self):
        with redirect_stdout(io.StringIO()) as out:
            self.assertEqual(gpucheck.main(["skip", "--reason", "no NVIDIA driver"]), 0)
        self.assertEqual(json.loads(out.getvalue()),
                         {"schema": "tessera.gpu-check/v1", "status": "skipped",
                          "reason": "no NVIDIA driver"})


if __name__ == "__main__":
    unittest.main()
