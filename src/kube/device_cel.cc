#include "kube/device_cel.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "kube/quantity.h"

namespace tessera::kube {

using Json = nlohmann::json;

CelValue CelValue::Bool(bool v) {
  CelValue x;
  x.type = Type::kBool;
  x.b = v;
  return x;
}
CelValue CelValue::Int(int64_t v) {
  CelValue x;
  x.type = Type::kInt;
  x.i = v;
  return x;
}
CelValue CelValue::String(std::string v) {
  CelValue x;
  x.type = Type::kString;
  x.s = std::move(v);
  return x;
}
CelValue CelValue::Map(std::map<std::string, CelValue> m) {
  CelValue x;
  x.type = Type::kMap;
  x.map = std::make_shared<const std::map<std::string, CelValue>>(std::move(m));
  return x;
}

namespace {

const char* TypeName(CelValue::Type t) {
  switch (t) {
    case CelValue::Type::kNull:
      return "null";
    case CelValue::Type::kBool:
      return "bool";
    case CelValue::Type::kInt:
      return "int";
    case CelValue::Type::kDouble:
      return "double";
    case CelValue::Type::kString:
      return "string";
    case CelValue::Type::kVersion:
      return "semver";
    case CelValue::Type::kQuantity:
      return "quantity";
    case CelValue::Type::kList:
      return "list";
    case CelValue::Type::kMap:
      return "map";
  }
  return "?";
}

// Semantic version "MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]"; false when it is not one.
bool ParseSemver(absl::string_view text, CelValue* out) {
  absl::string_view core = text.substr(0, text.find('+'));
  absl::string_view pre;
  if (size_t dash = core.find('-'); dash != absl::string_view::npos) {
    pre = core.substr(dash + 1);
    core = core.substr(0, dash);
    if (pre.empty()) return false;
  }
  std::vector<absl::string_view> parts = absl::StrSplit(core, '.');
  if (parts.size() != 3) return false;
  out->type = CelValue::Type::kVersion;
  out->s = std::string(text);
  out->version.clear();
  out->prerelease = std::string(pre);
  for (absl::string_view p : parts) {
    int64_t v = 0;
    if (p.empty() || (p.size() > 1 && p[0] == '0') || !absl::SimpleAtoi(p, &v) || v < 0) {
      return false;
    }
    out->version.push_back(v);
  }
  return true;
}

// -1, 0, 1; semver precedence (a pre-release sorts before its release; pre-releases compare as
// strings here, which orders the common "rc.1" < "rc.2").
int CompareVersions(const CelValue& a, const CelValue& b) {
  for (size_t k = 0; k < 3; ++k) {
    if (a.version[k] != b.version[k]) return a.version[k] < b.version[k] ? -1 : 1;
  }
  if (a.prerelease == b.prerelease) return 0;
  if (a.prerelease.empty()) return 1;
  if (b.prerelease.empty()) return -1;
  return a.prerelease < b.prerelease ? -1 : 1;
}

}  // namespace

CelValue DeviceValue(const std::string& driver, const Json& device) {
  std::map<std::string, std::map<std::string, CelValue>> attrs, caps;
  attrs[driver];
  caps[driver];
  auto split = [&](const std::string& name) -> std::pair<std::string, std::string> {
    size_t slash = name.rfind('/');
    if (slash == std::string::npos) return {driver, name};
    return {name.substr(0, slash), name.substr(slash + 1)};
  };
  if (auto a = device.find("attributes"); a != device.end() && a->is_object()) {
    for (auto it = a->begin(); it != a->end(); ++it) {
      const Json& v = it.value();
      CelValue x;
      if (!v.is_object()) continue;
      if (auto s = v.find("string"); s != v.end() && s->is_string()) {
        x = CelValue::String(s->get<std::string>());
      } else if (auto n = v.find("int"); n != v.end() && n->is_number_integer()) {
        x = CelValue::Int(n->get<int64_t>());
      } else if (auto b = v.find("bool"); b != v.end() && b->is_boolean()) {
        x = CelValue::Bool(b->get<bool>());
      } else if (auto ver = v.find("version"); ver != v.end() && ver->is_string()) {
        if (!ParseSemver(ver->get<std::string>(), &x)) continue;
      } else {
        continue;
      }
      auto [domain, name] = split(it.key());
      attrs[domain][name] = std::move(x);
    }
  }
  if (auto c = device.find("capacity"); c != device.end() && c->is_object()) {
    for (auto it = c->begin(); it != c->end(); ++it) {
      const Json& v = it.value();
      const Json* text = v.is_object() && v.contains("value") ? &v["value"] : &v;
      if (!text->is_string()) continue;
      absl::StatusOr<Quantity> q = ParseQuantity(text->get<std::string>());
      if (!q.ok()) continue;
      CelValue x;
      x.type = CelValue::Type::kQuantity;
      x.i = q->milli;
      x.s = q->text;
      auto [domain, name] = split(it.key());
      caps[domain][name] = std::move(x);
    }
  }
  std::map<std::string, CelValue> a2, c2;
  for (auto& [domain, m] : attrs) a2[domain] = CelValue::Map(std::move(m));
  for (auto& [domain, m] : caps) c2[domain] = CelValue::Map(std::move(m));
  return CelValue::Map({{"driver", CelValue::String(device.is_object() && device.contains("driver")
                                                        ? device["driver"].get<std::string>()
                                                        : driver)},
                        {"attributes", CelValue::Map(std::move(a2))},
                        {"capacity", CelValue::Map(std::move(c2))}});
}

// --- Syntax ----------------------------------------------------------------------------------

struct DeviceSelector::Node {
  enum class Kind { kLiteral, kIdent, kSelect, kIndex, kCall, kUnary, kBinary, kList };
  Kind kind = Kind::kLiteral;
  CelValue literal;                               // kLiteral
  std::string name;                               // kIdent, kSelect field, kCall function, op
  std::vector<std::shared_ptr<const Node>> args;  // operands; kCall: [target,] arguments
  bool has_target = false;                        // kCall: a method call on args[0]
};

namespace {

using Node = DeviceSelector::Node;
using NodePtr = std::shared_ptr<const Node>;

struct Token {
  enum class Kind { kEnd, kIdent, kInt, kDouble, kString, kPunct };
  Kind kind = Kind::kEnd;
  std::string text;  // identifier, punctuation, string contents
  int64_t i = 0;
  double d = 0;
  size_t pos = 0;
};

class Parser {
 public:
  explicit Parser(absl::string_view src) : src_(src) {}

  absl::StatusOr<NodePtr> ParseAll() {
    if (absl::Status s = Lex(); !s.ok()) return s;
    auto e = Expr();
    if (!e.ok()) return e;
    if (Peek().kind != Token::Kind::kEnd) return Error("unexpected \"" + Peek().text + "\"");
    return e;
  }

 private:
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(what, " at offset ", Peek().pos));
  }

  absl::Status Lex() {
    size_t i = 0;
    while (i < src_.size()) {
      const char c = src_[i];
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++i;
        continue;
      }
      Token t;
      t.pos = i;
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t j = i;
        while (j < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[j])) || src_[j] == '_'))
          ++j;
        t.kind = Token::Kind::kIdent;
        t.text = std::string(src_.substr(i, j - i));
        i = j;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t j = i;
        bool dbl = false;
        while (j < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[j])) ||
                                   src_[j] == '.' || src_[j] == 'e' || src_[j] == 'E')) {
          dbl = dbl || !std::isdigit(static_cast<unsigned char>(src_[j]));
          ++j;
        }
        t.text = std::string(src_.substr(i, j - i));
        if (dbl ? !absl::SimpleAtod(t.text, &t.d) : !absl::SimpleAtoi(t.text, &t.i)) {
          return absl::InvalidArgumentError(
              absl::StrCat("bad number \"", t.text, "\" at offset ", i));
        }
        t.kind = dbl ? Token::Kind::kDouble : Token::Kind::kInt;
        i = j;
      } else if (c == '"' || c == '\'') {
        size_t j = i + 1;
        std::string s;
        while (j < src_.size() && src_[j] != c) {
          if (src_[j] == '\\' && j + 1 < src_.size()) {
            const char e = src_[j + 1];
            s += e == 'n' ? '\n' : e == 't' ? '\t' : e;
            j += 2;
            continue;
          }
          s += src_[j++];
        }
        if (j >= src_.size()) {
          return absl::InvalidArgumentError(absl::StrCat("unterminated string at offset ", i));
        }
        t.kind = Token::Kind::kString;
        t.text = std::move(s);
        i = j + 1;
      } else {
        static constexpr absl::string_view kTwo[] = {"&&", "||", "==", "!=", "<=", ">="};
        t.kind = Token::Kind::kPunct;
        for (absl::string_view op : kTwo) {
          if (src_.substr(i, 2) == op) t.text = std::string(op);
        }
        if (t.text.empty()) {
          if (absl::string_view("()[].,!<>-").find(c) == absl::string_view::npos) {
            return absl::InvalidArgumentError(
                absl::StrCat("unsupported character '", std::string(1, c), "' at offset ", i));
          }
          t.text = std::string(1, c);
        }
        i += t.text.size();
      }
      tokens_.push_back(std::move(t));
    }
    Token end;
    end.pos = src_.size();
    tokens_.push_back(end);
    return absl::OkStatus();
  }

  const Token& Peek() const { return tokens_[next_]; }
  bool Accept(absl::string_view punct) {
    const Token& t = Peek();
    if ((t.kind == Token::Kind::kPunct || t.kind == Token::Kind::kIdent) && t.text == punct) {
      ++next_;
      return true;
    }
    return false;
  }

  static NodePtr Make(Node::Kind kind, std::string name, std::vector<NodePtr> args) {
    auto n = std::make_shared<Node>();
    n->kind = kind;
    n->name = std::move(name);
    n->args = std::move(args);
    return n;
  }

  absl::StatusOr<NodePtr> Expr() { return Or(); }

  // `operand (op operand)*`, left-associative.
  absl::StatusOr<NodePtr> Chain(const char* op, absl::StatusOr<NodePtr> (Parser::*operand)()) {
    auto l = (this->*operand)();
    while (l.ok() && Accept(op)) {
      auto r = (this->*operand)();
      if (!r.ok()) return r;
      l = Make(Node::Kind::kBinary, op, {*l, *r});
    }
    return l;
  }
  absl::StatusOr<NodePtr> Or() { return Chain("||", &Parser::And); }
  absl::StatusOr<NodePtr> And() { return Chain("&&", &Parser::Relation); }

  absl::StatusOr<NodePtr> Relation() {
    auto l = Unary();
    if (!l.ok()) return l;
    for (absl::string_view op : {"==", "!=", "<=", ">=", "<", ">", "in"}) {
      if (Accept(op)) {
        auto r = Unary();
        if (!r.ok()) return r;
        return Make(Node::Kind::kBinary, std::string(op), {*l, *r});
      }
    }
    return l;
  }

  absl::StatusOr<NodePtr> Unary() {
    if (Accept("!")) {
      auto e = Unary();
      if (!e.ok()) return e;
      return Make(Node::Kind::kUnary, "!", {*e});
    }
    if (Accept("-")) {
      auto e = Unary();
      if (!e.ok()) return e;
      return Make(Node::Kind::kUnary, "-", {*e});
    }
    return Member();
  }

  absl::StatusOr<std::vector<NodePtr>> Args(absl::string_view close) {
    std::vector<NodePtr> args;
    if (Accept(close)) return args;
    while (true) {
      auto a = Expr();
      if (!a.ok()) return a.status();
      args.push_back(*a);
      if (Accept(close)) return args;
      if (!Accept(",")) return Error(absl::StrCat("expected ',' or '", close, "'"));
    }
  }

  absl::StatusOr<NodePtr> Member() {
    auto e = Primary();
    while (e.ok()) {
      if (Accept(".")) {
        if (Peek().kind != Token::Kind::kIdent) return Error("expected a field name after '.'");
        std::string field = tokens_[next_++].text;
        if (Accept("(")) {
          static constexpr absl::string_view kMethods[] = {
              "compareTo", "isGreaterThan", "isLessThan", "startsWith",
              "endsWith",  "contains",      "size"};
          if (std::find(std::begin(kMethods), std::end(kMethods), field) == std::end(kMethods)) {
            return Error(absl::StrCat("method ", field, "() is not supported"));
          }
          auto args = Args(")");
          if (!args.ok()) return args.status();
          args->insert(args->begin(), *e);
          auto call = std::make_shared<Node>();
          call->kind = Node::Kind::kCall;
          call->name = field;
          call->args = std::move(*args);
          call->has_target = true;
          e = NodePtr(call);
        } else {
          e = Make(Node::Kind::kSelect, field, {*e});
        }
      } else if (Accept("[")) {
        auto idx = Expr();
        if (!idx.ok()) return idx;
        if (!Accept("]")) return Error("expected ']'");
        e = Make(Node::Kind::kIndex, "", {*e, *idx});
      } else {
        break;
      }
    }
    return e;
  }

  absl::StatusOr<NodePtr> Primary() {
    const Token t = Peek();
    auto lit = std::make_shared<Node>();
    lit->kind = Node::Kind::kLiteral;
    switch (t.kind) {
      case Token::Kind::kEnd:
        return Error("unexpected end of expression");
      case Token::Kind::kInt:
        ++next_;
        lit->literal = CelValue::Int(t.i);
        return NodePtr(lit);
      case Token::Kind::kDouble:
        ++next_;
        lit->literal.type = CelValue::Type::kDouble;
        lit->literal.d = t.d;
        return NodePtr(lit);
      case Token::Kind::kString:
        ++next_;
        lit->literal = CelValue::String(t.text);
        return NodePtr(lit);
      case Token::Kind::kIdent:
        break;
      case Token::Kind::kPunct:
        if (Accept("(")) {
          auto e = Expr();
          if (!e.ok()) return e;
          if (!Accept(")")) return Error("expected ')'");
          return e;
        }
        if (Accept("[")) {
          auto items = Args("]");
          if (!items.ok()) return items.status();
          return Make(Node::Kind::kList, "", std::move(*items));
        }
        return Error("unexpected \"" + t.text + "\"");
    }
    ++next_;
    if (t.text == "true" || t.text == "false") {
      lit->literal = CelValue::Bool(t.text == "true");
      return NodePtr(lit);
    }
    if (t.text == "null") return NodePtr(lit);
    if (Accept("(")) {
      if (t.text != "quantity" && t.text != "semver" && t.text != "size") {
        return Error(absl::StrCat("function ", t.text, "() is not supported"));
      }
      auto args = Args(")");
      if (!args.ok()) return args.status();
      auto call = std::make_shared<Node>();
      call->kind = Node::Kind::kCall;
      call->name = t.text;
      call->args = std::move(*args);
      return NodePtr(call);
    }
    if (t.text != "device") return Error(absl::StrCat("unknown variable ", t.text));
    return Make(Node::Kind::kIdent, t.text, {});
  }

  absl::string_view src_;
  std::vector<Token> tokens_;
  size_t next_ = 0;
};

// --- Evaluation ------------------------------------------------------------------------------

using Value = CelValue;
using T = CelValue::Type;

absl::Status TypeError(absl::string_view op, const Value& a, const Value& b) {
  return absl::InvalidArgumentError(absl::StrCat("no matching overload for '", op, "' on ",
                                                 TypeName(a.type), " and ", TypeName(b.type)));
}

bool Numeric(const Value& v) { return v.type == T::kInt || v.type == T::kDouble; }
double AsDouble(const Value& v) { return v.type == T::kInt ? static_cast<double>(v.i) : v.d; }

// -1/0/1 for ordered pairs; error when the types do not compare.
absl::StatusOr<int> Compare(absl::string_view op, const Value& a, const Value& b) {
  if (Numeric(a) && Numeric(b)) {
    if (a.type == T::kInt && b.type == T::kInt) return a.i < b.i ? -1 : a.i > b.i ? 1 : 0;
    const double x = AsDouble(a), y = AsDouble(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.type != b.type) return TypeError(op, a, b);
  switch (a.type) {
    case T::kString:
      return a.s < b.s ? -1 : a.s > b.s ? 1 : 0;
    case T::kVersion:
      return CompareVersions(a, b);
    case T::kQuantity:
      return a.i < b.i ? -1 : a.i > b.i ? 1 : 0;
    default:
      return TypeError(op, a, b);
  }
}

absl::StatusOr<bool> Equal(const Value& a, const Value& b) {
  if (a.type == T::kNull || b.type == T::kNull) return a.type == b.type;
  if (a.type == T::kBool && b.type == T::kBool) return a.b == b.b;
  if (a.type == T::kList && b.type == T::kList) {
    if (a.list->size() != b.list->size()) return false;
    for (size_t k = 0; k < a.list->size(); ++k) {
      absl::StatusOr<bool> e = Equal((*a.list)[k], (*b.list)[k]);
      if (!e.ok() || !*e) return e;
    }
    return true;
  }
  absl::StatusOr<int> c = Compare("==", a, b);
  if (!c.ok()) return c.status();
  return *c == 0;
}

absl::StatusOr<Value> Eval(const Node& n, const Value& device);

absl::StatusOr<bool> EvalBool(const Node& n, const Value& device) {
  absl::StatusOr<Value> v = Eval(n, device);
  if (!v.ok()) return v.status();
  if (v->type != T::kBool) {
    return absl::InvalidArgumentError(absl::StrCat("expected a bool, got ", TypeName(v->type)));
  }
  return v->b;
}

absl::StatusOr<Value> Lookup(const Value& m, const std::string& key) {
  if (m.type != T::kMap) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot select ", key, " from a ", TypeName(m.type)));
  }
  auto it = m.map->find(key);
  if (it == m.map->end()) return absl::InvalidArgumentError(absl::StrCat("no such key: ", key));
  return it->second;
}

absl::StatusOr<Value> Call(const Node& n, const Value& device) {
  std::vector<Value> args;
  for (const NodePtr& a : n.args) {
    absl::StatusOr<Value> v = Eval(*a, device);
    if (!v.ok()) return v.status();
    args.push_back(*std::move(v));
  }
  const std::string& f = n.name;
  auto arity = [&](size_t want) -> absl::Status {
    if (args.size() == want) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(f, "() takes ", want - (n.has_target ? 1 : 0), " argument(s)"));
  };
  if (f == "quantity" || f == "semver") {
    if (absl::Status s = arity(1); !s.ok()) return s;
    if (args[0].type != T::kString) {
      return absl::InvalidArgumentError(absl::StrCat(f, "() takes a string"));
    }
    Value out;
    if (f == "semver") {
      if (!ParseSemver(args[0].s, &out)) {
        return absl::InvalidArgumentError(absl::StrCat("not a semantic version: ", args[0].s));
      }
      return out;
    }
    absl::StatusOr<Quantity> q = ParseQuantity(args[0].s);
    if (!q.ok()) return q.status();
    out.type = T::kQuantity;
    out.i = q->milli;
    out.s = q->text;
    return out;
  }
  if (f == "size") {
    if (absl::Status s = arity(1); !s.ok()) return s;
    const Value& x = args[0];
    if (x.type == T::kString) return Value::Int(static_cast<int64_t>(x.s.size()));
    if (x.type == T::kList) return Value::Int(static_cast<int64_t>(x.list->size()));
    if (x.type == T::kMap) return Value::Int(static_cast<int64_t>(x.map->size()));
    return absl::InvalidArgumentError(absl::StrCat("size() of a ", TypeName(x.type)));
  }
  if (absl::Status s = arity(2); !s.ok()) return s;
  const Value& a = args[0];
  const Value& b = args[1];
  if (f == "startsWith" || f == "endsWith" || f == "contains") {
    if (a.type != T::kString || b.type != T::kString) return TypeError(f, a, b);
    if (f == "startsWith") return Value::Bool(a.s.compare(0, b.s.size(), b.s) == 0);
    if (f == "endsWith") {
      return Value::Bool(a.s.size() >= b.s.size() &&
                         a.s.compare(a.s.size() - b.s.size(), b.s.size(), b.s) == 0);
    }
    return Value::Bool(a.s.find(b.s) != std::string::npos);
  }
  // compareTo, isGreaterThan, isLessThan: quantities and versions (Kubernetes' CEL libraries).
  if ((a.type != T::kQuantity && a.type != T::kVersion) || a.type != b.type) {
    return TypeError(f, a, b);
  }
  absl::StatusOr<int> c = Compare(f, a, b);
  if (!c.ok()) return c.status();
  if (f == "compareTo") return Value::Int(*c);
  return Value::Bool(f == "isGreaterThan" ? *c > 0 : *c < 0);
}

absl::StatusOr<Value> Eval(const Node& n, const Value& device) {
  switch (n.kind) {
    case Node::Kind::kLiteral:
      return n.literal;
    case Node::Kind::kIdent:
      return device;
    case Node::Kind::kList: {
      std::vector<Value> items;
      for (const NodePtr& a : n.args) {
        absl::StatusOr<Value> v = Eval(*a, device);
        if (!v.ok()) return v.status();
        items.push_back(*std::move(v));
      }
      Value out;
      out.type = T::kList;
      out.list = std::make_shared<const std::vector<Value>>(std::move(items));
      return out;
    }
    case Node::Kind::kSelect: {
      absl::StatusOr<Value> m = Eval(*n.args[0], device);
      if (!m.ok()) return m;
      return Lookup(*m, n.name);
    }
    case Node::Kind::kIndex: {
      absl::StatusOr<Value> m = Eval(*n.args[0], device);
      if (!m.ok()) return m;
      absl::StatusOr<Value> k = Eval(*n.args[1], device);
      if (!k.ok()) return k;
      if (m->type == T::kList && k->type == T::kInt) {
        if (k->i < 0 || k->i >= static_cast<int64_t>(m->list->size())) {
          return absl::InvalidArgumentError(absl::StrCat("index ", k->i, " out of range"));
        }
        return (*m->list)[static_cast<size_t>(k->i)];
      }
      if (k->type != T::kString) return TypeError("[]", *m, *k);
      return Lookup(*m, k->s);
    }
    case Node::Kind::kCall:
      return Call(n, device);
    case Node::Kind::kUnary: {
      absl::StatusOr<Value> v = Eval(*n.args[0], device);
      if (!v.ok()) return v;
      if (n.name == "!") {
        if (v->type != T::kBool) return TypeError("!", *v, *v);
        return Value::Bool(!v->b);
      }
      if (v->type == T::kInt) return Value::Int(-v->i);
      if (v->type == T::kDouble) {
        v->d = -v->d;
        return v;
      }
      return TypeError("-", *v, *v);
    }
    case Node::Kind::kBinary:
      break;
  }
  const std::string& op = n.name;
  if (op == "&&" || op == "||") {
    // CEL: commutative, an error absorbed by the other side deciding the result.
    const bool decisive = op == "||";
    absl::StatusOr<bool> l = EvalBool(*n.args[0], device);
    if (l.ok() && *l == decisive) return Value::Bool(decisive);
    absl::StatusOr<bool> r = EvalBool(*n.args[1], device);
    if (r.ok() && *r == decisive) return Value::Bool(decisive);
    if (!l.ok()) return l.status();
    if (!r.ok()) return r.status();
    return Value::Bool(!decisive);
  }
  absl::StatusOr<Value> a = Eval(*n.args[0], device);
  if (!a.ok()) return a;
  absl::StatusOr<Value> b = Eval(*n.args[1], device);
  if (!b.ok()) return b;
  if (op == "in") {
    if (b->type == T::kMap) {
      if (a->type != T::kString) return TypeError(op, *a, *b);
      return Value::Bool(b->map->contains(a->s));
    }
    if (b->type != T::kList) return TypeError(op, *a, *b);
    for (const Value& x : *b->list) {
      absl::StatusOr<bool> e = Equal(*a, x);
      if (e.ok() && *e) return Value::Bool(true);
    }
    return Value::Bool(false);
  }
  if (op == "==" || op == "!=") {
    absl::StatusOr<bool> e = Equal(*a, *b);
    if (!e.ok()) return e.status();
    return Value::Bool(op == "==" ? *e : !*e);
  }
  if (a->type == T::kVersion || a->type == T::kQuantity) {
    // As in Kubernetes' CEL: ordered through compareTo / isGreaterThan, not the operators.
    return absl::InvalidArgumentError(absl::StrCat("no matching overload for '", op, "' on ",
                                                   TypeName(a->type), " (use compareTo)"));
  }
  absl::StatusOr<int> c = Compare(op, *a, *b);
  if (!c.ok()) return c.status();
  if (op == "<") return Value::Bool(*c < 0);
  if (op == "<=") return Value::Bool(*c <= 0);
  if (op == ">") return Value::Bool(*c > 0);
  return Value::Bool(*c >= 0);
}

}  // namespace

absl::StatusOr<DeviceSelector> DeviceSelector::Parse(std::string_view expr) {
  const absl::string_view expression(expr.data(), expr.size());
  Parser p(expression);
  absl::StatusOr<NodePtr> root = p.ParseAll();
  if (!root.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CEL expression \"", expression, "\": ", root.status().message()));
  }
  DeviceSelector s;
  s.expression_ = std::string(expression);
  s.root_ = *std::move(root);
  return s;
}

absl::StatusOr<bool> DeviceSelector::Matches(const CelValue& device) const {
  absl::StatusOr<bool> r = EvalBool(*root_, device);
  if (!r.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CEL expression \"", expression_, "\": ", r.status().message()));
  }
  return r;
}

}  // namespace tessera::kube
