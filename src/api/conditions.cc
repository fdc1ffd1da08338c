#include "api/conditions.h"

#include "api/store_layout.h"

namespace tessera::api {

void SetCondition(nlohmann::json& status, const std::string& type, const std::string& value,
                  const std::string& reason, const std::string& message, absl::Time now) {
  nlohmann::json& conds = status["conditions"];
  if (!conds.is_array()) conds = nlohmann::json::array();
  for (nlohmann::json& c : conds) {
    if (!c.is_object() || c.value("type", "") != type) continue;
    if (c.value("status", "") != value) c["lastTransitionTime"] = Timestamp(now);
    c["status"] = value;
    c["reason"] = reason;
    c["message"] = message.substr(0, 4096);
    return;
  }
  conds.push_back({{"type", type},
                   {"status", value},
                   {"reason", reason},
                   {"message", message.substr(0, 4096)},
                   {"lastTransitionTime", Timestamp(now)}});
}

}  // namespace tessera::api
