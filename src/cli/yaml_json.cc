#include "cli/yaml_json.h"

#include <yaml-cpp/yaml.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tessera::cli {
namespace {

Json FromYaml(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Sequence: {
      Json a = Json::array();
      for (const YAML::Node& e : n) a.push_back(FromYaml(e));
      return a;
    }
    case YAML::NodeType::Map: {
      Json o = Json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = FromYaml(kv.second);
      return o;
    }
    case YAML::NodeType::Scalar:
      break;
  }
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted: always a string
  if (s == "null" || s == "~" || s.empty()) return s.empty() ? Json("") : Json(nullptr);
  if (s == "true" || s == "True") return true;
  if (s == "false" || s == "False") return false;
  int64_t i = 0;
  if (absl::SimpleAtoi(s, &i)) return i;
  double d = 0;
  if (s.find_first_of(".eE") != std::string::npos && absl::SimpleAtod(s, &d)) return d;
  return s;
}

void Emit(YAML::Emitter& out, const Json& v) {
  if (v.is_object()) {
    out << YAML::BeginMap;
    for (auto& [k, e] : v.items()) {
      out << YAML::Key << k << YAML::Value;
      Emit(out, e);
    }
    out << YAML::EndMap;
  } else if (v.is_array()) {
    out << YAML::BeginSeq;
    for (const Json& e : v) Emit(out, e);
    out << YAML::EndSeq;
  } else if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    // Quote strings that would read back as another type.
    bool plain = false;
    try {
      Json back = FromYaml(YAML::Load(s.empty() ? "''" : s));
      plain = back.is_string() && back.get<std::string>() == s;
    } catch (const YAML::Exception&) {
    }
    if (!plain) {
      out << YAML::DoubleQuoted << s;
    } else {
      out << s;
    }
  } else if (v.is_null()) {
    out << YAML::Null;
  } else if (v.is_boolean()) {
    out << (v.get<bool>() ? "true" : "false");
  } else {
    out << v.dump();
  }
}

}  // namespace

absl::StatusOr<std::vector<Json>> ParseManifests(const std::string& text) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("not valid YAML or JSON: ", e.what()));
  }
  std::vector<Json> out;
  for (const YAML::Node& d : docs) {
    if (d.IsNull()) continue;
    Json j = FromYaml(d);
    if (!j.is_object()) return absl::InvalidArgumentError("each document must be an object");
    if (j.contains("items") && j["items"].is_array()) {
      for (Json& item : j["items"]) out.push_back(std::move(item));
    } else {
      out.push_back(std::move(j));
    }
  }
  return out;
}

std::string ToYaml(const Json& value) {
  YAML::Emitter out;
  Emit(out, value);
  return std::string(out.c_str()) + "\n";
}

}  // namespace tessera::cli
