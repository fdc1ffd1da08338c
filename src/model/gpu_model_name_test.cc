#include "model/gpu_model_name.h"

#include <gtest/gtest.h>

namespace tessera::model {
namespace {

TEST(GpuModelNameTest, ShortAliasesMatchNvmlNames) {
  EXPECT_TRUE(GpuModelMatches("H100", "NVIDIA H100 80GB HBM3"));
  EXPECT_TRUE(GpuModelMatches("H100", "NVIDIA H100 PCIe"));
  EXPECT_TRUE(GpuModelMatches("h100", "NVIDIA H100 NVL"));
  EXPECT_TRUE(GpuModelMatches("H100-PCIe", "NVIDIA H100 PCIe"));
  EXPECT_FALSE(GpuModelMatches("H100-PCIe", "NVIDIA H100 80GB HBM3"));
  EXPECT_TRUE(GpuModelMatches("A100-80GB", "NVIDIA A100-SXM4-80GB"));
  EXPECT_TRUE(GpuModelMatches("A100-80GB", "NVIDIA A100 80GB PCIe"));
  EXPECT_FALSE(GpuModelMatches("A100-80GB", "NVIDIA A100-SXM4-40GB"));
  EXPECT_TRUE(GpuModelMatches("L40S", "NVIDIA L40S"));
  EXPECT_FALSE(GpuModelMatches("L40", "NVIDIA L40S"));
  EXPECT_FALSE(GpuModelMatches("A10", "NVIDIA A100-SXM4-80GB"));
  EXPECT_FALSE(GpuModelMatches("H100", "NVIDIA H200"));
  EXPECT_TRUE(GpuModelMatches("V100", "Tesla V100-SXM2-32GB"));
}

TEST(GpuModelNameTest, ExactNamesMatchAndNonFamiliesAreNoAliases) {
  EXPECT_TRUE(GpuModelMatches("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"));
  EXPECT_TRUE(GpuModelMatches("V100M32", "V100M32"));  // a fleet's own short names
  EXPECT_FALSE(GpuModelMatches("NVIDIA", "NVIDIA H100 80GB HBM3"));
  EXPECT_FALSE(GpuModelMatches("80GB", "NVIDIA H100 80GB HBM3"));
  EXPECT_FALSE(GpuModelMatches("", "NVIDIA H100 80GB HBM3"));
  EXPECT_TRUE(AnyGpuModelMatches({}, "anything"));
  EXPECT_TRUE(AnyGpuModelMatches({"A100", "H100"}, "NVIDIA H100 80GB HBM3"));
  EXPECT_FALSE(AnyGpuModelMatches({"A100"}, "NVIDIA H100 80GB HBM3"));
}

}  // namespace
}  // namespace tessera::model
