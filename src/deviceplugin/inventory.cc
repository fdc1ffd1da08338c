#include "deviceplugin/inventory.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tessera::deviceplugin {

absl::StatusOr<MigStrategy> ParseMigStrategy(absl::string_view name) {
  if (name == "none") return MigStrategy::kNone;
  if (name == "mixed") return MigStrategy::kMixed;
  return absl::InvalidArgumentError(
      absl::StrCat("mig strategy: expected none or mixed, got '", name, "'"));
}

std::string MigResourceName(absl::string_view profile) {
  std::string name(profile);
  for (char& c : name) {
    if (c == '+') {
      c = '.';  // NVIDIA: strings.ReplaceAll("mig-"+profile, "+", ".")
    } else if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' &&
               c != '.') {
      c = '-';
    }
  }
  return absl::StrCat("nvidia.com/mig-", name);
}

bool MigProfileIsAdvertised(absl::string_view profile) {
  // "<c>c.<g>g...": compare the two counts; every other form is a whole GPU instance.
  size_t c_end = profile.find("c.");
  if (c_end == absl::string_view::npos) return true;
  size_t g_end = profile.find('g', c_end + 2);
  if (g_end == absl::string_view::npos) return true;
  int c = 0, g = 0;
  if (!absl::SimpleAtoi(profile.substr(0, c_end), &c) ||
      !absl::SimpleAtoi(profile.substr(c_end + 2, g_end - c_end - 2), &g)) {
    return true;
  }
  return c == g;
}

namespace {

// "nvidia.com/mig-1g.10gb" -> "tessera-mig-1g.10gb.sock".
std::string SocketName(const std::string& resource) {
  std::string tail = resource.substr(resource.find('/') + 1);
  return absl::StrCat("tessera-", tail, ".sock");
}

}  // namespace

std::vector<Resource> BuildInventory(const agent::NodeSnapshot& node, MigStrategy strategy) {
  std::map<std::string, std::vector<PluginDevice>> by_resource;
  for (int i = 0; i < static_cast<int>(node.gpus.size()); ++i) {
    const agent::GpuInfo& info = node.gpus[i].info;
    if (info.uuid.empty()) continue;
    PluginDevice base;
    base.gpu_uuid = info.uuid;
    base.gpu_index = i;
    base.minor = info.minor;
    base.numa_node = info.numa_node;
    const bool mig =
        strategy == MigStrategy::kMixed && info.mig_mode.has_value() && info.mig_mode->current;
    if (!mig) {
      PluginDevice d = base;
      d.id = info.uuid;
      by_resource[kGpuResource].push_back(std::move(d));
      continue;
    }
    for (const agent::MigInstance& m : info.mig_instances) {
      if (m.uuid.empty() || !MigProfileIsAdvertised(m.profile)) continue;
      PluginDevice d = base;
      d.id = m.uuid;
      d.mig_profile = m.profile;
      by_resource[MigResourceName(m.profile)].push_back(std::move(d));
    }
  }
  std::vector<Resource> out;
  for (auto& [name, devices] : by_resource) {
    std::stable_sort(devices.begin(), devices.end(),
                     [](const PluginDevice& a, const PluginDevice& b) {
                       return a.gpu_index != b.gpu_index ? a.gpu_index < b.gpu_index : a.id < b.id;
                     });
    out.push_back(Resource{name, SocketName(name), std::move(devices)});
  }
  return out;
}

}  // namespace tessera::deviceplugin
