// The exporter against a real HTTP receiver on loopback: the request is
// OTLP/HTTP JSON with the structure the spec's JSON mapping prescribes, and a
// collector that is down or a full queue drop spans and count them.
#include "obs/otlp_exporter.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

#include "nlohmann/json.hpp"
#include "obs/testing/otlp_receiver.h"

namespace tessera::obs {
namespace {

using Json = nlohmann::json;

using Receiver = testing::OtlpReceiver;

TraceRecord Decision(const std::string& job) {
  const absl::Time t0 = absl::FromUnixSeconds(1764522000);
  TraceRecord t;
  t.push_back({"schedule",
               t0,
               t0 + absl::Milliseconds(3),
               -1,
               {{"tessera.job", job}, {"tessera.result", std::string("scheduled")}}});
  t.push_back({"filter",
               t0,
               t0 + absl::Milliseconds(1),
               0,
               {{"tessera.candidates", int64_t{120}}, {"tessera.feasible", int64_t{7}}}});
  t.push_back({"bind",
               t0 + absl::Milliseconds(1),
               t0 + absl::Milliseconds(3),
               0,
               {{"tessera.score", 0.5}, {"tessera.ok", true}}});
  return t;
}

bool IsHex(const std::string& s, size_t n) {
  return s.size() == n && s.find_first_not_of("0123456789abcdef") == std::string::npos &&
         s != std::string(n, '0');
}

TEST(OtlpExporterTest, PostsSpecShapedJsonToV1Traces) {
  Receiver rx;
  ASSERT_GT(rx.port(), 0);
  metrics::Registry reg;
  OtlpExporterOptions o;
  o.endpoint = "http://127.0.0.1:" + std::to_string(rx.port());
  o.service_name = "tessera-test";
  o.metrics = &reg;
  o.flush_interval = absl::Milliseconds(20);
  absl::StatusOr<std::unique_ptr<OtlpExporter>> ex = OtlpExporter::Create(o);
  ASSERT_TRUE(ex.ok()) << ex.status();
  ASSERT_TRUE((*ex)->Export(Decision("a")));
  ASSERT_TRUE((*ex)->Export(Decision("b")));
  (*ex)->Flush();
  EXPECT_EQ((*ex)->spans_exported(), 6);
  EXPECT_EQ((*ex)->spans_dropped(), 0);
  std::vector<std::string> bodies = rx.bodies();
  ASSERT_FALSE(bodies.empty());
  EXPECT_EQ(rx.content_types()[0], "application/json");

  std::set<std::string> trace_ids;
  int spans_seen = 0;
  for (const std::string& b : bodies) {
    Json req = Json::parse(b);
    ASSERT_TRUE(req["resourceSpans"].is_array());
    ASSERT_EQ(req["resourceSpans"].size(), 1u);
    const Json& rs = req["resourceSpans"][0];
    const Json& rattrs = rs["resource"]["attributes"];
    ASSERT_EQ(rattrs.size(), 1u);
    EXPECT_EQ(rattrs[0]["key"], "service.name");
    EXPECT_EQ(rattrs[0]["value"]["stringValue"], "tessera-test");
    ASSERT_EQ(rs["scopeSpans"].size(), 1u);
    EXPECT_EQ(rs["scopeSpans"][0]["scope"]["name"], "tessera.scheduler");
    const Json& spans = rs["scopeSpans"][0]["spans"];
    std::map<std::string, Json> by_id;
    for (const Json& s : spans) by_id[s["spanId"].get<std::string>()] = s;
    for (const Json& s : spans) {
      ++spans_seen;
      ASSERT_TRUE(IsHex(s["traceId"].get<std::string>(), 32)) << s.dump();
      ASSERT_TRUE(IsHex(s["spanId"].get<std::string>(), 16)) << s.dump();
      trace_ids.insert(s["traceId"].get<std::string>());
      // Unix nanos as decimal strings.
      ASSERT_TRUE(s["startTimeUnixNano"].is_string());
      ASSERT_TRUE(s["endTimeUnixNano"].is_string());
      EXPECT_EQ(s["kind"], 1);
      if (s["name"] == "schedule") {
        EXPECT_FALSE(s.contains("parentSpanId"));
        EXPECT_EQ(s["startTimeUnixNano"], "1764522000000000000");
        EXPECT_EQ(s["endTimeUnixNano"], "1764522000003000000");
        continue;
      }
      // Children point at their root, inside the same trace.
      ASSERT_TRUE(s.contains("parentSpanId")) << s.dump();
      const Json& parent = by_id.at(s["parentSpanId"].get<std::string>());
      EXPECT_EQ(parent["name"], "schedule");
      EXPECT_EQ(parent["traceId"], s["traceId"]);
      if (s["name"] == "filter") {
        ASSERT_EQ(s["attributes"].size(), 2u);
        EXPECT_EQ(s["attributes"][0]["key"], "tessera.candidates");
        EXPECT_EQ(s["attributes"][0]["value"]["intValue"], "120");  // int64 as a string
      }
      if (s["name"] == "bind") {
        EXPECT_EQ(s["attributes"][0]["value"]["doubleValue"], 0.5);
        EXPECT_EQ(s["attributes"][1]["value"]["boolValue"], true);
      }
    }
  }
  EXPECT_EQ(spans_seen, 6);
  EXPECT_EQ(trace_ids.size(), 2u);  // one trace per decision
  EXPECT_THAT(reg.Render(), ::testing::HasSubstr("tessera_otlp_spans_exported_total 6\n"));
}

TEST(OtlpExporterTest, CollectorDownDropsAndCounts) {
  // A port that was free a moment ago (bound, read back, closed): nothing listens there.
  int port = -1;
  {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port = ntohs(a.sin_port);
    close(fd);
  }
  metrics::Registry reg;
  OtlpExporterOptions o;
  o.endpoint = "http://127.0.0.1:" + std::to_string(port) + "/v1/traces";
  o.metrics = &reg;
  o.flush_interval = absl::Milliseconds(10);
  o.timeout = absl::Milliseconds(500);
  auto ex = OtlpExporter::Create(o);
  ASSERT_TRUE(ex.ok());
  ASSERT_TRUE((*ex)->Export(Decision("a")));
  (*ex)->Flush();
  EXPECT_EQ((*ex)->spans_exported(), 0);
  EXPECT_EQ((*ex)->spans_dropped(), 3);
  const std::string text = reg.Render();
  EXPECT_THAT(
      text, ::testing::HasSubstr("tessera_otlp_spans_dropped_total{reason=\"export_failed\"} 3\n"));
  EXPECT_THAT(text,
              ::testing::HasSubstr("tessera_otlp_export_requests_total{result=\"error\"} 1\n"));
}

TEST(OtlpExporterTest, FullQueueDropsWithoutBlocking) {
  metrics::Registry reg;
  OtlpExporterOptions o;
  o.endpoint = "http://127.0.0.1:1";
  o.metrics = &reg;
  o.max_queue = 2;
  o.max_batch = 100;                  // never full: the worker waits for the interval
  o.flush_interval = absl::Hours(1);  // ... which does not end during the test
  o.timeout = absl::Milliseconds(200);
  auto ex = OtlpExporter::Create(o);
  ASSERT_TRUE(ex.ok());
  EXPECT_TRUE((*ex)->Export(Decision("a")));
  EXPECT_TRUE((*ex)->Export(Decision("b")));
  EXPECT_FALSE((*ex)->Export(Decision("c")));
  EXPECT_EQ((*ex)->spans_dropped(), 3);
  EXPECT_THAT(reg.Render(),
              ::testing::HasSubstr("tessera_otlp_spans_dropped_total{reason=\"queue_full\"} 3\n"));
}

TEST(OtlpExporterTest, RejectsBadEndpoint) {
  OtlpExporterOptions o;
  o.endpoint = "127.0.0.1:4318";
  auto ex = OtlpExporter::Create(o);
  ASSERT_FALSE(ex.ok());
  EXPECT_THAT(std::string(ex.status().message()), ::testing::HasSubstr("--otlp-endpoint"));
}

}  // namespace
}  // namespace tessera::obs
