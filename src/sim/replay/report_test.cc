// Report output: one JSON section per policy, CSV rows, SVG charts.
#include "sim/replay/report.h"

#include <gtest/gtest.h>

#include "common/clock.h"
#include "sched/plugins/default_registry.h"

namespace tessera::sim::replay {
namespace {

TEST(ReplayReport, JsonCsvAndSvg) {
  Workload w;
  w.queues = {"a", "b"};
  for (int i = 0; i < 20; ++i) {
    SimJob j;
    j.submit_s = i * 10;
    j.duration_s = 100 + i;
    j.gpus = 1 + i % 4;
    j.queue = i % 2;
    w.jobs.push_back(j);
  }
  SimOptions o;
  o.cluster.nodes = 1;
  o.cluster.gpus_per_node = 8;
  o.sample_interval_s = 50;
  ReplayReport report;
  report.workload = &w;
  report.options = &o;
  PolicyRegistry policies = PolicyRegistry::Builtin();
  for (const std::string& name : policies.Names()) {
    ManualClock wall;
    auto r = RunReplay(w, o, *policies.Lookup(name), sched::DefaultRegistry(), &wall);
    ASSERT_TRUE(r.ok()) << r.status();
    report.results.push_back(std::move(*r));
  }
  nlohmann::json j = ToJson(report);
  ASSERT_EQ(j["policies"].size(), policies.Names().size());
  for (const std::string& name : policies.Names()) {
    const nlohmann::json& p = j["policies"][name];
    EXPECT_EQ(p["jobs"]["completed"], 20) << name;
    EXPECT_GE(p["jct_s"]["mean"].get<double>(), 100) << name;
    EXPECT_EQ(p["fairness"]["queues"].size(), 2u) << name;
    EXPECT_TRUE(p["fairness"]["queues"][0].contains("contended_share")) << name;
    EXPECT_TRUE(p["fairness"]["queues"][0].contains("preemptions")) << name;
    EXPECT_TRUE(p.contains("makespan")) << name;
    EXPECT_TRUE(p["utilization_while_waiting"].contains("p5")) << name;
    EXPECT_EQ(p["wait_by_gpus"].size(), 4u) << name;  // 1, 2, 3 and 4 GPUs
    EXPECT_TRUE(p["wait_by_gpus"]["4"].contains("p99_s")) << name;
  }
  EXPECT_EQ(j["checkpoints"]["cadence"], "fixed");
  std::string csv = TimeSeriesCsv(report);
  EXPECT_EQ(csv.rfind("policy,t_hours,", 0), 0u);
  EXPECT_NE(csv.find("\nlas,"), std::string::npos);
  std::string svg = SvgLineChart("t <1>", "x", "y", {{"s&1", {{1, 1}, {10, 2}, {100, 3}}}}, true);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("t &lt;1&gt;"), std::string::npos);
  EXPECT_NE(svg.find("s&amp;1"), std::string::npos);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(TextSummary(report).find("default"), std::string::npos);
  EXPECT_NE(TextSummary(report).find("contended"), std::string::npos);  // the per-queue table
  EXPECT_NE(TextSummary(report).find("while work waits"), std::string::npos);
  EXPECT_NE(TextSummary(report).find("wait by GPUs (p99 / max): 1: "), std::string::npos);
}

}  // namespace
}  // namespace tessera::sim::replay
