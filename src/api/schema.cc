#include "api/schema.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/suggest.h"

namespace tessera::api {

Schema Schema::Object(std::vector<Field> fields) {
  Schema s(Type::kObject);
  s.fields_ = std::move(fields);
  return s;
}
Schema Schema::Array(Schema element) {
  Schema s(Type::kArray);
  s.element_ = std::make_shared<const Schema>(std::move(element));
  return s;
}
Schema Schema::Map(Schema value) {
  Schema s(Type::kMap);
  s.element_ = std::make_shared<const Schema>(std::move(value));
  return s;
}
Schema Schema::Min(int64_t v) && {
  min_ = v;
  return std::move(*this);
}
Schema Schema::Max(int64_t v) && {
  max_ = v;
  return std::move(*this);
}
Schema Schema::Positive() && {
  positive_ = true;
  return std::move(*this);
}
Schema Schema::MaxLength(size_t n) && {
  max_length_ = n;
  return std::move(*this);
}
Schema Schema::OneOf(std::vector<std::string> values) && {
  one_of_ = std::move(values);
  return std::move(*this);
}
Schema Schema::DnsLabel() && {
  dns_label_ = true;
  return std::move(*this);
}
Schema Schema::MinItems(size_t n) && {
  min_items_ = n;
  return std::move(*this);
}

Schema Schema::MaxItems(size_t n) && {
  max_items_ = n;
  return std::move(*this);
}

Schema Schema::Keys(std::vector<std::string> keys) && {
  keys_ = std::move(keys);
  return std::move(*this);
}

const Schema* Schema::FieldSchema(const std::string& name) const {
  for (const Field& f : fields_) {
    if (f.name == name) return &f.schema;
  }
  return nullptr;
}

std::string Schema::TypeName() const {
  switch (type_) {
    case Type::kString:
      return "string";
    case Type::kInt:
      return "integer";
    case Type::kNumber:
      return "number";
    case Type::kBool:
      return "boolean";
    case Type::kObject:
      return "object";
    case Type::kArray:
      return absl::StrCat("[]", element_->TypeName());
    case Type::kMap:
      return absl::StrCat("map[string]", element_->TypeName());
    case Type::kAny:
      return "any";
  }
  return "?";
}

std::string Schema::Constraints() const {
  std::vector<std::string> parts;
  if (positive_) parts.emplace_back("> 0");
  if (min_) parts.push_back(absl::StrCat(">= ", *min_));
  if (max_) parts.push_back(absl::StrCat("<= ", *max_));
  if (dns_label_) parts.emplace_back("a DNS label (a-z, 0-9, '-'; at most 63)");
  if (max_length_ > 0 && !dns_label_)
    parts.push_back(absl::StrCat("at most ", max_length_, " characters"));
  if (!one_of_.empty()) parts.push_back(absl::StrCat("one of: ", absl::StrJoin(one_of_, ", ")));
  if (min_items_ > 0) parts.push_back(absl::StrCat("at least ", min_items_, " items"));
  if (max_items_ > 0) parts.push_back(absl::StrCat("at most ", max_items_, " items"));
  if (!keys_.empty()) parts.push_back(absl::StrCat("keys: ", absl::StrJoin(keys_, ", ")));
  return absl::StrJoin(parts, ", ");
}

bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}

namespace {

const char* TypeWords(Schema::Type t) {
  switch (t) {
    case Schema::Type::kString:
      return "a string";
    case Schema::Type::kInt:
      return "an integer";
    case Schema::Type::kNumber:
      return "a number";
    case Schema::Type::kBool:
      return "a boolean";
    case Schema::Type::kObject:
    case Schema::Type::kMap:
      return "an object";
    case Schema::Type::kArray:
      return "an array";
    case Schema::Type::kAny:
      return "any value";
  }
  return "?";
}

bool KeyAllowed(const std::vector<std::string>& keys, const std::string& key) {
  if (keys.empty()) return true;
  for (const std::string& k : keys) {
    if (!k.empty() && k.back() == '*' ? key.compare(0, k.size() - 1, k, 0, k.size() - 1) == 0
                                      : key == k) {
      return true;
    }
  }
  return false;
}

std::string Join(const std::string& path, const std::string& field) {
  return path.empty() ? field : absl::StrCat(path, ".", field);
}

}  // namespace

void Schema::Validate(const nlohmann::json& v, const std::string& path,
                      std::vector<FieldError>& errors) const {
  auto fail = [&](std::string msg) { errors.push_back({path, std::move(msg)}); };
  switch (type_) {
    case Type::kAny:
      return;
    case Type::kString: {
      if (!v.is_string()) return fail(absl::StrCat("must be ", TypeWords(type_)));
      const std::string& s = v.get_ref<const std::string&>();
      if (s.find('\0') != std::string::npos) fail("must not contain a NUL character");
      if (max_length_ > 0 && s.size() > max_length_) {
        fail(absl::StrCat("must be at most ", max_length_, " bytes"));
      }
      if (dns_label_ && !IsDnsLabel(s)) {
        fail("must be a lower-case DNS label (a-z, 0-9, '-', at most 63 characters)");
      }
      if (!one_of_.empty() && std::find(one_of_.begin(), one_of_.end(), s) == one_of_.end()) {
        fail(absl::StrCat("must be one of ", absl::StrJoin(one_of_, ", ")));
      }
      return;
    }
    case Type::kInt: {
      if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX)) {
        return fail(absl::StrCat("must be ", TypeWords(type_)));
      }
      int64_t n = v.get<int64_t>();
      if (positive_ && n <= 0) fail("must be > 0");
      if (min_ && n < *min_) fail(absl::StrCat("must be >= ", *min_));
      if (max_ && n > *max_) fail(absl::StrCat("must be <= ", *max_));
      return;
    }
    case Type::kNumber: {
      if (!v.is_number()) return fail(absl::StrCat("must be ", TypeWords(type_)));
      if (positive_ && v.get<double>() <= 0) fail("must be > 0");
      if (min_ && v.get<double>() < static_cast<double>(*min_)) {
        fail(absl::StrCat("must be >= ", *min_));
      }
      if (max_ && v.get<double>() > static_cast<double>(*max_)) {
        fail(absl::StrCat("must be <= ", *max_));
      }
      return;
    }
    case Type::kBool:
      if (!v.is_boolean()) fail(absl::StrCat("must be ", TypeWords(type_)));
      return;
    case Type::kArray: {
      if (!v.is_array()) return fail(absl::StrCat("must be ", TypeWords(type_)));
      if (v.size() < min_items_) fail(absl::StrCat("must have at least ", min_items_, " items"));
      if (max_items_ > 0 && v.size() > max_items_) {
        return fail(absl::StrCat("must have at most ", max_items_, " items"));
      }
      for (size_t i = 0; i < v.size(); ++i) {
        element_->Validate(v[i], absl::StrCat(path, "[", i, "]"), errors);
      }
      return;
    }
    case Type::kMap: {
      if (!v.is_object()) return fail(absl::StrCat("must be ", TypeWords(type_)));
      if (max_items_ > 0 && v.size() > max_items_) {
        return fail(absl::StrCat("must have at most ", max_items_, " entries"));
      }
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (it.key().find('\0') != std::string::npos) {
          errors.push_back({path, "keys must not contain a NUL character"});
          continue;
        }
        const std::string entry = absl::StrCat(path, "[", nlohmann::json(it.key()).dump(), "]");
        if (!KeyAllowed(keys_, it.key())) {
          errors.push_back(
              {entry, absl::StrCat("unknown key; expected one of: ", absl::StrJoin(keys_, ", "))});
          continue;
        }
        element_->Validate(it.value(), entry, errors);
      }
      return;
    }
    case Type::kObject: {
      if (!v.is_object()) return fail(absl::StrCat("must be ", TypeWords(type_)));
      for (const Field& f : fields_) {
        auto it = v.find(f.name);
        if (it == v.end() || it->is_null()) {
          if (f.required) errors.push_back({Join(path, f.name), "is required"});
          continue;
        }
        f.schema.Validate(*it, Join(path, f.name), errors);
      }
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (FieldSchema(it.key()) == nullptr) {
          std::vector<std::string> names;
          for (const Field& f : fields_) names.push_back(f.name);
          errors.push_back(
              {Join(path, it.key()), absl::StrCat("unknown field", DidYouMean(it.key(), names))});
        }
      }
      return;
    }
  }
}

}  // namespace tessera::api
