#include "deviceplugin/node_annotator.h"

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "deviceplugin/inventory.h"
#include "deviceplugin/testing/fake_nodes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::deviceplugin {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

NvLinkDomains DomainsOf(const std::string& yaml, MigStrategy strategy = MigStrategy::kMixed) {
  absl::StatusOr<agent::NodeSnapshot> node = testing::DiscoverYaml(yaml);
  EXPECT_TRUE(node.ok()) << node.status();
  if (!node.ok()) return {};
  return NvLinkDomainsOf(*node, BuildInventory(*node, strategy));
}

// 4 x L40S, PCIe only: pairs behind PCIe switches, the pairs on two sockets.
constexpr char kPcieOnly4[] = R"(
driver_version: "550.90.07"
defaults: {model: NVIDIA L40S, memory_mib: 46068}
gpus:
  - {uuid: GPU-l40s-0, pci_bus_id: "00000000:17:00.0", numa_node: 0}
  - {uuid: GPU-l40s-1, pci_bus_id: "00000000:31:00.0", numa_node: 0}
  - {uuid: GPU-l40s-2, pci_bus_id: "00000000:B1:00.0", numa_node: 1}
  - {uuid: GPU-l40s-3, pci_bus_id: "00000000:CA:00.0", numa_node: 1}
topology:
  - {gpus: [0, 1], level: SINGLE}
  - {gpus: [2, 3], level: SINGLE}
)";

// kPciePairs4's NVLink-bridged pairs (0,1) (2,3), GPU 0 in MIG mode.
constexpr char kPairsGpu0Mig[] = R"(
driver_version: "550.90.07"
defaults: {model: NVIDIA A100 80GB PCIe, memory_mib: 81920}
gpus:
  - uuid: GPU-p-0
    pci_bus_id: "00000000:17:00.0"
    numa_node: 0
    mig:
      instances:
        - {profile: 3g.40gb, uuid: MIG-p-0, memory_mib: 40192}
  - {uuid: GPU-p-1, pci_bus_id: "00000000:31:00.0", numa_node: 0}
  - {uuid: GPU-p-2, pci_bus_id: "00000000:B1:00.0", numa_node: 1}
  - {uuid: GPU-p-3, pci_bus_id: "00000000:CA:00.0", numa_node: 1}
nvlink_pairs:
  - {gpus: [0, 1], links: 12}
  - {gpus: [2, 3], links: 12}
)";

TEST(NvLinkDomainsTest, NvSwitchNodeIsOneIsland) {
  const NvLinkDomains d = DomainsOf(testing::kNvSwitch8);
  EXPECT_EQ(d.value, "0,0,0,0,0,0,0,0");
  EXPECT_TRUE(d.complete);
}

TEST(NvLinkDomainsTest, NvLinkBridgedPairsAreIslandsInGpuOrder) {
  EXPECT_EQ(DomainsOf(testing::kPciePairs4).value, "0,0,1,1");
}

TEST(NvLinkDomainsTest, PcieOnlyGpusAreEachTheirOwnIsland) {
  // Each id once: the scheduler reads this as it reads "-1,-1,-1,-1" (no NVLink pair).
  EXPECT_EQ(DomainsOf(kPcieOnly4).value, "0,1,2,3");
}

TEST(NvLinkDomainsTest, OnlyTheWholeGpusOfNvidiaComGpuCount) {
  // Mixed strategy: GPU 0 is MIG devices, not nvidia.com/gpu; GPU 1 lost its NVLink peer, and
  // the ids are positions among the three whole GPUs.
  EXPECT_EQ(DomainsOf(kPairsGpu0Mig).value, "0,1,1");
  EXPECT_EQ(DomainsOf(kPairsGpu0Mig, MigStrategy::kNone).value, "0,0,1,1");
  EXPECT_EQ(DomainsOf(testing::kMigMixed2).value, "0");
}

TEST(NvLinkDomainsTest, NoWholeGpuIsTheEmptyValue) {
  agent::NodeSnapshot none;
  EXPECT_EQ(NvLinkDomainsOf(none, BuildInventory(none, MigStrategy::kMixed)).value, "");
}

TEST(NvLinkDomainsTest, AListedGpuWithoutItsBusIdMakesItIncomplete) {
  absl::StatusOr<agent::NodeSnapshot> node = testing::DiscoverYaml(testing::kPciePairs4);
  ASSERT_TRUE(node.ok()) << node.status();
  node->gpus[2].info.pci_bus_id.clear();
  EXPECT_FALSE(NvLinkDomainsOf(*node, BuildInventory(*node, MigStrategy::kMixed)).complete);
  // A metrics error alone says nothing about links.
  node = testing::DiscoverYaml(testing::kPciePairs4);
  node->gpus[2].error = "UNAVAILABLE: metrics";
  EXPECT_TRUE(NvLinkDomainsOf(*node, BuildInventory(*node, MigStrategy::kMixed)).complete);
}

TEST(NvLinkDomainsTest, ALostGpuLeavesTheListAndItsPeerItsIsland) {
  absl::StatusOr<agent::NodeSnapshot> node = testing::DiscoverYaml(testing::kPciePairs4);
  ASSERT_TRUE(node.ok()) << node.status();
  // What discovery reports for a GPU that no longer answers: its index and the error.
  node->gpus[2] = agent::GpuSnapshot{};
  node->gpus[2].info.index = 2;
  node->gpus[2].error = "UNAVAILABLE: GPU is lost";
  const NvLinkDomains d = NvLinkDomainsOf(*node, BuildInventory(*node, MigStrategy::kMixed));
  EXPECT_EQ(d.value, "0,0,1");  // three nvidia.com/gpu devices, as kubelet counts them
  EXPECT_TRUE(d.complete);
}

// --- The annotator, with a patcher that records (and may fail) ----------------------------------

class RecordingPatcher {
 public:
  NodePatcher patcher() {
    return [this](const std::string& value) {
      absl::MutexLock l(&mu_);
      calls_.push_back(value);
      if (failures_ > 0) {
        --failures_;
        return absl::UnavailableError("apiserver down");
      }
      return absl::OkStatus();
    };
  }
  void FailNext(int n) {
    absl::MutexLock l(&mu_);
    failures_ = n;
  }
  // Waits (real time, bounded) until `n` patches were tried.
  std::vector<std::string> AwaitCalls(size_t n) {
    absl::MutexLock l(&mu_);
    auto enough = [&] { return calls_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(20));
    return calls_;
  }
  std::vector<std::string> calls() {
    absl::MutexLock l(&mu_);
    return calls_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  int failures_ ABSL_GUARDED_BY(mu_) = 0;
};

class NodeAnnotatorTest : public ::testing::Test {
 protected:
  NodeAnnotatorOptions Options() {
    NodeAnnotatorOptions o;
    o.node_name = "gpu-1";
    o.poll = absl::Milliseconds(2);
    o.resync_every = absl::ZeroDuration();
    o.log = [this](absl::string_view line) {
      absl::MutexLock l(&log_mu_);
      log_.emplace_back(line);
    };
    return o;
  }
  std::vector<std::string> Log() {
    absl::MutexLock l(&log_mu_);
    return log_;
  }
  // Waits until `n` lines were logged: the annotator logs once it has taken a patch's outcome
  // (and set its next deadline), so the clock may move after this.
  void AwaitLog(size_t n) {
    absl::MutexLock l(&log_mu_);
    auto enough = [&] { return log_.size() >= n; };
    EXPECT_TRUE(log_mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(20)));
  }
  // Lets the annotator's thread look at the clock a few times without anything due.
  static void Settle() { absl::SleepFor(absl::Milliseconds(30)); }

  ManualClock clock_;
  RecordingPatcher patcher_;
  absl::Mutex log_mu_;
  std::vector<std::string> log_ ABSL_GUARDED_BY(log_mu_);
};

TEST_F(NodeAnnotatorTest, WritesTheFirstValueAndEachChangeOnly) {
  NodeAnnotator a(patcher_.patcher(), clock_, Options());
  a.Start();
  Settle();
  EXPECT_TRUE(patcher_.calls().empty());  // nothing known yet
  a.Set({"0,0,1,1", true});
  EXPECT_THAT(patcher_.AwaitCalls(1), ElementsAre("0,0,1,1"));
  a.Set({"0,0,1,1", true});
  clock_.Advance(absl::Hours(1));
  Settle();
  EXPECT_EQ(patcher_.calls().size(), 1u);
  a.Set({"0,0,0,0", true});
  EXPECT_THAT(patcher_.AwaitCalls(2), ElementsAre("0,0,1,1", "0,0,0,0"));
  a.Stop();
  EXPECT_EQ(a.written(), "0,0,0,0");
  EXPECT_THAT(Log(), ElementsAre("node gpu-1: tessera.dev/nvlink-domains=0,0,1,1",
                                 "node gpu-1: tessera.dev/nvlink-domains=0,0,0,0"));
}

TEST_F(NodeAnnotatorTest, RetriesWithDoublingBackoffOnTheClock) {
  patcher_.FailNext(3);
  NodeAnnotatorOptions o = Options();
  o.retry_initial = absl::Seconds(1);
  o.retry_max = absl::Seconds(3);
  NodeAnnotator a(patcher_.patcher(), clock_, o);
  a.Set({"0,1", true});
  a.Start();
  AwaitLog(1);
  Settle();
  EXPECT_EQ(patcher_.calls().size(), 1u);  // not before the backoff
  clock_.Advance(absl::Seconds(1));
  AwaitLog(2);
  EXPECT_EQ(patcher_.calls().size(), 2u);
  clock_.Advance(absl::Seconds(1));
  Settle();
  EXPECT_EQ(patcher_.calls().size(), 2u);  // 2 s now
  clock_.Advance(absl::Seconds(1));
  AwaitLog(3);
  EXPECT_EQ(patcher_.calls().size(), 3u);
  clock_.Advance(absl::Seconds(3));  // capped at retry_max
  EXPECT_THAT(patcher_.AwaitCalls(4), ElementsAre("0,1", "0,1", "0,1", "0,1"));
  a.Stop();
  EXPECT_EQ(a.written(), "0,1");
  EXPECT_EQ(a.attempts(), 4);
  const std::vector<std::string> log = Log();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_THAT(log[0], HasSubstr("apiserver down; retrying in 1s"));
  EXPECT_THAT(log[1], HasSubstr("retrying in 2s"));
  EXPECT_THAT(log[2], HasSubstr("retrying in 3s"));
}

TEST_F(NodeAnnotatorTest, ANewValueDuringTheBackoffIsWrittenWhenItEnds) {
  patcher_.FailNext(1);
  NodeAnnotator a(patcher_.patcher(), clock_, Options());
  a.Set({"0,1", true});
  a.Start();
  AwaitLog(1);
  a.Set({"0,0", true});
  Settle();
  EXPECT_EQ(patcher_.calls().size(), 1u);
  clock_.Advance(absl::Seconds(1));
  EXPECT_THAT(patcher_.AwaitCalls(2), ElementsAre("0,1", "0,0"));
}

TEST_F(NodeAnnotatorTest, AnIncompleteSnapshotKeepsTheCompleteValue) {
  NodeAnnotator a(patcher_.patcher(), clock_, Options());
  a.Start();
  a.Set({"0,0,1,2", false});  // nothing better known yet: written
  patcher_.AwaitCalls(1);
  a.Set({"0,0,1,1", true});
  patcher_.AwaitCalls(2);
  a.Set({"0,0,1,2", false});  // GPU 2's bus id unknown: its NVLink too, the islands stay
  Settle();
  EXPECT_THAT(patcher_.calls(), ElementsAre("0,0,1,2", "0,0,1,1"));
  a.Set({"0,0,1", false});  // but not with another number of GPUs
  EXPECT_THAT(patcher_.AwaitCalls(3), ElementsAre("0,0,1,2", "0,0,1,1", "0,0,1"));
  a.Set({"0,0", true});
  EXPECT_THAT(patcher_.AwaitCalls(4), ElementsAre("0,0,1,2", "0,0,1,1", "0,0,1", "0,0"));
}

TEST_F(NodeAnnotatorTest, ResyncsTheSameValueQuietly) {
  NodeAnnotatorOptions o = Options();
  o.resync_every = absl::Minutes(10);
  NodeAnnotator a(patcher_.patcher(), clock_, o);
  a.Set({"0", true});
  a.Start();
  AwaitLog(1);
  clock_.Advance(absl::Minutes(9));
  Settle();
  EXPECT_EQ(patcher_.calls().size(), 1u);
  clock_.Advance(absl::Minutes(1));
  EXPECT_THAT(patcher_.AwaitCalls(2), ElementsAre("0", "0"));
  a.Stop();
  EXPECT_EQ(Log().size(), 1u);
}

TEST_F(NodeAnnotatorTest, TheEmptyValueIsWrittenToRemoveTheAnnotation) {
  NodeAnnotator a(patcher_.patcher(), clock_, Options());
  a.Start();
  a.Set({"", true});
  EXPECT_THAT(patcher_.AwaitCalls(1), ElementsAre(""));
  a.Stop();
  EXPECT_THAT(Log(), ElementsAre("node gpu-1: removed tessera.dev/nvlink-domains"));
}

TEST_F(NodeAnnotatorTest, StopWithoutStartAndTwice) {
  NodeAnnotator a(patcher_.patcher(), clock_, Options());
  a.Stop();
  a.Stop();
  EXPECT_TRUE(patcher_.calls().empty());
}

}  // namespace
}  // namespace tessera::deviceplugin
