#include "server/api_server.h"

#include <httplib.h>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "api/kinds.h"
#include "api/object_codec.h"
#include "api/selector.h"
#include "api/table.h"
#include "http/bounded_server.h"
#include "server/api_server_internal.h"
#include "server/dashboard.h"
#include "server/elastic_pool.h"
#include "server/request_body.h"
#include "server/status_write.h"
#include "server/tls_policy.h"

namespace tessera::server {

using api::Json;
using api::KindInfo;

namespace internal {

void Reply(httplib::Response& res, int code, const Json& body) {
  res.status = code;
  res.set_content(body.dump() + "\n", "application/json");
}

// Replies with the object just written, from its stored text (no second
// JSON encoding of the object).
void ReplyStored(httplib::Response& res, int code, std::string_view stored, int64_t revision) {
  absl::StatusOr<std::string> text = api::StoredToApiText(stored, revision);
  if (!text.ok()) {
    res.status = 500;
    res.set_content(api::StatusBody(500, "InternalError", text.status().message()).dump() + "\n",
                    "application/json");
    return;
  }
  text->push_back('\n');
  res.status = code;
  res.set_content(*text, "application/json");  // this httplib copies either way
}

void Fail(httplib::Response& res, int code, absl::string_view reason, absl::string_view message,
          const std::vector<api::FieldError>& causes) {
  Reply(res, code, api::StatusBody(code, reason, message, causes));
}

// Maps a store error onto the HTTP status a client acts on.
std::string BodyTooLargeMessage(uint64_t limit) {
  return absl::StrCat("request body over the limit of ", limit, " bytes (any encoding)");
}

void FailStore(httplib::Response& res, const absl::Status& s, const std::string& what) {
  switch (s.code()) {
    case absl::StatusCode::kNotFound:
      return Fail(res, 404, "NotFound", absl::StrCat(what, " not found"));
    case absl::StatusCode::kAlreadyExists:
      return Fail(res, 409, "AlreadyExists", absl::StrCat(what, " already exists"));
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAborted:
      return Fail(res, 409, "Conflict",
                  absl::StrCat("Operation cannot be fulfilled on ", what,
                               ": the object has been modified; please apply your changes to "
                               "the latest version and try again (",
                               s.message(), ")"));
    case absl::StatusCode::kOutOfRange:
      return Fail(res, 410, "Expired", std::string(s.message()));
    case absl::StatusCode::kInvalidArgument:
      return Fail(res, 400, "BadRequest", std::string(s.message()));
    case absl::StatusCode::kUnavailable:  // the store cannot be reached (etcd down): retry later
      return Fail(res, 503, "ServiceUnavailable", std::string(s.message()));
    case absl::StatusCode::kPermissionDenied:  // a ResourceQuota (resource_quota.h)
      return Fail(res, 403, "Forbidden", absl::StrCat(what, " is forbidden: ", s.message()));
    default:
      return Fail(res, 500, "InternalError", std::string(s.message()));
  }
}

// Parses an optional non-negative integer query parameter.
bool QueryInt(const httplib::Request& req, const char* name, int64_t& out, httplib::Response& res) {
  if (!req.has_param(name)) return true;
  std::string v = req.get_param_value(name);
  if (v.empty()) return true;
  if (!absl::SimpleAtoi(v, &out) || out < 0) {
    Fail(res, 400, "BadRequest", absl::StrCat(name, ": must be a non-negative integer"));
    return false;
  }
  return true;
}

std::optional<Selectors> ParseSelectors(const httplib::Request& req, httplib::Response& res) {
  absl::StatusOr<api::Selector> labels =
      api::Selector::ParseLabels(req.get_param_value("labelSelector"));
  if (!labels.ok()) {
    Fail(res, 400, "BadRequest", labels.status().message());
    return std::nullopt;
  }
  absl::StatusOr<api::Selector> fields =
      api::Selector::ParseFields(req.get_param_value("fieldSelector"));
  if (!fields.ok()) {
    Fail(res, 400, "BadRequest", fields.status().message());
    return std::nullopt;
  }
  return Selectors{*std::move(labels), *std::move(fields)};
}

bool AllowNodeRoute(const Principal& p, const std::string& node, absl::string_view route,
                    absl::string_view own, httplib::Response& res) {
  if (p.role == Principal::Role::kUser) {
    Fail(res, 403, "Forbidden", absl::StrCat(route, " are for node agents and admins"));
    return false;
  }
  if (p.role == Principal::Role::kNode && p.node != node) {
    Fail(res, 403, "Forbidden", absl::StrCat("node \"", p.node, "\" may only ", own));
    return false;
  }
  return true;
}

bool BoundToNode(const Json& obj, const std::string& node) {
  auto st = obj.find("status");
  if (st == obj.end() || !st->is_object()) return false;
  auto placement = st->find("placement");
  if (placement == st->end() || !placement->is_array()) return false;
  for (const Json& m : *placement) {
    if (m.is_object() && m.contains("node") && m["node"] == node) return true;
  }
  return false;
}

std::string Describe(const KindInfo& kind, absl::string_view ns, absl::string_view name) {
  return ns.empty()
             ? absl::StrCat(kind.plural, " \"", std::string(name), "\"")
             : absl::StrCat(kind.plural, " \"", std::string(ns), "/", std::string(name), "\"");
}

}  // namespace internal

using namespace internal;  // NOLINT: this module's reply helpers

namespace {

// The front end's options: the options' header and body deadlines and sizes on each
// connection, and TLS as tls_policy.h configures it. Files that fail its checks leave
// `tls_error` saying why (Start returns it) and a plain server that is never started.
http::EventServerOptions FrontEndOptions(const ApiServerOptions& o, absl::Status& tls_error) {
  http::EventServerOptions e;
  e.limits.header_timeout = o.header_timeout;
  e.limits.max_header_bytes = o.max_header_bytes;
  e.limits.body_timeout = o.body_timeout;
  e.limits.io_timeout = o.read_timeout;
  // The front end reads whole bodies, decoded, before the API sees them, so it holds at most the
  // limit (and a little over, for ReadBoundedBody's own 413): past that it answers 413 itself
  // and closes, without buffering the rest.
  e.limits.max_body_wire_bytes = static_cast<int64_t>(o.max_body_bytes + (64 << 10));
  e.keep_alive_idle = absl::Seconds(5);  // also bounds how long Stop() waits for idle clients
  e.keep_alive_max = 100000;
  e.io_threads = o.io_threads;
  e.worker_threads = o.threads;
  e.max_connections = o.max_connections;
  if (o.tls_cert_file.empty() && o.tls_key_file.empty()) return e;
  if (o.tls_cert_file.empty() || o.tls_key_file.empty()) {
    tls_error = absl::InvalidArgumentError("--tls-cert and --tls-key go together");
    return e;
  }
  tls_error = CheckTlsFiles(o.tls_cert_file, o.tls_key_file);
  if (!tls_error.ok()) return e;
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr || !ApplyTlsPolicy(*ctx, o.tls_cert_file, o.tls_key_file)) {
    if (ctx != nullptr) SSL_CTX_free(ctx);
    tls_error = absl::InvalidArgumentError(absl::StrCat(
        "OpenSSL refused the TLS certificate ", o.tls_cert_file, " or key ", o.tls_key_file));
    return e;
  }
  e.tls = ctx;
  return e;
}

}  // namespace

ApiServer::ApiServer(store::Store& store, Clock& clock, Authenticator auth,
                     const ApiServerOptions& options)
    : store_(store),
      clock_(clock),
      auth_(std::move(auth)),
      options_(options),
      watches_("watches", options.max_watches > 0 ? options.max_watches : 64,
               options.max_watches_per_token),
      binding_waits_("binding waits", options.max_binding_waits,
                     options.max_binding_waits_per_token),
      bindings_(std::make_unique<NodeBindingIndex>(store)),
      rng_(options.uid_seed) {
  for (http::DeadlineStream::Failure f : http::CutCounters::kLimits) {
    cuts_->With({http::DeadlineStream::FailureName(f)});  // exported at 0 from the start
  }
  http::EventServerOptions fe = FrontEndOptions(options_, tls_error_);
  fe.on_cut = [this](http::DeadlineStream::Failure f) {
    cuts_->With({http::DeadlineStream::FailureName(f)}).Inc();
  };
  fe.cut_response = [this](http::DeadlineStream::Failure f, uint64_t body_bytes,
                           httplib::Response& res) {
    // Over the limit already when it stalled: the size is the answer.
    if (f == http::DeadlineStream::Failure::kBodyTooLarge || body_bytes > options_.max_body_bytes) {
      return Fail(res, 413, "RequestEntityTooLarge", BodyTooLargeMessage(options_.max_body_bytes));
    }
    Fail(res, 400, "BadRequest",
         "malformed HTTP request, or it did not arrive within the read timeout");
  };
  // On the headers alone, before any body is read: a body the API would refuse anyway (no
  // token, a method or path that takes none) is never read.
  fe.screen = [this](const httplib::Request& head, httplib::Response& res) {
    const std::string& m = head.method;
    if (m != "POST" && m != "PUT" && m != "DELETE" && m != "PATCH") {
      if (m != "GET" && m != "HEAD" && m != "OPTIONS") {
        RefuseAndClose(res, 405, "MethodNotAllowed", absl::StrCat(m, " is not supported"));
        return true;
      }
      if (!DeclaresBody(head)) return false;
      RefuseAndClose(res, 400, "BadRequest", absl::StrCat(m, " requests take no body"));
      return true;
    }
    if (!DeclaresBody(head)) return false;
    if (!absl::StartsWith(head.path, "/api/v1/")) {
      RefuseAndClose(res, 404, "NotFound", "no such path");
      return true;
    }
    if (!auth_.Authenticate(head.get_header_value("Authorization"))) {
      res.set_header("WWW-Authenticate", "Bearer");
      RefuseAndClose(res, 401, "Unauthorized", "a valid bearer token is required");
      return true;
    }
    if (head.is_multipart_form_data()) {
      RefuseAndClose(res, 415, "UnsupportedMediaType",
                     "multipart bodies are not accepted; the API takes JSON");
      return true;
    }
    return false;
  };
  // Watches stream for minutes, and the dashboard's fleet long-polls wait in their handler:
  // each on a thread of its own (at most max_watches, and the dashboard's 256, hold one), never
  // on a worker.
  fe.is_stream = [](const httplib::Request& head) {
    const size_t q = head.target.find("?");
    if (q == std::string::npos) return false;
    httplib::Params params;
    httplib::detail::parse_query_text(head.target.substr(q + 1), params);
    if (auto it = params.find("watch"); it != params.end()) {
      return it->second == "true" || it->second == "1";
    }
    return head.path == "/api/v1/fleet" && params.contains("waitSeconds");
  };
  ElasticPoolOptions po;
  po.min_threads = 0;
  po.max_threads = watches_.total() + kMaxFleetWaits + 8;
  streams_ = std::make_unique<ElasticPool>(po);
  fe.stream_executor = [this](std::function<void()> fn) { streams_->enqueue(std::move(fn)); };
  http_ = std::make_unique<http::EventServer>(std::move(fe));
  // A backstop only: bodies are read by ReadBoundedBody (request_body.h), which keeps at most
  // max_body_bytes and discards up to kDrainBytes more; httplib's own check must not cut that.
  http_->set_payload_max_length(options_.max_body_bytes + kDrainBytes);
  // Heartbeats that write wait for the store's fsync on writers_ (at most 32 threads), not on a
  // worker.
  ElasticPoolOptions wo;
  wo.min_threads = 0;
  wo.max_threads = 32;
  writers_ = std::make_unique<ElasticPool>(wo);
  http_->AddDeferred(
      "POST", "/api/v1/nodes/([^/]+)/heartbeat/?",
      [this](const httplib::Request& req, const std::shared_ptr<http::Responder>& r) {
        ServeNodeRoute(req, r, [&](const Principal& p, const std::string& node, const Finish& f) {
          ServeNodeHeartbeat(p, node, req, f);
        });
      });
  http_->AddDeferred(
      "GET", "/api/v1/nodes/([^/]+)/bindings/?",
      [this](const httplib::Request& req, const std::shared_ptr<http::Responder>& r) {
        ServeNodeRoute(req, r, [&](const Principal& p, const std::string& node, const Finish& f) {
          ServeNodeBindings(p, node, req, r, f);
        });
      });
  auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    const absl::Time start = absl::Now();  // real time: network latency, not the API clock
    Handle(req, res);
    ObserveRequest(req, res.status <= 0 ? 200 : res.status, start);
  };
  http_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  http_->set_logger([this](const httplib::Request&, const httplib::Response& res) {
    int cls = res.status / 100;
    if (cls >= 1 && cls <= 5) responses_[cls]++;
  });
  // Prometheus text; admin only when authentication is on.
  http_->Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    std::optional<Principal> who = auth_.Authenticate(req.get_header_value("Authorization"));
    if (!who) return Fail(res, 401, "Unauthorized", "a valid bearer token is required");
    if (who->role != Principal::Role::kAdmin) {
      return Fail(res, 403, "Forbidden", "metrics are for admins");
    }
    std::string out =
        "# HELP tessera_api_responses_total API responses by status class.\n"
        "# TYPE tessera_api_responses_total counter\n";
    for (int cls = 1; cls <= 5; ++cls) {
      absl::StrAppend(&out, "tessera_api_responses_total{code=\"", cls, "xx\"} ",
                      responses_[cls].load(), "\n");
    }
    absl::StrAppend(&out,
                    "# HELP tessera_api_open_watches Watch streams open now.\n"
                    "# TYPE tessera_api_open_watches gauge\ntessera_api_open_watches ",
                    watches_.held(), "\n");
    absl::StrAppend(&out,
                    "# HELP tessera_api_binding_waits Node agents waiting for a binding change "
                    "now.\n# TYPE tessera_api_binding_waits gauge\ntessera_api_binding_waits ",
                    bindings_->waiters(), "\n");
    absl::StrAppend(&out,
                    "# HELP tessera_api_node_heartbeats_total Node heartbeats, by whether they "
                    "wrote the Node (true) or only renewed its in-memory lease (false).\n"
                    "# TYPE tessera_api_node_heartbeats_total counter\n"
                    "tessera_api_node_heartbeats_total{written=\"true\"} ",
                    heartbeats_written_.load(),
                    "\ntessera_api_node_heartbeats_total{written=\"false\"} ",
                    heartbeats_renewed_.load(), "\n");
    absl::StrAppend(
        &out,
        "# HELP tessera_api_threads Threads serving the API: I/O, workers and open watches.\n"
        "# TYPE tessera_api_threads gauge\ntessera_api_threads ",
        http_->threads() + streams_->threads(),
        "\n# HELP tessera_api_open_connections Open API connections.\n"
        "# TYPE tessera_api_open_connections gauge\ntessera_api_open_connections ",
        http_->open_connections(),
        "\n# HELP tessera_api_queued_requests Requests read and waiting for a worker.\n"
        "# TYPE tessera_api_queued_requests gauge\ntessera_api_queued_requests ",
        http_->queued(),
        "\n# HELP tessera_api_parked_requests Requests waiting without a thread (long-polls).\n"
        "# TYPE tessera_api_parked_requests gauge\ntessera_api_parked_requests ",
        http_->parked(),
        "\n# HELP tessera_api_refused_connections_total Connections answered 503: too many "
        "open.\n# TYPE tessera_api_refused_connections_total counter\n"
        "tessera_api_refused_connections_total ",
        http_->refused_connections(), "\n");
    out += request_registry_.Render();
    if (options_.extra_metrics) out += options_.extra_metrics();
    res.set_content(out, "text/plain; version=0.0.4");
  });
  http_->Get("/api/v1", [](const httplib::Request&, httplib::Response& res) {
    Json resources = Json::array();
    for (const KindInfo& k : api::AllKinds()) {
      resources.push_back({{"name", k.plural},
                           {"kind", k.kind},
                           {"namespaced", k.namespaced},
                           {"verbs", {"create", "get", "list", "update", "delete", "watch"}}});
    }
    Reply(res, 200,
          {{"kind", "APIResourceList"},
           {"groupVersion", api::kApiVersion},
           {"resources", resources}});
  });
  if (options_.extra_routes) options_.extra_routes(*http_);
  http_->Get("/api/v1/.*", handler);
  // Bodies are bounded at the edge (request_body.h): every request that may carry one comes here
  // on its headers alone, is authenticated from them, and only then has its body read, counted
  // as it arrives. httplib tries these ContentReader routes before any other for these methods.
  auto with_body = [this, handler](const httplib::Request& req, httplib::Response& res,
                                   const httplib::ContentReader& reader) {
    if (!absl::StartsWith(req.path, "/api/v1/")) {
      if (DeclaresBody(req)) return RefuseAndClose(res, 404, "NotFound", "no such path");
      return Fail(res, 404, "NotFound", "no such path");
    }
    if (!auth_.Authenticate(req.get_header_value("Authorization"))) {
      res.set_header("WWW-Authenticate", "Bearer");
      if (DeclaresBody(req)) {
        return RefuseAndClose(res, 401, "Unauthorized", "a valid bearer token is required");
      }
      return Fail(res, 401, "Unauthorized", "a valid bearer token is required");
    }
    if (req.is_multipart_form_data()) {
      // httplib would hand such a body to its multipart parser, never to our counting reader.
      return RefuseAndClose(res, 415, "UnsupportedMediaType",
                            "multipart bodies are not accepted; the API takes JSON");
    }
    std::string body;
    switch (ReadBoundedBody(req, reader, options_.max_body_bytes, body)) {
      case BodyRead::kComplete:
        break;
      case BodyRead::kTooLargeDrained:
        return Fail(res, 413, "RequestEntityTooLarge",
                    BodyTooLargeMessage(options_.max_body_bytes));
      case BodyRead::kTooLarge:
        return RefuseAndClose(res, 413, "RequestEntityTooLarge",
                              BodyTooLargeMessage(options_.max_body_bytes));
      case BodyRead::kFailed:
        return RefuseAndClose(
            res, 400, "BadRequest",
            "malformed request body, or it did not arrive within the read timeout");
    }
    // httplib hands this handler form a const view of the Request it owns (process_request's
    // local, not const): the body is ours to fill, as its own reader fills it for other routes.
    const_cast<httplib::Request&>(req).body = std::move(body);
    handler(req, res);
  };
  http_->Post(".*", with_body);
  http_->Put(".*", with_body);
  http_->Delete(".*", with_body);
  http_->Patch(".*", with_body);
  // Before routing, hence before httplib reads any body: methods that never carry one here must
  // not announce one (httplib would leave it on the connection, or read a PRI body whole).
  http_->set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    const std::string& m = req.method;
    if (m == "POST" || m == "PUT" || m == "DELETE" || m == "PATCH") {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (m != "GET" && m != "HEAD" && m != "OPTIONS") {
      RefuseAndClose(res, 405, "MethodNotAllowed", absl::StrCat(m, " is not supported"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (DeclaresBody(req)) {
      RefuseAndClose(res, 400, "BadRequest", absl::StrCat(m, " requests take no body"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http_->set_error_handler([this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty() || res.content_length_ > 0) return;  // answered already
    if (res.status == 413) {
      Fail(res, 413, "RequestEntityTooLarge",
           absl::StrCat("request body over the limit of ", options_.max_body_bytes, " bytes"));
    } else if (res.status == 404) {
      Fail(res, 404, "NotFound", "no such path");
    } else if (res.status == 400) {
      Fail(res, 400, "BadRequest",
           "malformed HTTP request, or its body did not arrive within the read timeout");
    } else {
      Fail(res, res.status, "Error", absl::StrCat("HTTP ", res.status));
    }
  });
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, const std::exception_ptr& ep) {
        std::string what = "unknown error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        Fail(res, 500, "InternalError", what);
      });
}

ApiServer::~ApiServer() { Stop(); }

absl::StatusOr<int> ApiServer::Start(const std::string& host, int port) {
  if (!tls_error_.ok()) return tls_error_;
  if (absl::Status s = bindings_->Start(); !s.ok()) return s;
  return http_->Start(host, port);
}

void ApiServer::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  stopping_ = true;
  bindings_->Stop();  // answers open binding long-polls
  http_->Stop();
  streams_->shutdown();  // open watches end: they see stopping_
  writers_->shutdown();
}

void ApiServer::Wait() {
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(&stopped_));
}

std::string ApiServer::NewUid() {
  uint64_t a, b;
  {
    absl::MutexLock l(&mu_);
    a = rng_();
    b = rng_();
  }
  b = (b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // RFC 4122 variant
  a = (a & 0xffffffffffff0fffULL) | 0x4000;                 // version 4
  return absl::StrFormat("%08x-%04x-%04x-%04x-%012x", a >> 32, (a >> 16) & 0xffff, a & 0xffff,
                         b >> 48, b & 0xffffffffffffULL);
}

void ApiServer::ObserveRequest(const httplib::Request& req, int status, absl::Time start) {
  const std::string watch = req.get_param_value("watch");
  request_metrics_.Observe(ClassifyRequest(req.method, req.path, watch == "true" || watch == "1"),
                           status, absl::ToDoubleSeconds(absl::Now() - start));
}

void ApiServer::ServeNodeRoute(
    const httplib::Request& req, const std::shared_ptr<http::Responder>& responder,
    const std::function<void(const Principal&, const std::string& node, const Finish&)>& serve) {
  const absl::Time start = absl::Now();  // real time: network latency, not the API clock
  // The request minus its body, for the metrics when the answer comes (maybe much later).
  httplib::Request head;
  head.method = req.method;
  head.path = req.path;
  Finish finish = [this, start, head = std::move(head), responder](httplib::Response& res) {
    if (res.status <= 0) res.status = 200;
    if (int cls = res.status / 100; cls >= 1 && cls <= 5) responses_[cls]++;
    ObserveRequest(head, res.status, start);
    responder->Send(std::move(res));
  };
  httplib::Response res;
  std::optional<Principal> who = auth_.Authenticate(req.get_header_value("Authorization"));
  if (!who) {
    res.set_header("WWW-Authenticate", "Bearer");
    Fail(res, 401, "Unauthorized", "a valid bearer token is required");
    return finish(res);
  }
  const std::string node = req.matches[1];
  if (!api::IsDnsLabel(node)) {
    Fail(res, 400, "BadRequest", "name in the URL is not a valid DNS label");
    return finish(res);
  }
  serve(*who, node, finish);
}

void ApiServer::Handle(const httplib::Request& req, httplib::Response& res) {
  std::optional<Principal> who = auth_.Authenticate(req.get_header_value("Authorization"));
  if (!who) {
    res.set_header("WWW-Authenticate", "Bearer");
    return Fail(res, 401, "Unauthorized", "a valid bearer token is required");
  }
  absl::string_view path = req.path;
  absl::ConsumePrefix(&path, "/api/v1/");
  std::vector<std::string> seg = absl::StrSplit(path, '/');
  if (!seg.empty() && seg.back().empty()) seg.pop_back();  // tolerate a trailing slash
  if (seg.size() == 1 && seg[0] == "batch") {
    if (req.method != "POST") return Fail(res, 405, "MethodNotAllowed", "batch takes POST");
    return HandleBatch(*who, req, res);
  }
  if (seg.size() == 3 && seg[0] == "nodes" && seg[2] == "heartbeat") {
    if (req.method != "POST" && req.method != "GET") {
      return Fail(res, 405, "MethodNotAllowed", "heartbeats take POST (GET reads the lease)");
    }
    if (!api::IsDnsLabel(seg[1])) {
      return Fail(res, 400, "BadRequest", "name in the URL is not a valid DNS label");
    }
    if (req.method == "GET") return HandleNodeLease(*who, seg[1], res);
    // POSTs are the front end's deferred route (ServeNodeHeartbeat) and never come here.
    return Fail(res, 404, "NotFound", absl::StrCat("no such path ", req.path));
  }
  if (seg.size() == 3 && seg[0] == "nodes" && seg[2] == "utilization") {
    if (req.method != "GET") return Fail(res, 405, "MethodNotAllowed", "utilization takes GET");
    if (!api::IsDnsLabel(seg[1])) {
      return Fail(res, 400, "BadRequest", "name in the URL is not a valid DNS label");
    }
    return HandleNodeUtilization(*who, seg[1], res);
  }
  if (seg.size() == 3 && seg[0] == "nodes" && seg[2] == "bindings") {
    if (req.method != "GET") return Fail(res, 405, "MethodNotAllowed", "bindings take GET");
    if (!api::IsDnsLabel(seg[1])) {
      return Fail(res, 400, "BadRequest", "name in the URL is not a valid DNS label");
    }
    // GETs are the front end's deferred route (ServeNodeBindings) and never come here.
    return Fail(res, 404, "NotFound", absl::StrCat("no such path ", req.path));
  }
  Route r;
  // The status subresource: .../NAME/status (docs/api.md, "Status").
  bool status = false;
  if ((seg.size() == 5 && seg[0] == "namespaces") || (seg.size() == 3 && seg[0] != "namespaces")) {
    if (seg.back() != "status") {
      return Fail(res, 404, "NotFound", absl::StrCat("no such path ", req.path));
    }
    seg.pop_back();
    status = true;
  }
  if (seg.size() >= 3 && seg.size() <= 4 && seg[0] == "namespaces") {
    r.kind = api::KindByPlural(seg[2]);
    if (r.kind == nullptr || !r.kind->namespaced) {
      return Fail(res, 404, "NotFound", absl::StrCat("no namespaced resource \"", seg[2], "\""));
    }
    r.ns = seg[1];
    if (seg.size() == 4) r.name = seg[3];
  } else if (seg.size() >= 1 && seg.size() <= 2) {
    r.kind = api::KindByPlural(seg[0]);
    if (r.kind == nullptr) {
      return Fail(res, 404, "NotFound", absl::StrCat("no resource \"", seg[0], "\""));
    }
    if (seg.size() == 2) {
      if (r.kind->namespaced) {
        return Fail(res, 404, "NotFound",
                    absl::StrCat(r.kind->plural, " are namespaced: use /api/v1/namespaces/NS/",
                                 r.kind->plural, "/NAME"));
      }
      r.name = seg[1];
    }
  } else {
    return Fail(res, 404, "NotFound", absl::StrCat("no such path ", req.path));
  }
  if (r.kind->namespaced && !r.ns.empty() && !api::IsDnsLabel(r.ns)) {
    return Fail(res, 400, "BadRequest", "namespace in the URL is not a valid DNS label");
  }
  if (!r.name.empty() && !api::IsDnsLabel(r.name)) {
    return Fail(res, 400, "BadRequest", "name in the URL is not a valid DNS label");
  }

  Verb verb;
  const bool item = !r.name.empty();
  const bool watch = req.get_param_value("watch") == "true" || req.get_param_value("watch") == "1";
  if (status) {
    if (req.method == "GET") {
      if (std::string why = Authorize(*who, Verb::kGet, r.resource()); !why.empty()) {
        return Fail(res, 403, "Forbidden", why);
      }
      return HandleGet(*who, r, req, res);
    }
    if (req.method != "PUT") {
      return Fail(res, 405, "MethodNotAllowed", "the status subresource takes GET and PUT");
    }
    if (std::string why = AuthorizeStatusWrite(*who, *r.kind, r.ns, r.name); !why.empty()) {
      return Fail(res, 403, "Forbidden", why);
    }
    return HandleUpdateStatus(*who, r, req, res);
  }
  if (req.method == "GET") {
    verb = item ? Verb::kGet : (watch ? Verb::kWatch : Verb::kList);
  } else if (req.method == "POST" && !item) {
    verb = Verb::kCreate;
  } else if (req.method == "PUT" && item) {
    verb = Verb::kUpdate;
  } else if (req.method == "DELETE" && item) {
    verb = Verb::kDelete;
  } else {
    return Fail(res, 405, "MethodNotAllowed",
                absl::StrCat(req.method, " is not supported on ", req.path));
  }
  if (r.kind->namespaced && r.ns.empty() && verb != Verb::kList && verb != Verb::kWatch) {
    return Fail(res, 405, "MethodNotAllowed", "only list and watch span all namespaces");
  }
  // A create names its object in the body; a node's create is authorized
  // after parsing, everyone else's right away.
  if (verb != Verb::kCreate || who->role != Principal::Role::kNode) {
    if (std::string why = Authorize(*who, verb, r.resource()); !why.empty()) {
      return Fail(res, 403, "Forbidden", why);
    }
  }
  switch (verb) {
    case Verb::kGet:
      return HandleGet(*who, r, req, res);
    case Verb::kList:
      return HandleList(r, req, res);
    case Verb::kWatch:
      return HandleWatch(*who, r, req, res);
    case Verb::kCreate: {
      if (who->role == Principal::Role::kNode) {
        absl::StatusOr<Json> body = api::ParseBody(req.body);
        Route named = r;
        if (body.ok() && body->contains("metadata") && (*body)["metadata"].is_object() &&
            (*body)["metadata"].contains("name") && (*body)["metadata"]["name"].is_string()) {
          named.name = (*body)["metadata"]["name"].get<std::string>();
        }
        if (std::string why = Authorize(*who, verb, named.resource()); !why.empty()) {
          return Fail(res, 403, "Forbidden", why);
        }
      }
      return HandleCreate(*who, r, req, res);
    }
    case Verb::kUpdate:
      return HandleUpdate(*who, r, req, res);
    case Verb::kDelete:
      return HandleDelete(r, req, res);
  }
}

void ApiServer::HandleGet(const Principal& who, const Route& r, const httplib::Request&,
                          httplib::Response& res) {
  const std::string what = Describe(*r.kind, r.ns, r.name);
  absl::StatusOr<store::KeyValue> kv = store_.Get(api::StoreKey(*r.kind, r.ns, r.name));
  if (!kv.ok()) return FailStore(res, kv.status(), what);
  absl::StatusOr<Json> obj = api::FromStored(kv->value, kv->mod_revision);
  if (!obj.ok()) return FailStore(res, obj.status(), what);
  if (who.role == Principal::Role::kNode && r.kind->kind != "Node" &&
      !BoundToNode(*obj, who.node)) {
    // A node reads only the jobs it runs members of: another tenant's job is not its business.
    return Fail(res, 403, "Forbidden",
                absl::StrCat("node \"", who.node, "\" may only read jobs bound to it"));
  }
  Reply(res, 200, *obj);
}

void ApiServer::HandleList(const Route& r, const httplib::Request& req, httplib::Response& res) {
  int64_t limit = 0;
  if (!QueryInt(req, "limit", limit, res)) return;
  std::optional<Selectors> sel = ParseSelectors(req, res);
  if (!sel) return;
  const std::string prefix = api::StorePrefix(*r.kind, r.ns);
  store::ListOptions opts;
  if (std::string token = req.get_param_value("continue"); !token.empty()) {
    std::string key;
    if (!absl::WebSafeBase64Unescape(token, &key) || !absl::StartsWith(key, prefix)) {
      return Fail(res, 400, "BadRequest", "continue: invalid token for this list");
    }
    opts.continue_after = key;
  }
  // Asked for as a Table (kubectl's server-side printing, api/table.h): rows of cells instead
  // of objects, each with its PartialObjectMetadata unless includeObject=None.
  const bool as_table = api::AcceptsTable(req.get_header_value("Accept"));
  const std::string include =
      req.has_param("includeObject") ? req.get_param_value("includeObject") : "Metadata";
  if (as_table && include != "Metadata" && include != "None") {
    return Fail(res, 400, "BadRequest",
                absl::StrCat("includeObject: \"", include, "\" must be Metadata or None"));
  }
  const absl::Time now = clock_.Now();  // ages in the cells, on the API clock
  // Read store pages until `limit` objects matched the selectors.
  opts.limit = limit > 0 ? std::max<int64_t>(limit, 500) : 0;
  // Items are spliced as text (no parse/dump per object) unless a selector
  // needs to look inside them, or a table its cells.
  const bool filter = !sel->empty();
  std::string items;
  int64_t count = 0;
  int64_t revision = -1;
  std::string next;  // continue key when the response is cut at `limit`
  while (true) {
    absl::StatusOr<store::ListResult> page = store_.List(prefix, opts);
    if (!page.ok()) return FailStore(res, page.status(), r.kind->plural);
    if (revision < 0) revision = page->revision;
    bool full = false;
    for (const store::KeyValue& kv : page->kvs) {
      std::optional<Json> obj;
      if (filter) {
        absl::StatusOr<Json> o = api::FromStored(kv.value, kv.mod_revision);
        if (!o.ok()) return FailStore(res, o.status(), kv.key);
        if (!sel->Matches(*o)) continue;
        obj = *std::move(o);
      }
      absl::StatusOr<std::string> text =
          as_table ? table_rows_.RowText(r.kind->kind, kv, obj ? &*obj : nullptr, now,
                                         include == "Metadata")
                   : api::StoredToApiText(kv.value, kv.mod_revision);
      if (!text.ok()) return FailStore(res, text.status(), kv.key);
      if (count++ > 0) items.push_back(',');
      items.append(*text);
      if (limit > 0 && count == limit) {
        full = true;
        // More may follow only if this was not the very last key.
        if (&kv != &page->kvs.back() || page->more) next = kv.key;
        break;
      }
    }
    if (full || !page->more) break;
    opts.continue_after = page->next_key;
  }
  Json meta = {{"resourceVersion", std::to_string(revision)}};
  if (!next.empty()) meta["continue"] = absl::WebSafeBase64Escape(next);
  res.status = 200;
  if (as_table) {
    res.set_content(api::TableText(r.kind->kind, items, meta), "application/json");
    return;
  }
  res.set_content(absl::StrCat("{\"apiVersion\":", Json(api::kApiVersion).dump(), ",\"items\":[",
                               items, "],\"kind\":", Json(r.kind->kind + "List").dump(),
                               ",\"metadata\":", meta.dump(), "}\n"),
                  "application/json");
}

}  // namespace tessera::server
