// ClaimPreparer: NodePrepareResources / NodeUnprepareResources for one claim, the driver's state
// behind kubelet's DRA API.
//
// Prepare(claim): a claim already prepared (in memory, or in the checkpoint a previous run left)
// answers with the same devices at once, without reading the API or writing anything: repeated
// calls and a driver restart never prepare twice. Otherwise the ResourceClaim is read from the
// API (namespace/name; its metadata.uid must be the uid kubelet gave, or the claim was deleted
// and recreated), and every result of status.allocation.devices.results whose driver is this
// driver must be in this node's pool and name a device this node publishes; each gets a CDI
// spec file (cdi.h) and the claim is checkpointed before the answer. A claim with no result
// for this driver prepares with no devices. An error names the claim and what is wrong, and
// leaves nothing behind (files written for the claim are removed).
// Unprepare(claim): removes the claim's CDI files (those the checkpoint lists, and any
// <driver>-claim-<uid>-*.json left by a run whose checkpoint was lost) and forgets the claim;
// an unknown claim is already unprepared (OK).
// Thread safety: all methods may be called from any thread; calls are serialized (a prepare that
// reads the API holds the lock, so a concurrent call for the same claim never prepares twice).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "dra/checkpoint.h"
#include "dra/devices.h"
#include "kube/objects.h"

namespace tessera::dra {

// Reads ResourceClaim namespace/name from the API; NotFound when it does not exist.
using ClaimGetter =
    std::function<absl::StatusOr<kube::Json>(const std::string& ns, const std::string& name)>;

struct ClaimRef {
  std::string claim_namespace, claim_name, uid;
};

struct PreparerOptions {
  std::string driver = kDefaultDriverName;
  std::string pool;  // this node's pool: the node name
  std::string cdi_dir = "/var/run/cdi";
  std::string checkpoint_path;
  std::string dev_root = "/";
  // One line per event (a corrupted checkpoint, each prepare and unprepare); default stderr.
  std::function<void(absl::string_view)> log;
};

class ClaimPreparer {
 public:
  ClaimPreparer(ClaimGetter get, std::vector<DraDevice> devices, PreparerOptions options);

  // Reads the checkpoint. A corrupted one is reported (logged, and returned as DataLoss) and the
  // preparer starts empty: kubelet's calls prepare the claims again.
  absl::Status Load();

  absl::StatusOr<std::vector<PreparedDevice>> Prepare(const ClaimRef& claim);
  absl::Status Unprepare(const ClaimRef& claim);

  PreparedClaims prepared() const;

 private:
  absl::StatusOr<PreparedClaim> PrepareNew(const ClaimRef& claim)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Log(absl::string_view line) const;

  const ClaimGetter get_;
  const std::vector<DraDevice> devices_;
  const PreparerOptions options_;
  mutable absl::Mutex mu_;
  PreparedClaims prepared_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::dra
