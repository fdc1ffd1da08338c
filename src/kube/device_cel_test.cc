#include "kube/device_cel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace tessera::kube {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

constexpr char kDriver[] = "gpu.tessera.dev";

// A whole H100 and a MIG slice as `tessera dra-driver` publishes them (src/dra/devices.cc).
CelValue Gpu(int64_t memory_gib = 80, bool mig_enabled = false) {
  return DeviceValue(kDriver, Json::parse(R"({"name": "gpu-0", "attributes": {
        "type": {"string": "gpu"}, "uuid": {"string": "GPU-0"}, "index": {"int": 0},
        "migEnabled": {"bool": )" + std::string(mig_enabled ? "true" : "false") +
                                          R"(},
        "productName": {"string": "NVIDIA H100 80GB HBM3"}, "nvlinkDomain": {"int": 1},
        "computeCapability": {"version": "9.0.0"}, "driverVersion": {"version": "550.54.15"},
        "example.com/healthy": {"bool": true}},
        "capacity": {"memory": {"value": ")" +
                                          std::to_string(memory_gib << 30) + R"("}}})"));
}
CelValue Mig() {
  return DeviceValue(kDriver, Json::parse(R"({"name": "gpu-0-mig-0", "attributes": {
        "type": {"string": "mig"}, "profile": {"string": "1g.10gb"},
        "parentUUID": {"string": "GPU-0"}},
        "capacity": {"memory": {"value": "10Gi"}}})"));
}

bool Match(const std::string& expr, const CelValue& d) {
  absl::StatusOr<DeviceSelector> s = DeviceSelector::Parse(expr);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return false;
  absl::StatusOr<bool> r = s->Matches(d);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() && *r;
}

absl::Status EvalError(const std::string& expr, const CelValue& d) {
  absl::StatusOr<DeviceSelector> s = DeviceSelector::Parse(expr);
  if (!s.ok()) return s.status();
  return s->Matches(d).status();
}

// The selectors of deploy/kubernetes/dra/deviceclasses.yaml, as shipped.
TEST(DeviceCelTest, TheShippedDeviceClassesSelectWhatTheySay) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/deploy/kubernetes/dra/deviceclasses.yaml");
  ASSERT_TRUE(in) << "deviceclasses.yaml";
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<std::string> exprs;
  std::string text = ss.str(), cur;
  std::istringstream lines(text);
  bool in_expr = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("expression: >-") != std::string::npos) {
      in_expr = true;
      cur.clear();
      continue;
    }
    if (in_expr && (line.find("---") == 0 || line.find_first_not_of(' ') < 10)) {
      exprs.push_back(cur);
      in_expr = false;
    }
    if (in_expr) cur += line + " ";
  }
  if (in_expr) exprs.push_back(cur);
  ASSERT_EQ(exprs.size(), 4u);
  EXPECT_TRUE(Match(exprs[0], Gpu()));  // whole GPU, not in MIG mode
  EXPECT_FALSE(Match(exprs[0], Gpu(80, true)));
  EXPECT_FALSE(Match(exprs[0], Mig()));
  EXPECT_TRUE(Match(exprs[1], Gpu(80, true)));  // a GPU in MIG mode, whole
  EXPECT_FALSE(Match(exprs[1], Gpu()));
  EXPECT_FALSE(Match(exprs[1], Mig()));
  EXPECT_TRUE(Match(exprs[2], Mig()));    // MIG 1g.10gb
  EXPECT_FALSE(Match(exprs[2], Gpu()));   // absorbed: `type == "mig"` false decides
  EXPECT_TRUE(Match(exprs[3], Gpu(80)));  // >= 40Gi
  EXPECT_FALSE(Match(exprs[3], Gpu(80, true)));
  EXPECT_FALSE(Match(exprs[3], Gpu(24)));
  EXPECT_FALSE(Match(exprs[3], Mig()));
}

TEST(DeviceCelTest, ComparisonsListsVersionsAndStrings) {
  const CelValue g = Gpu();
  EXPECT_TRUE(Match(R"(device.attributes["gpu.tessera.dev"]["index"] == 0)", g));
  EXPECT_TRUE(Match(R"(device.attributes["gpu.tessera.dev"].nvlinkDomain in [1, 2])", g));
  EXPECT_FALSE(Match(R"(device.attributes["gpu.tessera.dev"].nvlinkDomain in [3])", g));
  EXPECT_TRUE(Match(R"("profile" in device.attributes["gpu.tessera.dev"] || true)", g));
  EXPECT_FALSE(Match(R"("profile" in device.attributes["gpu.tessera.dev"])", g));
  EXPECT_TRUE(Match(
      R"(device.attributes["gpu.tessera.dev"].computeCapability.compareTo(semver("8.0.0")) >= 0)",
      g));
  EXPECT_TRUE(Match(
      R"(device.attributes["gpu.tessera.dev"].driverVersion.isGreaterThan(semver("535.0.0")))", g));
  EXPECT_TRUE(
      Match(R"(device.attributes["gpu.tessera.dev"].productName.startsWith("NVIDIA H100"))", g));
  EXPECT_TRUE(Match(R"(device.attributes["gpu.tessera.dev"].productName.contains('80GB'))", g));
  EXPECT_TRUE(Match(R"(!(device.attributes["gpu.tessera.dev"].type == "mig"))", g));
  EXPECT_TRUE(Match(R"(device.attributes["example.com"].healthy)", g)) << "a qualified name";
  EXPECT_TRUE(Match(R"(device.capacity["gpu.tessera.dev"].memory.isGreaterThan(quantity("79Gi"))
                       && device.capacity["gpu.tessera.dev"].memory.isLessThan(quantity("81Gi")))",
                    g));
  EXPECT_TRUE(Match(R"("b" > "a" && 2 > 1.5 && -1 < 0 && size("abc") == 3)", g));
  EXPECT_TRUE(Match(R"(device.driver == "gpu.tessera.dev")", g));
}

TEST(DeviceCelTest, EvaluationErrorsNameTheCauseUnlessAbsorbed) {
  const CelValue m = Mig();
  absl::Status s = EvalError(R"(device.attributes["gpu.tessera.dev"].nvlinkDomain == 1)", m);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no such key: nvlinkDomain"));
  // Absorbed on either side.
  EXPECT_FALSE(Match(R"(device.attributes["gpu.tessera.dev"].nvlinkDomain == 1 && false)", m));
  EXPECT_TRUE(Match(R"(true || device.attributes["gpu.tessera.dev"].nvlinkDomain == 1)", m));
  EXPECT_THAT(EvalError(R"(device.attributes["gpu.tessera.dev"].profile < 3)", m).message(),
              HasSubstr("no matching overload for '<' on string and int"));
  EXPECT_THAT(
      EvalError(R"(device.capacity["gpu.tessera.dev"].memory >= quantity("1Gi"))", m).message(),
      HasSubstr("use compareTo"));
  EXPECT_THAT(EvalError(R"(device.attributes["gpu.tessera.dev"].type)", m).message(),
              HasSubstr("expected a bool, got string"));
}

TEST(DeviceCelTest, UnsupportedExpressionsAreRefusedNamingThem) {
  for (const char* bad : {
           R"(device.attributes["x"].all(a, a == 1))",
           R"(device.attributes["x"].name.matches("^a"))",
           R"(has(device.attributes.x))",
           R"(device.driver == "a" ? true : false)",
           R"(other.driver == "a")",
           R"(device.driver == )",
           R"(device.driver == "unterminated)",
       }) {
    absl::StatusOr<DeviceSelector> s = DeviceSelector::Parse(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.status().message(), HasSubstr(bad)) << "names the expression";
  }
  EXPECT_THAT(DeviceSelector::Parse(R"(device.x.all(a, true))").status().message(),
              HasSubstr("method all() is not supported"));
  EXPECT_THAT(DeviceSelector::Parse(R"(has(device.x))").status().message(),
              HasSubstr("function has() is not supported"));
}

}  // namespace
}  // namespace tessera::kube
