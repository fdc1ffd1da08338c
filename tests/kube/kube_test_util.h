// Helpers for the kube integration tests: one KubeBed per test binary (started by the first test,
// torn down at exit), clients for its kubeconfigs, and waits on conditions signalled by events.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kube/kubeconfig.h"
#include "kube/rest_client.h"
#include "kube/testing/kube_bed.h"

namespace tessera::testing {

// Stops and frees the shared bed when the test program ends (gtest owns this environment).
class KubeBedStopper : public ::testing::Environment {
 public:
  explicit KubeBedStopper(KubeBed* bed) : bed_(bed) {}
  void TearDown() override {
    bed_->Stop();
    delete bed_;
  }

 private:
  KubeBed* bed_;
};

// `opts` with the bed's binaries looked up from this source tree (TESSERA_SOURCE_DIR, defined by
// tests/kube/CMakeLists.txt) unless it names another.
inline KubeBedOptions TestBedOptions(KubeBedOptions opts = {}) {
  if (opts.source_dir.empty()) opts.source_dir = TESSERA_SOURCE_DIR;
  return opts;
}

// The shared bed, or null with `why` set (the test then skips). Started once per process.
inline KubeBed* SharedBed(std::string* why, const KubeBedOptions& opts = {}) {
  static KubeBed* bed = nullptr;
  static std::string error;
  static bool tried = false;
  if (!tried) {
    tried = true;
    auto* b = new KubeBed();
    error = b->Start(TestBedOptions(opts));
    if (error.empty()) {
      bed = b;
      ::testing::AddGlobalTestEnvironment(new KubeBedStopper(b));
    } else {
      b->Stop();
      delete b;
    }
  }
  *why = error;
  return bed;
}

// Skips the test (with what to run) when the bed binaries are missing; fails when they are there
// but the bed does not start.
#define KUBE_BED_OR_SKIP(bed_var, ...)                                                            \
  std::string bed_why_;                                                                           \
  ::tessera::testing::KubeBed* bed_var = ::tessera::testing::SharedBed(&bed_why_, ##__VA_ARGS__); \
  if (bed_var == nullptr) {                                                                       \
    std::string bin_why_;                                                                         \
    if (::tessera::testing::KubeBed::FindBin(&bin_why_, ::tessera::testing::TestBedOptions())     \
            .empty()) {                                                                           \
      GTEST_SKIP() << "kube bed unavailable: " << bin_why_;                                       \
    }                                                                                             \
    FAIL() << "the kube bed did not start: " << bed_why_;                                         \
  }

// A client from one of the bed's kubeconfigs.
inline std::unique_ptr<kube::RestClient> ClientFor(const std::string& kubeconfig,
                                                   kube::RestOptions opts = {}) {
  absl::StatusOr<kube::KubeConfig> c = kube::LoadKubeconfig({kubeconfig, "", nullptr});
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<kube::RestClient>> rc = kube::RestClient::Create(*c, opts);
  EXPECT_TRUE(rc.ok()) << rc.status();
  return rc.ok() ? *std::move(rc) : nullptr;
}

// Waits until `pred` (evaluated under `mu`, which the signalling side holds when it changes what
// `pred` reads) holds, for at most `timeout`.
inline bool AwaitTrue(absl::Mutex& mu, const std::function<bool()>& pred, absl::Duration timeout) {
  absl::MutexLock lock(&mu);
  return mu.AwaitWithTimeout(absl::Condition(&pred), timeout);
}

// A namespace unique to the test, created with the admin client.
inline std::string MakeNamespace(kube::RestClient& c, const std::string& base) {
  static int n = 0;
  const std::string name = base + "-" + std::to_string(getpid()) + "-" + std::to_string(++n);
  absl::StatusOr<kube::Json> r =
      c.Create(kube::NamespacesResource(), "",
               {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}});
  EXPECT_TRUE(r.ok()) << r.status();
  return name;
}

}  // namespace tessera::testing
