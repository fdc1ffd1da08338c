// Helpers for the kube integration tests: one KubeBed per test binary (started by the first test,
// torn down at exit), clients for its kubeconfigs, and waits on conditions signalled by events.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
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

// Polls `done` every 100 ms until it holds or `timeout` passes (for what the apiserver does in the
// background and announces by no event a test can wait on, such as a CRD becoming served).
inline bool PollUntil(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return true;
}

// One request a component might make, as a SubjectAccessReview's resourceAttributes.
struct Access {
  std::string verb, group, resource, subresource, ns, name;
  std::string ToString() const {
    return absl::StrCat(verb, " ", group.empty() ? "" : group + "/", resource,
                        subresource.empty() ? "" : "/" + subresource, " ",
                        ns.empty() ? "(cluster)" : ns, "/", name);
  }
};

// Would ServiceAccount `sa_namespace`/`sa_name` (with the groups its token carries) be allowed
// `a`? Asked by `admin` with a SubjectAccessReview.
inline absl::StatusOr<bool> ServiceAccountMay(kube::RestClient& admin,
                                              const std::string& sa_namespace,
                                              const std::string& sa_name, const Access& a) {
  nlohmann::json attrs = {{"verb", a.verb}, {"group", a.group}, {"resource", a.resource}};
  if (!a.subresource.empty()) attrs["subresource"] = a.subresource;
  if (!a.ns.empty()) attrs["namespace"] = a.ns;
  if (!a.name.empty()) attrs["name"] = a.name;
  const nlohmann::json review = {
      {"apiVersion", "authorization.k8s.io/v1"},
      {"kind", "SubjectAccessReview"},
      {"spec",
       {{"user", "system:serviceaccount:" + sa_namespace + ":" + sa_name},
        {"groups",
         {"system:serviceaccounts", "system:serviceaccounts:" + sa_namespace,
          "system:authenticated"}},
        {"resourceAttributes", attrs}}}};
  absl::StatusOr<nlohmann::json> r = admin.Create(
      {"authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", false}, "",
      review);
  if (!r.ok()) return r.status();
  return (*r)["status"].value("allowed", false);
}

}  // namespace tessera::testing
