#include "dra/preparer.h"

#include <filesystem>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dra/cdi.h"
#include "dra/claim_config.h"

namespace tessera::dra {
namespace {

std::string Describe(const ClaimRef& c) {
  return absl::StrCat("ResourceClaim ", c.claim_namespace, "/", c.claim_name, " (uid ", c.uid, ")");
}

}  // namespace

ClaimPreparer::ClaimPreparer(ClaimGetter get, std::vector<DraDevice> devices,
                             PreparerOptions options)
    : get_(std::move(get)), devices_(std::move(devices)), options_(std::move(options)) {}

void ClaimPreparer::Log(absl::string_view line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::cerr << "dra-driver: " << line << "\n";
  }
}

absl::Status ClaimPreparer::Load() {
  absl::StatusOr<PreparedClaims> loaded = LoadCheckpoint(options_.checkpoint_path);
  absl::MutexLock l(&mu_);
  if (!loaded.ok()) {
    Log(absl::StrCat(loaded.status().message(),
                     "; starting with no prepared claims (kubelet prepares them again)"));
    prepared_.clear();
    return loaded.status();
  }
  prepared_ = *std::move(loaded);
  Log(absl::StrCat(prepared_.size(), " prepared claim(s) from ", options_.checkpoint_path));
  return absl::OkStatus();
}

PreparedClaims ClaimPreparer::prepared() const {
  absl::MutexLock l(&mu_);
  return prepared_;
}

absl::StatusOr<std::vector<PreparedDevice>> ClaimPreparer::Prepare(const ClaimRef& claim) {
  if (claim.uid.empty()) return absl::InvalidArgumentError("claim: uid is empty");
  if (claim.claim_namespace.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("claim ", claim.uid, ": namespace is empty"));
  }
  if (claim.claim_name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("claim ", claim.uid, ": name is empty"));
  }
  absl::MutexLock l(&mu_);
  if (auto it = prepared_.find(claim.uid); it != prepared_.end()) return it->second.devices;
  absl::StatusOr<PreparedClaim> pc = PrepareNew(claim);
  if (!pc.ok()) {
    Log(absl::StrCat("prepare: ", pc.status().message()));
    return pc.status();
  }
  PreparedClaims next = prepared_;
  next[claim.uid] = *pc;
  if (absl::Status st = SaveCheckpoint(options_.checkpoint_path, next); !st.ok()) {
    for (const std::string& f : pc->cdi_files) RemoveCdiSpec(f).IgnoreError();
    return absl::Status(st.code(),
                        absl::StrCat(Describe(claim), ": checkpointing: ", st.message()));
  }
  prepared_ = std::move(next);
  std::vector<std::string> names;
  for (const PreparedDevice& d : pc->devices) names.push_back(d.device_name);
  Log(absl::StrCat("prepared ", Describe(claim), ": ",
                   names.empty() ? "no devices of this driver" : absl::StrJoin(names, ", ")));
  return pc->devices;
}

absl::StatusOr<PreparedClaim> ClaimPreparer::PrepareNew(const ClaimRef& claim) {
  absl::StatusOr<kube::Json> obj = get_(claim.claim_namespace, claim.claim_name);
  if (!obj.ok()) {
    return absl::Status(obj.status().code(),
                        absl::StrCat(Describe(claim), ": ", obj.status().message()));
  }
  const kube::Json& meta = (*obj)["metadata"];
  const std::string uid = meta.is_object() ? meta.value("uid", "") : "";
  if (uid != claim.uid) {
    return absl::FailedPreconditionError(absl::StrCat(Describe(claim),
                                                      ": the API's claim of that name has uid ",
                                                      uid, " (deleted and created again?)"));
  }
  const kube::Json* results = nullptr;
  const kube::Json status = obj->value("status", kube::Json::object());
  if (status.contains("allocation") && status["allocation"].contains("devices") &&
      status["allocation"]["devices"].contains("results")) {
    results = &status["allocation"]["devices"]["results"];
  }
  if (results == nullptr || !results->is_array()) {
    return absl::FailedPreconditionError(
        absl::StrCat(Describe(claim), ": not allocated (status.allocation.devices.results)"));
  }
  PreparedClaim out;
  out.claim_namespace = claim.claim_namespace;
  out.claim_name = claim.claim_name;
  const CdiClaim cdi{options_.driver, claim.uid, claim.claim_namespace, claim.claim_name};
  absl::Status error;
  for (size_t i = 0; i < results->size() && error.ok(); ++i) {
    const kube::Json& r = (*results)[i];
    if (!r.is_object() || r.value("driver", "") != options_.driver) continue;
    const std::string field = absl::StrCat("status.allocation.devices.results[", i, "]");
    const std::string pool = r.value("pool", "");
    const std::string device = r.value("device", "");
    if (pool != options_.pool) {
      error = absl::FailedPreconditionError(absl::StrCat(Describe(claim), ": ", field, ": pool '",
                                                         pool, "' is not this node's ('",
                                                         options_.pool, "')"));
      break;
    }
    const DraDevice* dev = nullptr;
    for (const DraDevice& d : devices_) {
      if (d.name == device) dev = &d;
    }
    if (dev == nullptr) {
      error = absl::NotFoundError(absl::StrCat(Describe(claim), ": ", field, ": device '", device,
                                               "' is not a device of this node"));
      break;
    }
    const std::string request = r.value("request", "");
    absl::StatusOr<DeviceConfig> config =
        ConfigForDevice(status["allocation"]["devices"].value("config", kube::Json::array()),
                        options_.driver, request);
    if (!config.ok()) {
      error = absl::InvalidArgumentError(
          absl::StrCat(Describe(claim), ": ", config.status().message()));
      break;
    }
    absl::StatusOr<std::string> path =
        WriteCdiSpec(options_.cdi_dir, cdi, *dev, options_.dev_root, config->env);
    if (!path.ok()) {
      error = absl::Status(path.status().code(),
                           absl::StrCat(Describe(claim), ": ", path.status().message()));
      break;
    }
    out.cdi_files.push_back(*path);
    PreparedDevice pd;
    if (r.contains("request") && r["request"].is_string()) {
      pd.request_names.push_back(r["request"].get<std::string>());
    }
    pd.pool_name = pool;
    pd.device_name = device;
    pd.cdi_device_ids.push_back(CdiDeviceId(cdi, *dev));
    out.devices.push_back(std::move(pd));
  }
  if (!error.ok()) {
    for (const std::string& f : out.cdi_files) RemoveCdiSpec(f).IgnoreError();
    return error;
  }
  return out;
}

absl::Status ClaimPreparer::Unprepare(const ClaimRef& claim) {
  if (claim.uid.empty()) return absl::InvalidArgumentError("claim: uid is empty");
  absl::MutexLock l(&mu_);
  std::vector<std::string> files;
  if (auto it = prepared_.find(claim.uid); it != prepared_.end()) files = it->second.cdi_files;
  // Files of this claim that a run with a lost checkpoint wrote.
  const std::string prefix = absl::StrCat(options_.driver, "-claim-", claim.uid, "-");
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(options_.cdi_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (absl::StartsWith(name, prefix) && absl::EndsWith(name, ".json")) {
      files.push_back(e.path().string());
    }
  }
  for (const std::string& f : files) {
    if (absl::Status st = RemoveCdiSpec(f); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat(Describe(claim), ": ", st.message()));
    }
  }
  if (prepared_.count(claim.uid) == 0) return absl::OkStatus();
  PreparedClaims next = prepared_;
  next.erase(claim.uid);
  if (absl::Status st = SaveCheckpoint(options_.checkpoint_path, next); !st.ok()) {
    return absl::Status(st.code(),
                        absl::StrCat(Describe(claim), ": checkpointing: ", st.message()));
  }
  prepared_ = std::move(next);
  Log(absl::StrCat("unprepared ", Describe(claim)));
  return absl::OkStatus();
}

}  // namespace tessera::dra
