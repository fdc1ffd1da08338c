#include "cli/jsonpath.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::cli {

struct JsonPathTemplate::Node {
  enum class Kind { kText, kPath, kRange } kind = Kind::kText;
  std::string text;
  std::vector<PathStep> path;
  std::vector<Node> children;  // kRange
};

namespace {

absl::Status PathError(absl::string_view expr, size_t pos, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("jsonpath \"", expr, "\" at character ", pos + 1, ": ", what));
}

bool FieldChar(char c) { return c != '.' && c != '[' && c != ']' && c != ' '; }

void Descend(const Json& node, const std::string& field, std::vector<const Json*>& out) {
  if (node.is_object()) {
    if (auto it = node.find(field); it != node.end()) out.push_back(&*it);
    for (const Json& child : node) Descend(child, field, out);
  } else if (node.is_array()) {
    for (const Json& child : node) Descend(child, field, out);
  }
}

// Finds the '}' closing the expression that starts at text[pos] (after '{'), skipping quoted
// strings; npos when there is none.
size_t ClosingBrace(absl::string_view text, size_t pos) {
  char quote = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if (c == '\\') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '}') {
      return i;
    }
  }
  return absl::string_view::npos;
}

absl::StatusOr<std::string> Unquote(absl::string_view lit) {
  std::string out;
  for (size_t i = 1; i + 1 < lit.size(); ++i) {
    char c = lit[i];
    if (c == '\\' && i + 2 < lit.size()) {
      c = lit[++i];
      if (c == 'n') {
        c = '\n';
      } else if (c == 't') {
        c = '\t';
      } else if (c == 'r') {
        c = '\r';
      }
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<PathStep>> ParsePath(absl::string_view expr) {
  absl::string_view e = absl::StripAsciiWhitespace(expr);
  if (e.size() >= 2 && e.front() == '{' && e.back() == '}') {
    e = absl::StripAsciiWhitespace(e.substr(1, e.size() - 2));
  }
  if (e.empty()) return PathError(expr, 0, "empty path");
  std::string owned;
  if (e.front() != '.' && e.front() != '[') {
    owned = absl::StrCat(".", e);
    e = owned;
  }
  std::vector<PathStep> path;
  size_t i = 0;
  while (i < e.size()) {
    if (e[i] == '.') {
      const bool descend = i + 1 < e.size() && e[i + 1] == '.';
      i += descend ? 2 : 1;
      size_t start = i;
      while (i < e.size() && FieldChar(e[i])) ++i;
      if (start == i) {
        if (descend) return PathError(expr, i, "expected a field name after '..'");
        continue;  // "." alone: the current object
      }
      PathStep s;
      s.kind = descend ? PathStep::Kind::kDescend : PathStep::Kind::kField;
      s.field = std::string(e.substr(start, i - start));
      path.push_back(std::move(s));
    } else if (e[i] == '[') {
      const size_t close = e.find(']', i);
      if (close == absl::string_view::npos) return PathError(expr, i, "'[' without ']'");
      absl::string_view inside = absl::StripAsciiWhitespace(e.substr(i + 1, close - i - 1));
      PathStep s;
      if (inside == "*") {
        s.kind = PathStep::Kind::kAll;
      } else if (inside.size() >= 2 && (inside.front() == '\'' || inside.front() == '"') &&
                 inside.back() == inside.front()) {
        s.field = std::string(inside.substr(1, inside.size() - 2));
      } else if (!inside.empty() && inside.front() == '?') {
        return PathError(expr, i, "filter expressions are not supported");
      } else if (absl::SimpleAtoi(inside, &s.index)) {
        s.kind = PathStep::Kind::kIndex;
      } else {
        return PathError(expr, i, "expected [N], [*] or ['field']");
      }
      path.push_back(std::move(s));
      i = close + 1;
    } else {
      return PathError(expr, i, absl::StrCat("unexpected '", std::string(1, e[i]), "'"));
    }
  }
  return path;
}

std::vector<const Json*> Select(const Json& root, const std::vector<PathStep>& path) {
  std::vector<const Json*> cur = {&root};
  for (const PathStep& s : path) {
    std::vector<const Json*> next;
    for (const Json* v : cur) {
      switch (s.kind) {
        case PathStep::Kind::kField:
          if (v->is_object()) {
            if (auto it = v->find(s.field); it != v->end()) next.push_back(&*it);
          }
          break;
        case PathStep::Kind::kIndex:
          if (v->is_array()) {
            const int64_t n = static_cast<int64_t>(v->size());
            const int64_t i = s.index < 0 ? n + s.index : s.index;
            if (i >= 0 && i < n) next.push_back(&(*v)[static_cast<size_t>(i)]);
          }
          break;
        case PathStep::Kind::kAll:
          if (v->is_array() || v->is_object()) {
            for (const Json& child : *v) next.push_back(&child);
          }
          break;
        case PathStep::Kind::kDescend:
          Descend(*v, s.field, next);
          break;
      }
    }
    cur = std::move(next);
  }
  return cur;
}

std::string PrintValue(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

namespace {

// Parses template nodes from text[pos] until the end or an {end}; sets *ended when {end} closed
// the block.
absl::Status ParseNodes(absl::string_view text, size_t& pos,
                        std::vector<JsonPathTemplate::Node>& out, bool* ended) {
  using Node = JsonPathTemplate::Node;
  *ended = false;
  while (pos < text.size()) {
    const size_t open = text.find('{', pos);
    if (open != pos) {
      Node lit;
      lit.text = std::string(text.substr(pos, open - pos));
      out.push_back(std::move(lit));
      if (open == absl::string_view::npos) {
        pos = text.size();
        break;
      }
    }
    const size_t close = ClosingBrace(text, open + 1);
    if (close == absl::string_view::npos) return PathError(text, open, "'{' without '}'");
    absl::string_view expr = absl::StripAsciiWhitespace(text.substr(open + 1, close - open - 1));
    pos = close + 1;
    if (expr == "end") {
      *ended = true;
      return absl::OkStatus();
    }
    Node n;
    if (!expr.empty() && (expr.front() == '"' || expr.front() == '\'')) {
      if (expr.size() < 2 || expr.back() != expr.front()) {
        return PathError(text, open, "unterminated string");
      }
      absl::StatusOr<std::string> s = Unquote(expr);
      if (!s.ok()) return s.status();
      n.text = *std::move(s);
    } else if (absl::StartsWith(expr, "range ")) {
      n.kind = Node::Kind::kRange;
      absl::StatusOr<std::vector<PathStep>> p = ParsePath(expr.substr(6));
      if (!p.ok()) return p.status();
      n.path = *std::move(p);
      bool closed = false;
      if (absl::Status s = ParseNodes(text, pos, n.children, &closed); !s.ok()) return s;
      if (!closed) return PathError(text, open, "{range} without {end}");
    } else {
      n.kind = Node::Kind::kPath;
      absl::StatusOr<std::vector<PathStep>> p = ParsePath(expr);
      if (!p.ok()) return p.status();
      n.path = *std::move(p);
    }
    out.push_back(std::move(n));
  }
  return absl::OkStatus();
}

void Run(const std::vector<JsonPathTemplate::Node>& nodes, const Json& root, std::string& out) {
  using Node = JsonPathTemplate::Node;
  for (const Node& n : nodes) {
    switch (n.kind) {
      case Node::Kind::kText:
        out += n.text;
        break;
      case Node::Kind::kPath: {
        std::vector<std::string> parts;
        for (const Json* v : Select(root, n.path)) parts.push_back(PrintValue(*v));
        out += absl::StrJoin(parts, " ");
        break;
      }
      case Node::Kind::kRange:
        for (const Json* v : Select(root, n.path)) {
          if (v->is_array()) {
            for (const Json& e : *v) Run(n.children, e, out);
          } else {
            Run(n.children, *v, out);
          }
        }
        break;
    }
  }
}

}  // namespace

absl::StatusOr<JsonPathTemplate> JsonPathTemplate::Parse(absl::string_view text) {
  auto nodes = std::make_shared<std::vector<Node>>();
  size_t pos = 0;
  bool ended = false;
  if (absl::Status s = ParseNodes(text, pos, *nodes, &ended); !s.ok()) return s;
  if (ended) return PathError(text, pos - 1, "{end} without {range}");
  JsonPathTemplate t;
  t.nodes_ = std::move(nodes);
  return t;
}

std::string JsonPathTemplate::Execute(const Json& root) const {
  std::string out;
  Run(*nodes_, root, out);
  return out;
}

}  // namespace tessera::cli
