#include "dra/checkpoint.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dra/cdi.h"
#include "kube/objects.h"

namespace tessera::dra {
namespace {

using kube::Json;

std::string Checksum(const std::string& s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return absl::StrFormat("%016x", h);
}

Json ClaimsJson(const PreparedClaims& claims) {
  Json out = Json::object();
  for (const auto& [uid, c] : claims) {
    Json devices = Json::array();
    for (const PreparedDevice& d : c.devices) {
      devices.push_back({{"request_names", d.request_names},
                         {"pool_name", d.pool_name},
                         {"device_name", d.device_name},
                         {"cdi_device_ids", d.cdi_device_ids}});
    }
    out[uid] = {{"namespace", c.claim_namespace},
                {"name", c.claim_name},
                {"devices", std::move(devices)},
                {"cdi_files", c.cdi_files}};
  }
  return out;
}

}  // namespace

absl::StatusOr<PreparedClaims> LoadCheckpoint(const std::string& path) {
  if (!std::filesystem::exists(path)) return PreparedClaims{};
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  auto bad = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": ", why));
  };
  const Json j = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  if (j.value("version", 0) != 1) return bad("version is not 1");
  if (!j.contains("claims") || !j["claims"].is_object()) return bad("claims: not an object");
  if (!j.contains("checksum") || !j["checksum"].is_string() ||
      j["checksum"].get<std::string>() != Checksum(j["claims"].dump())) {
    return bad("checksum does not match its claims");
  }
  PreparedClaims out;
  try {
    for (const auto& [uid, c] : j["claims"].items()) {
      PreparedClaim pc;
      pc.claim_namespace = c.at("namespace").get<std::string>();
      pc.claim_name = c.at("name").get<std::string>();
      pc.cdi_files = c.at("cdi_files").get<std::vector<std::string>>();
      for (const Json& d : c.at("devices")) {
        PreparedDevice pd;
        pd.request_names = d.at("request_names").get<std::vector<std::string>>();
        pd.pool_name = d.at("pool_name").get<std::string>();
        pd.device_name = d.at("device_name").get<std::string>();
        pd.cdi_device_ids = d.at("cdi_device_ids").get<std::vector<std::string>>();
        pc.devices.push_back(std::move(pd));
      }
      out[uid] = std::move(pc);
    }
  } catch (const Json::exception& e) {
    return bad(absl::StrCat("claims: ", e.what()));
  }
  return out;
}

absl::Status SaveCheckpoint(const std::string& path, const PreparedClaims& claims) {
  const Json c = ClaimsJson(claims);
  const Json j = {{"version", 1}, {"checksum", Checksum(c.dump())}, {"claims", c}};
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  return WriteFileAtomically(path, j.dump(1) + "\n");
}

}  // namespace tessera::dra
