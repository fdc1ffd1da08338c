#include "api/selector.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tessera::api {
namespace {

// Splits on commas that are not inside parentheses.
std::vector<std::string> SplitTerms(absl::string_view text) {
  std::vector<std::string> out;
  std::string cur;
  int paren = 0;
  for (char c : text) {
    if (c == '(') ++paren;
    if (c == ')') --paren;
    if (c == ',' && paren == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  out.push_back(cur);
  return out;
}

bool ValidToken(absl::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
          c == '/')) {
      return false;
    }
  }
  return true;
}

bool ValidValue(absl::string_view s) { return s.empty() || ValidToken(s); }

}  // namespace

absl::StatusOr<Selector> Selector::ParseLabels(absl::string_view text) {
  Selector sel;
  if (absl::StripAsciiWhitespace(text).empty()) return sel;
  for (std::string term : SplitTerms(text)) {
    std::string t(absl::StripAsciiWhitespace(term));
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("labelSelector: invalid term \"", t, "\": ", why));
    };
    if (t.empty()) return bad("empty");
    Requirement r;
    size_t sp = t.find(' ');
    if (sp != std::string::npos) {  // key in (...) / key notin (...)
      r.key = t.substr(0, sp);
      std::string rest_s(absl::StripAsciiWhitespace(t.substr(sp)));
      absl::string_view rest = rest_s;
      if (absl::ConsumePrefix(&rest, "notin")) {
        r.op = Op::kNotIn;
      } else if (absl::ConsumePrefix(&rest, "in")) {
        r.op = Op::kIn;
      } else {
        return bad("expected in or notin");
      }
      absl::string_view set = absl::StripAsciiWhitespace(rest);
      if (!absl::ConsumePrefix(&set, "(") || !absl::ConsumeSuffix(&set, ")")) {
        return bad("expected a parenthesized value list");
      }
      for (absl::string_view v : absl::StrSplit(set, ',')) {
        v = absl::StripAsciiWhitespace(v);
        if (!ValidValue(v)) return bad("invalid value");
        r.values.emplace_back(v);
      }
    } else if (size_t ne = t.find("!="); ne != std::string::npos) {
      r.key = t.substr(0, ne);
      r.op = Op::kNotEq;
      r.values.push_back(t.substr(ne + 2));
    } else if (size_t eq = t.find("=="); eq != std::string::npos) {
      r.key = t.substr(0, eq);
      r.op = Op::kEq;
      r.values.push_back(t.substr(eq + 2));
    } else if (size_t e1 = t.find('='); e1 != std::string::npos) {
      r.key = t.substr(0, e1);
      r.op = Op::kEq;
      r.values.push_back(t.substr(e1 + 1));
    } else if (t[0] == '!') {
      r.key = t.substr(1);
      r.op = Op::kNotExists;
    } else {
      r.key = t;
      r.op = Op::kExists;
    }
    if (!ValidToken(r.key)) return bad("invalid key");
    for (const std::string& v : r.values) {
      if (!ValidValue(v)) return bad("invalid value");
    }
    sel.reqs_.push_back(std::move(r));
  }
  return sel;
}

absl::StatusOr<Selector> Selector::ParseFields(absl::string_view text) {
  Selector sel;
  sel.labels_ = false;
  if (absl::StripAsciiWhitespace(text).empty()) return sel;
  for (absl::string_view term : absl::StrSplit(text, ',')) {
    std::string t(absl::StripAsciiWhitespace(term));
    Requirement r;
    if (size_t ne = t.find("!="); ne != std::string::npos) {
      r.key = t.substr(0, ne), r.op = Op::kNotEq, r.values = {t.substr(ne + 2)};
    } else if (size_t eq = t.find("=="); eq != std::string::npos) {
      r.key = t.substr(0, eq), r.op = Op::kEq, r.values = {t.substr(eq + 2)};
    } else if (size_t e1 = t.find('='); e1 != std::string::npos) {
      r.key = t.substr(0, e1), r.op = Op::kEq, r.values = {t.substr(e1 + 1)};
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("fieldSelector: invalid term \"", t, "\": expected field=value"));
    }
    if (r.key != "metadata.name" && r.key != "metadata.namespace" && r.key != "status.phase" &&
        r.key != "status.reason" && r.key != "spec.queue") {
      return absl::InvalidArgumentError(absl::StrCat(
          "fieldSelector: field \"", r.key,
          "\" is not supported (metadata.name, metadata.namespace, status.phase, status.reason, "
          "spec.queue)"));
    }
    sel.reqs_.push_back(std::move(r));
  }
  return sel;
}

bool Selector::Matches(const nlohmann::json& obj) const {
  for (const Requirement& r : reqs_) {
    const std::string* value = nullptr;
    if (labels_) {
      auto meta = obj.find("metadata");
      if (meta != obj.end()) {
        auto labels = meta->find("labels");
        if (labels != meta->end() && labels->is_object()) {
          auto it = labels->find(r.key);
          if (it != labels->end() && it->is_string()) value = &it->get_ref<const std::string&>();
        }
      }
    } else {
      size_t dot = r.key.find('.');
      std::string top = r.key.substr(0, dot), field = r.key.substr(dot + 1);
      auto a = obj.find(top);
      if (a != obj.end() && a->is_object()) {
        auto b = a->find(field);
        if (b != a->end() && b->is_string()) value = &b->get_ref<const std::string&>();
      }
    }
    static const std::string kEmpty;
    const std::string& v = value ? *value : kEmpty;
    bool in = std::find(r.values.begin(), r.values.end(), v) != r.values.end();
    bool ok = false;
    switch (r.op) {
      case Op::kEq:
        ok = labels_ ? value != nullptr && in : in;
        break;
      case Op::kNotEq:
        ok = !(value != nullptr && in) && !(value == nullptr && !labels_ && in);
        break;
      case Op::kExists:
        ok = value != nullptr;
        break;
      case Op::kNotExists:
        ok = value == nullptr;
        break;
      case Op::kIn:
        ok = value != nullptr && in;
        break;
      case Op::kNotIn:
        ok = !(value != nullptr && in);
        break;
    }
    if (!ok) return false;
  }
  return true;
}

}  // namespace tessera::api
