// Schema: one declarative definition per API kind drives validation of
// request bodies. A Schema describes a JSON value: its type, the fields of an
// object (unknown fields are rejected), the element schema of an array or a
// string-keyed map, and simple constraints. Validate() collects every error
// with the field's path ("spec.groups[0].count: must be > 0").
//
// Every string is refused when it holds a NUL character (nothing downstream --
// argv, environment, file names -- can carry one).
//
// Schemas are immutable values built once at start-up; sharing them across
// threads is safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace tessera::api {

struct FieldError {
  std::string field;  // "spec.groups[0].count"; empty for the whole body
  std::string message;
  std::string ToString() const { return field.empty() ? message : field + ": " + message; }
};

class Schema {
 public:
  enum class Type { kString, kInt, kNumber, kBool, kObject, kArray, kMap, kAny };
  struct Field;

  // Defined below, once Field is complete (clang requires it for the
  // vector<Field> member).
  static Schema String();
  static Schema Int();
  static Schema Number();
  static Schema Bool();
  static Schema Object(std::vector<Field> fields);
  static Schema Array(Schema element);
  // A JSON object with arbitrary keys whose values follow `value`.
  static Schema Map(Schema value);

  // Constraints (chainable on a temporary).
  Schema Min(int64_t v) &&;                          // kInt/kNumber: value >= v
  Schema Max(int64_t v) &&;                          // kInt/kNumber: value <= v
  Schema Positive() &&;                              // kInt/kNumber: value > 0
  Schema MaxLength(size_t n) &&;                     // kString
  Schema OneOf(std::vector<std::string> values) &&;  // kString
  Schema DnsLabel() &&;                              // kString: lower-case RFC 1123 label, <= 63
  Schema MinItems(size_t n) &&;                      // kArray
  Schema MaxItems(size_t n) &&;                      // kArray, kMap: at most n entries
  // kMap: every key is one of `keys`, where an entry ending in '*' admits any key that starts
  // with what precedes it ({"cpu", "memory", "gpu/*"}).
  Schema Keys(std::vector<std::string> keys) &&;

  // Appends an error per violation found in `value` at `path`.
  void Validate(const nlohmann::json &value, const std::string &path,
                std::vector<FieldError> &errors) const;

  Type type() const { return type_; }
  // For kObject: the field named `name`, or null.
  const Schema *FieldSchema(const std::string &name) const;
  // Introspection, for `tessera explain` and generated schemas. kObject: its fields, in
  // declaration order; kArray and kMap: the element's (values') schema, else null.
  const std::vector<Field> &fields() const { return fields_; }
  const Schema *element() const { return element_.get(); }
  // The constraints one by one, for generated schemas (api/crd_gen.h).
  const std::optional<int64_t> &minimum() const { return min_; }
  const std::optional<int64_t> &maximum() const { return max_; }
  bool positive() const { return positive_; }
  size_t max_length() const { return max_length_; }  // 0: no limit
  const std::vector<std::string> &one_of() const { return one_of_; }
  bool dns_label() const { return dns_label_; }
  size_t min_items() const { return min_items_; }
  size_t max_items() const { return max_items_; }                 // 0: no limit
  const std::vector<std::string> &keys() const { return keys_; }  // empty: any key
  // The type as `explain` writes it: "string", "integer", "[]object", "map[string]integer".
  std::string TypeName() const;
  // The constraints in words: "> 0, <= 16", "one of: Never, OnFailure", "DNS label"; empty
  // when none.
  std::string Constraints() const;

 private:
  explicit Schema(Type t);

  Type type_;
  std::vector<Field> fields_;
  std::shared_ptr<const Schema> element_;
  std::optional<int64_t> min_;
  std::optional<int64_t> max_;
  bool positive_ = false;
  size_t max_length_ = 0;
  std::vector<std::string> one_of_;
  bool dns_label_ = false;
  size_t min_items_ = 0;
  size_t max_items_ = 0;  // 0: no limit
  std::vector<std::string> keys_;
};

struct Schema::Field {
  std::string name;
  Schema schema;
  bool required = false;
};

inline Schema::Schema(Type t) : type_(t) {}
inline Schema Schema::String() { return Schema(Type::kString); }
inline Schema Schema::Int() { return Schema(Type::kInt); }
inline Schema Schema::Number() { return Schema(Type::kNumber); }
inline Schema Schema::Bool() { return Schema(Type::kBool); }

// Shorthands for declaring fields.
inline Schema::Field Required(std::string name, Schema s) {
  return Schema::Field{std::move(name), std::move(s), true};
}
inline Schema::Field Optional(std::string name, Schema s) {
  return Schema::Field{std::move(name), std::move(s), false};
}

// True when `s` is a lower-case RFC 1123 DNS label (a-z0-9 and '-', not at
// the ends), 1..63 characters.
bool IsDnsLabel(const std::string &s);

}  // namespace tessera::api
