#include "dra/cdi.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace tessera::dra {

std::string CdiDeviceId(const CdiClaim& claim, const DraDevice& device) {
  return absl::StrCat(claim.driver, "/claim=", claim.claim_uid, "-", device.name);
}

std::string CdiSpecPath(const std::string& cdi_dir, const CdiClaim& claim,
                        const std::string& device_name) {
  return (std::filesystem::path(cdi_dir) /
          absl::StrCat(claim.driver, "-claim-", claim.claim_uid, "-", device_name, ".json"))
      .string();
}

kube::Json CdiSpecJson(const CdiClaim& claim, const DraDevice& device, const std::string& dev_root,
                       const std::map<std::string, std::string>& env) {
  auto host = [&](const std::string& path) {
    if (dev_root.empty() || dev_root == "/") return path;
    return (std::filesystem::path(dev_root) / path.substr(1)).string();
  };
  kube::Json nodes = kube::Json::array();
  auto node = [&](const std::string& path) {
    nodes.push_back({{"path", path}, {"hostPath", host(path)}});
  };
  if (device.minor) node(absl::StrCat("/dev/nvidia", *device.minor));
  node("/dev/nvidiactl");
  node("/dev/nvidia-uvm");
  node("/dev/nvidia-uvm-tools");
  kube::Json vars = {
      absl::StrCat("NVIDIA_VISIBLE_DEVICES=", device.uuid),
      absl::StrCat("TESSERA_DRA_CLAIM=", claim.claim_namespace, "/", claim.claim_name)};
  for (const auto& [name, value] : env) vars.push_back(absl::StrCat(name, "=", value));
  return {{"cdiVersion", kCdiVersion},
          {"kind", absl::StrCat(claim.driver, "/claim")},
          {"devices",
           {{{"name", absl::StrCat(claim.claim_uid, "-", device.name)},
             {"containerEdits", {{"env", std::move(vars)}, {"deviceNodes", std::move(nodes)}}}}}}};
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << contents;
    f.flush();
    if (!f) return absl::InternalError(absl::StrCat("writing ", tmp, ": ", std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return absl::InternalError(
        absl::StrCat("renaming ", tmp, " to ", path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> WriteCdiSpec(const std::string& cdi_dir, const CdiClaim& claim,
                                         const DraDevice& device, const std::string& dev_root,
                                         const std::map<std::string, std::string>& env) {
  std::error_code ec;
  std::filesystem::create_directories(cdi_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("--cdi-dir ", cdi_dir, ": ", ec.message()));
  const std::string path = CdiSpecPath(cdi_dir, claim, device.name);
  absl::Status st =
      WriteFileAtomically(path, CdiSpecJson(claim, device, dev_root, env).dump(2) + "\n");
  if (!st.ok()) return st;
  return path;
}

absl::Status RemoveCdiSpec(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
  if (ec) return absl::InternalError(absl::StrCat("removing ", path, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace tessera::dra
