// FieldReader: reads a JSON object's fields for the codecs, collecting every problem with its
// field path so that a decode reports them all at once. Internal to tessera_kube.
// Not thread-safe; one per decode.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kube/objects.h"

namespace tessera::kube::internal {

class FieldReader {
 public:
  // `what` names the object in messages ("Pod team-a/p0").
  explicit FieldReader(std::string what) : what_(std::move(what)) {}

  void Error(const std::string& path, const std::string& msg);
  bool ok() const { return errors_.empty(); }
  // OK, or InvalidArgument "WHAT: path: msg; path: msg".
  absl::Status Finish() const;
  void set_what(std::string what) { what_ = std::move(what); }

  // Each getter reads obj[key] (path: "PATH.key"); a missing or null key gives the default, a
  // value of the wrong type an error and the default. `obj` that is not an object reads as empty.
  std::string Str(const Json& obj, const char* key, const std::string& path);
  std::optional<std::string> OptStr(const Json& obj, const char* key, const std::string& path);
  bool Bool(const Json& obj, const char* key, const std::string& path);
  int64_t Int(const Json& obj, const char* key, const std::string& path);
  std::optional<int64_t> OptInt(const Json& obj, const char* key, const std::string& path);
  std::map<std::string, std::string> StrMap(const Json& obj, const char* key,
                                            const std::string& path);
  std::vector<std::string> StrList(const Json& obj, const char* key, const std::string& path);
  ResourceList Resources(const Json& obj, const char* key, const std::string& path);
  // obj[key] when it is an object (or absent/null: nullptr); else an error and nullptr.
  const Json* Object(const Json& obj, const char* key, const std::string& path);
  // obj[key] when it is an array (absent/null: nullptr); else an error and nullptr.
  const Json* Array(const Json& obj, const char* key, const std::string& path);

  static std::string Join(const std::string& path, const char* key) {
    return path.empty() ? std::string(key) : path + "." + key;
  }
  static std::string Index(const std::string& path, size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

 private:
  const Json* Get(const Json& obj, const char* key) const;
  std::string what_;
  std::vector<std::string> errors_;
};

// Sets obj[key] = value, or erases the key when `empty` (keeps the JSON as the API would
// write it: omitempty fields absent).
void SetOrErase(Json& obj, const char* key, Json value, bool empty);
Json EncodeResources(const ResourceList& r);
Json EncodeStrMap(const std::map<std::string, std::string>& m);
// Reads j["metadata"] into `m` (errors under "metadata."); meta_codec.cc.
void ReadMeta(FieldReader& r, const Json& j, ObjectMeta& m);
// j = raw with apiVersion, kind and metadata overlaid (the start of every Encode*).
Json StartEncode(const Json& raw, const char* api_version, const char* kind, const ObjectMeta& m);
// "Kind NS/NAME" or "Kind NAME" for messages.
std::string Describe(const char* kind, const Json& j);

}  // namespace tessera::kube::internal
