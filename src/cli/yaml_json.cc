#include "cli/yaml_json.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::cli {
namespace {

// The code point at s[i] and its length in bytes; a byte that does not start a well-formed
// sequence stands for itself, with length 1 (ValidUtf8 refuses it when it is not ASCII).
uint32_t CodePointAt(const std::string& s, size_t i, size_t* len) {
  const auto c = static_cast<unsigned char>(s[i]);
  *len = 1;
  size_t n = 0;
  uint32_t cp = c;
  if ((c & 0xE0) == 0xC0) {
    n = 1, cp = c & 0x1Fu;
  } else if ((c & 0xF0) == 0xE0) {
    n = 2, cp = c & 0x0Fu;
  } else if ((c & 0xF8) == 0xF0) {
    n = 3, cp = c & 0x07u;
  }
  if (i + n >= s.size()) return c;
  for (size_t k = 1; k <= n; ++k) {
    const auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) return c;
    cp = (cp << 6) | (d & 0x3Fu);
  }
  *len = n + 1;
  return cp;
}

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool ValidUtf8(const std::string& s) {
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};  // by length in bytes
  for (size_t i = 0, len = 0; i < s.size(); i += len) {
    const uint32_t cp = CodePointAt(s, i, &len);
    if (len == 1 ? cp >= 0x80 : cp < kMin[len]) return false;  // a stray byte; an overlong form
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
  }
  return true;
}

// YAML nodes to JSON, with the limits of yaml_json.h and the line of every value.
class Converter {
 public:
  // `values` counts the values converted, across every document of a text.
  Converter(Manifest* out, size_t* values) : out_(out), values_(values) {}

  absl::StatusOr<Json> Convert(const YAML::Node& n, const std::string& path, int depth) {
    if (++*values_ > kMaxManifestValues) {
      return Fail(
          n, absl::StrCat("more than ", kMaxManifestValues, " values (aliases expanded): refused"));
    }
    if (depth > kMaxManifestDepth) {
      return Fail(n, absl::StrCat("nests deeper than ", kMaxManifestDepth, " levels"));
    }
    switch (n.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        return Json(nullptr);
      case YAML::NodeType::Sequence: {
        Json a = Json::array();
        size_t i = 0;
        for (const YAML::Node& e : n) {
          const std::string p = absl::StrCat(path, "[", i++, "]");
          Note(p, e);
          absl::StatusOr<Json> v = Convert(e, p, depth + 1);
          if (!v.ok()) return v.status();
          a.push_back(*std::move(v));
        }
        return a;
      }
      case YAML::NodeType::Map: {
        Json o = Json::object();
        for (const auto& kv : n) {
          if (!kv.first.IsScalar()) return Fail(kv.first, "a mapping key must be a plain value");
          const std::string& key = kv.first.Scalar();
          if (!ValidUtf8(key)) return Fail(kv.first, "a key is not valid UTF-8");
          if (o.contains(key)) {
            return Fail(kv.first, absl::StrCat("repeats the key \"", key, "\""));
          }
          const std::string field = path.empty() ? key : absl::StrCat(path, ".", key);
          Note(field, kv.first);
          absl::StatusOr<Json> v = Convert(kv.second, field, depth + 1);
          if (!v.ok()) return v.status();
          o[key] = *std::move(v);
        }
        return o;
      }
      case YAML::NodeType::Scalar:
        break;
    }
    const std::string& s = n.Scalar();
    if (!ValidUtf8(s)) return Fail(n, "not valid UTF-8");
    if (n.Tag() == "!") return Json(s);  // quoted: always a string
    if (s == "null" || s == "~" || s.empty()) return s.empty() ? Json("") : Json(nullptr);
    if (s == "true" || s == "True") return Json(true);
    if (s == "false" || s == "False") return Json(false);
    int64_t i = 0;
    if (absl::SimpleAtoi(s, &i)) return Json(i);
    double d = 0;
    if (s.find_first_of(".eE") != std::string::npos && absl::SimpleAtod(s, &d)) {
      // JSON has no infinity: 1e999 would be sent as null (found by fuzz/manifest_fuzzer.cc).
      if (!std::isfinite(d)) return Fail(n, absl::StrCat("the number ", s, " is out of range"));
      return Json(d);
    }
    return Json(s);
  }

 private:
  static int Line(const YAML::Node& n) { return n.Mark().line + 1; }
  void Note(const std::string& path, const YAML::Node& n) {
    if (out_ != nullptr && n.Mark().line >= 0) out_->lines.emplace(path, Line(n));
  }
  static absl::Status Fail(const YAML::Node& n, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("line ", Line(n), ": ", what));
  }

  Manifest* out_;
  size_t* values_;
};

// Plain conversion for ToYaml's read-back check (no limits needed: our own output).
Json FromYaml(const YAML::Node& n) {
  size_t values = 0;
  absl::StatusOr<Json> j = Converter(nullptr, &values).Convert(n, "", 0);
  return j.ok() ? *std::move(j) : Json();
}

// Unicode noncharacters: U+FDD0..U+FDEF and the last two code points of every plane.
bool NonCharacter(uint32_t cp) { return (cp & 0xFFFE) == 0xFFFE || (cp >= 0xFDD0 && cp <= 0xFDEF); }

std::string Utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

// yaml-cpp's emitter writes every Unicode noncharacter as U+FFFD, escaped or not, so a string
// holding one would not read back the same (found by fuzz/manifest_fuzzer.cc). ToYaml has the
// emitter write each one as `<mark>HEX<mark>`, with a private-use character found nowhere in
// the value as the mark, inside a double-quoted scalar, and then puts YAML's escape in its place.
class NonCharacters {
 public:
  // The mark for `value`, or "" when it holds no noncharacter (the common case: nothing to do).
  static std::string MarkFor(const Json& value) {
    const std::string all = value.dump(-1, ' ', false, Json::error_handler_t::replace);
    bool any = false;
    for (size_t i = 0, len = 0; i < all.size() && !any; i += len) {
      any = NonCharacter(CodePointAt(all, i, &len));
    }
    if (!any) return "";
    for (uint32_t cp = 0xE000; cp <= 0xF8FF; ++cp) {
      std::string mark = Utf8(cp);
      if (all.find(mark) == std::string::npos) return mark;
    }
    return "";  // every private-use character in one value: left to yaml-cpp
  }

  // `s` with its noncharacters marked; *marked tells whether there were any.
  static std::string Mark(const std::string& s, const std::string& mark, bool* marked) {
    *marked = false;
    if (mark.empty()) return s;
    std::string out;
    for (size_t i = 0, len = 0; i < s.size(); i += len) {
      const uint32_t cp = CodePointAt(s, i, &len);
      if (NonCharacter(cp)) {
        absl::StrAppend(&out, mark, absl::Hex(cp), mark);
        *marked = true;
      } else {
        out.append(s, i, len);
      }
    }
    return *marked ? out : s;
  }

  // The emitter's output with each `<mark>HEX<mark>` as YAML's \uXXXX or \UXXXXXXXX escape.
  static std::string Unmark(const std::string& yaml, const std::string& mark) {
    if (mark.empty()) return yaml;
    std::string out;
    size_t i = 0;
    for (size_t at; (at = yaml.find(mark, i)) != std::string::npos;) {
      const size_t end = yaml.find(mark, at + mark.size());
      if (end == std::string::npos) break;
      uint32_t cp = 0;
      if (!absl::SimpleHexAtoi(yaml.substr(at + mark.size(), end - at - mark.size()), &cp)) break;
      absl::StrAppend(
          &out, yaml.substr(i, at - i),
          cp > 0xFFFF ? absl::StrFormat("\\U%08X", cp) : absl::StrFormat("\\u%04X", cp));
      i = end + mark.size();
    }
    absl::StrAppend(&out, yaml.substr(i));
    return out;
  }
};

// `mark`: NonCharacters::MarkFor the whole value being written.
void Emit(YAML::Emitter& out, const Json& v, const std::string& mark) {
  if (v.is_object()) {
    out << YAML::BeginMap;
    for (auto& [key, e] : v.items()) {
      bool marked = false;
      const std::string k = NonCharacters::Mark(key, mark, &marked);
      out << YAML::Key;
      // YAML allows an implicit key of at most 1024 characters, escapes included: a longer one
      // is written as an explicit "? key" (found by fuzz/manifest_fuzzer.cc).
      if (k.size() > 200) out << YAML::LongKey;
      if (marked) out << YAML::DoubleQuoted;
      out << k << YAML::Value;
      Emit(out, e, mark);
    }
    out << YAML::EndMap;
  } else if (v.is_array()) {
    out << YAML::BeginSeq;
    for (const Json& e : v) Emit(out, e, mark);
    out << YAML::EndSeq;
  } else if (v.is_string()) {
    bool marked = false;
    const std::string s = NonCharacters::Mark(v.get_ref<const std::string&>(), mark, &marked);
    // Quote strings that would read back as another type.
    // Line breaks, tabs and other control characters, or spaces at either end, are quoted too:
    // in a document they would end the line or be trimmed (found by fuzz/manifest_fuzzer.cc).
    bool plain = !marked && !s.empty() && s.front() != ' ' && s.back() != ' ' &&
                 std::none_of(s.begin(), s.end(), [](char c) {
                   const auto u = static_cast<unsigned char>(c);
                   return u < 0x20 || u == 0x7f;
                 });
    if (plain) {
      try {
        Json back = FromYaml(YAML::Load(s));
        plain = back.is_string() && back.get<std::string>() == s;
      } catch (const YAML::Exception&) {
        plain = false;
      }
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

namespace {

// `path` with the API's map-entry form `labels["k"]` written as the field form `labels.k` that
// Manifest::lines holds.
std::string FieldForm(const std::string& path) {
  std::string out;
  size_t i = 0;
  while (i < path.size()) {
    const size_t at = path.find("[\"", i);
    if (at == std::string::npos) break;
    // The JSON string runs to the first unescaped quote followed by ']'.
    size_t end = at + 2;
    while (end < path.size() && !(path[end] == '"' && path[end - 1] != '\\')) ++end;
    if (end + 1 >= path.size() || path[end + 1] != ']') break;
    const Json key = Json::parse(path.substr(at + 1, end - at), nullptr, false);
    if (!key.is_string()) break;
    absl::StrAppend(&out, path.substr(i, at - i), ".", key.get<std::string>());
    i = end + 2;
  }
  absl::StrAppend(&out, path.substr(i));
  return out;
}

}  // namespace

int Manifest::LineOf(const std::string& field_path) const {
  std::string p = FieldForm(field_path);
  while (!p.empty()) {
    if (auto it = lines.find(p); it != lines.end()) return it->second;
    // The parent: drop the last ".field" or "[index]".
    const size_t cut = p.find_last_of(".[");
    if (cut == std::string::npos) break;
    p.resize(cut);
  }
  return line;
}

namespace {

// yaml-cpp 0.7 never ends on some malformed text: after a top-level scalar followed by ','
// (`"a", b`, found by fuzz/manifest_fuzzer.cc) its parser hands out the same empty document
// again and again without consuming input, and LoadAll collects them until memory runs out (a
// 56-byte file took `tessera apply` past 12 GB). This handler walks the documents' events first,
// keeping nothing, and stops the walk where a document starts at the same place as the last one.
class ProgressCheck final : public YAML::EventHandler {
 public:
  struct Stuck {
    YAML::Mark mark;
  };
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (started_ && mark.pos == last_.pos) throw Stuck{mark};
    started_ = true;
    last_ = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  bool started_ = false;
  YAML::Mark last_;
};

// InvalidArgument naming the line where yaml-cpp would loop forever on `text`; OK otherwise
// (including text that is invalid in ways yaml-cpp reports: LoadAll reports those).
absl::Status CheckParserProgress(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  ProgressCheck check;
  try {
    while (parser.HandleNextDocument(check)) {
    }
  } catch (const ProgressCheck::Stuck& s) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", s.mark.line + 1,
                     ": not valid YAML or JSON: unexpected ',' or text after a value "
                     "(a list needs '- ' items or [brackets])"));
  } catch (const YAML::Exception&) {
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<Manifest>> ParseManifestsWithLines(const std::string& text) {
  if (text.size() > kMaxManifestBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("larger than ", kMaxManifestBytes >> 20, " MiB: refused"));
  }
  if (absl::Status s = CheckParserProgress(text); !s.ok()) return s;
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", e.mark.line + 1, ": not valid YAML or JSON: ", e.msg));
  }
  std::vector<Manifest> out;
  size_t values = 0;
  auto add = [&](const YAML::Node& n) -> absl::Status {
    Manifest m;
    m.line = n.Mark().line + 1;
    Converter c(&m, &values);
    absl::StatusOr<Json> j = c.Convert(n, "", 1);
    if (!j.ok()) return j.status();
    if (!j->is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", m.line, ": each document must be an object"));
    }
    m.object = *std::move(j);
    out.push_back(std::move(m));
    return absl::OkStatus();
  };
  try {
    for (const YAML::Node& d : docs) {
      if (d.IsNull()) continue;
      const YAML::Node items = d.IsMap() ? d["items"] : YAML::Node();
      if (items && items.IsSequence()) {
        for (const YAML::Node& item : items) {
          if (absl::Status s = add(item); !s.ok()) return s;
        }
      } else if (absl::Status s = add(d); !s.ok()) {
        return s;
      }
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("line ", e.mark.line + 1, ": ", e.msg));
  }
  return out;
}

absl::StatusOr<std::vector<Json>> ParseManifests(const std::string& text) {
  absl::StatusOr<std::vector<Manifest>> m = ParseManifestsWithLines(text);
  if (!m.ok()) return m.status();
  std::vector<Json> out;
  out.reserve(m->size());
  for (Manifest& one : *m) out.push_back(std::move(one.object));
  return out;
}

std::string ToYaml(const Json& value) {
  YAML::Emitter out;
  const std::string mark = NonCharacters::MarkFor(value);
  Emit(out, value, mark);
  return NonCharacters::Unmark(std::string(out.c_str()), mark) + "\n";
}

}  // namespace tessera::cli
