#include "agent/dcgm_metrics.h"

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A minimal parser for the text exposition format, strict enough to catch malformed output.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  std::string value;
};
struct Exposition {
  std::map<std::string, std::string> help;
  std::map<std::string, std::string> type;
  std::vector<Sample> samples;
  std::vector<std::string> errors;
};

Exposition Parse(const std::string& text) {
  Exposition e;
  std::istringstream in(text);
  std::string line;
  std::string current;  // family of the last # TYPE
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      std::string rest = line.substr(7);
      size_t sp = rest.find(' ');
      std::string name = rest.substr(0, sp);
      (line[2] == 'H' ? e.help : e.type)[name] = rest.substr(sp + 1);
      if (line[2] == 'T') current = name;
      continue;
    }
    Sample s;
    size_t i = 0;
    while (i < line.size() && (isalnum(line[i]) || line[i] == '_')) s.name += line[i++];
    if (s.name != current) e.errors.push_back("sample outside its family: " + line);
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        std::string key;
        while (i < line.size() && line[i] != '=') key += line[i++];
        if (line.substr(i, 2) != "=\"") {
          e.errors.push_back("bad label in " + line);
          break;
        }
        i += 2;
        std::string value;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\' && i + 1 < line.size()) {
            char c = line[++i];
            value += c == 'n' ? '\n' : c;
          } else {
            value += line[i];
          }
          ++i;
        }
        ++i;  // closing quote
        s.labels[key] = value;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;  // closing brace
    }
    if (i >= line.size() || line[i] != ' ') {
      e.errors.push_back("no value in " + line);
      continue;
    }
    s.value = line.substr(i + 1);
    e.samples.push_back(std::move(s));
  }
  return e;
}

GpuSnapshot Gpu(int index, const std::string& uuid) {
  GpuSnapshot g;
  g.info.index = index;
  g.info.uuid = uuid;
  g.info.name = "NVIDIA H100 80GB HBM3";
  g.info.minor = index;
  g.info.pci_bus_id = "00000000:1" + std::to_string(index) + ":00.0";
  GpuMetrics& m = g.metrics;
  m.gpu_util_percent = 97;
  m.mem_copy_util_percent = 41;
  m.fb_used_bytes = 70000ULL * 1024 * 1024;
  m.fb_free_bytes = 11559ULL * 1024 * 1024;
  m.temperature_c = 64;
  m.power_watts = 652.75;
  m.total_energy_mj = 1234567890123ULL;
  m.sm_clock_mhz = 1980;
  m.mem_clock_mhz = 2619;
  m.throttle_reasons = 0;
  m.ecc_sbe_volatile = 2;
  m.ecc_dbe_volatile = 0;
  m.ecc_sbe_aggregate = 7;
  m.ecc_dbe_aggregate = 1;
  m.remapped_rows_correctable = 0;
  m.remapped_rows_uncorrectable = 1;
  m.row_remap_failure = false;
  m.pcie_tx_bytes_per_s = 3 << 20;
  m.nvlink_rx_bytes_per_s = uint64_t{50} << 30;
  return g;
}

TEST(DcgmMetricsTest, RendersDcgmExporterNamesAndLabels) {
  std::vector<GpuSnapshot> gpus = {Gpu(0, "GPU-a"), Gpu(1, "GPU-b")};
  DcgmRenderOptions o;
  o.hostname = "node-7";
  o.workloads["GPU-b"] = WorkloadLabels{"team-a", "train-42"};
  o.last_xid["GPU-b"] = 79;
  Exposition e = Parse(RenderDcgmMetrics(gpus, o));
  ASSERT_THAT(e.errors, IsEmpty());
  for (const char* name :
       {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK",
        "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES"}) {
    EXPECT_TRUE(e.help.count(name)) << name;
    EXPECT_TRUE(e.type.count(name)) << name;
  }
  EXPECT_EQ(e.type["DCGM_FI_DEV_GPU_TEMP"], "gauge");
  EXPECT_EQ(e.type["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"], "counter");
  EXPECT_EQ(e.type["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"], "counter");
  EXPECT_EQ(e.help["DCGM_FI_DEV_GPU_TEMP"], "GPU temperature (in C).");

  std::map<std::string, std::map<std::string, Sample>> by;  // name -> uuid -> sample
  for (const Sample& s : e.samples) by[s.name][s.labels.at("UUID")] = s;
  const Sample& temp_b = by["DCGM_FI_DEV_GPU_TEMP"]["GPU-b"];
  EXPECT_EQ(temp_b.value, "64");
  EXPECT_EQ(temp_b.labels.at("gpu"), "1");
  EXPECT_EQ(temp_b.labels.at("device"), "nvidia1");
  EXPECT_EQ(temp_b.labels.at("modelName"), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(temp_b.labels.at("Hostname"), "node-7");
  EXPECT_EQ(temp_b.labels.at("tessera_namespace"), "team-a");
  EXPECT_EQ(temp_b.labels.at("tessera_job"), "train-42");
  const Sample& temp_a = by["DCGM_FI_DEV_GPU_TEMP"]["GPU-a"];
  EXPECT_EQ(temp_a.labels.count("tessera_namespace"), 0u);  // no workload on GPU-a
  EXPECT_EQ(temp_a.labels.count("tessera_job"), 0u);
  EXPECT_EQ(by["DCGM_FI_DEV_FB_USED"]["GPU-a"].value, "70000");
  EXPECT_EQ(by["DCGM_FI_DEV_FB_FREE"]["GPU-a"].value, "11559");
  EXPECT_EQ(by["DCGM_FI_DEV_POWER_USAGE"]["GPU-a"].value, "652.75");
  EXPECT_EQ(by["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]["GPU-a"].value, "1234567890123");
  EXPECT_EQ(by["DCGM_FI_DEV_XID_ERRORS"]["GPU-b"].value, "79");
  EXPECT_EQ(by["DCGM_FI_DEV_XID_ERRORS"]["GPU-a"].value, "0");
  EXPECT_EQ(by["DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"]["GPU-a"].value, "1");
  EXPECT_EQ(by["DCGM_FI_DEV_ROW_REMAP_FAILURE"]["GPU-a"].value, "0");
  EXPECT_EQ(by["DCGM_FI_PROF_PCIE_TX_BYTES"]["GPU-a"].value, "3145728");
  EXPECT_EQ(by["DCGM_FI_PROF_PCIE_RX_BYTES"].count("GPU-a"), 0u) << "not measured: no sample";
  EXPECT_EQ(by["DCGM_FI_PROF_NVLINK_RX_BYTES"]["GPU-a"].value, "53687091200");
  // Label order follows dcgm-exporter.
  std::string text = RenderDcgmMetrics(gpus, o);
  EXPECT_NE(
      text.find("DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"GPU-b\",pci_bus_id=\"00000000:11:00.0\","
                "device=\"nvidia1\","
                "modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-7\","
                "tessera_namespace=\"team-a\",tessera_job=\"train-42\"} 97\n"),
      std::string::npos)
      << text;
}

TEST(DcgmMetricsTest, EscapesLabelValues) {
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  std::vector<GpuSnapshot> gpus = {Gpu(0, "GPU-a")};
  gpus[0].info.name = "Weird \"GPU\"\\model\nline2";
  DcgmRenderOptions o;
  o.hostname = "h\"ost";
  o.workloads["GPU-a"] = WorkloadLabels{"ns\\1", "job \"x\"\n"};
  Exposition e = Parse(RenderDcgmMetrics(gpus, o));
  ASSERT_THAT(e.errors, IsEmpty());
  ASSERT_FALSE(e.samples.empty());
  for (const Sample& s : e.samples) {
    EXPECT_EQ(s.labels.at("modelName"), "Weird \"GPU\"\\model\nline2");
    EXPECT_EQ(s.labels.at("Hostname"), "h\"ost");
    EXPECT_EQ(s.labels.at("tessera_namespace"), "ns\\1");
    EXPECT_EQ(s.labels.at("tessera_job"), "job \"x\"\n");
  }
}

TEST(DcgmMetricsTest, UnavailableReadingsAndLostGpusHaveNoSamples) {
  GpuSnapshot partial;
  partial.info.index = 0;
  partial.info.uuid = "GPU-p";
  partial.metrics.temperature_c = 50;  // nothing else known
  GpuSnapshot lost = Gpu(1, "GPU-lost");
  lost.error = "UNAVAILABLE: GPU is lost";
  Exposition e = Parse(RenderDcgmMetrics({partial, lost}, DcgmRenderOptions{}));
  ASSERT_THAT(e.errors, IsEmpty());
  std::vector<std::string> names;
  for (const Sample& s : e.samples) {
    EXPECT_EQ(s.labels.at("UUID"), "GPU-p");
    names.push_back(s.name);
  }
  EXPECT_THAT(names, ElementsAre("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS"));
  EXPECT_EQ(e.help.count("DCGM_FI_DEV_POWER_USAGE"), 0u);  // no family without samples
  EXPECT_EQ(e.samples[0].labels.at("device"), "nvidia0");  // minor unknown: index
}

}  // namespace
}  // namespace tessera::agent
