#include "kube/rest_client.h"

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "kube/api_error.h"
#include "kube/codec.h"
#include "kube/rate_limiter.h"

namespace tessera::kube {

// Parsed TLS material, shared read-only by every connection.
struct RestClient::Tls {
  std::vector<X509*> cas;
  X509* cert = nullptr;
  EVP_PKEY* key = nullptr;
  ~Tls() {
    for (X509* c : cas) X509_free(c);
    if (cert) X509_free(cert);
    if (key) EVP_PKEY_free(key);
  }
};

namespace {

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "no PEM data";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

absl::Status ParseCas(const std::string& pem, std::vector<X509*>& out) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  while (X509* c = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) out.push_back(c);
  ERR_clear_error();  // the loop ends on "no start line"
  BIO_free(bio);
  if (out.empty()) return absl::InvalidArgumentError("no PEM certificate in it");
  return absl::OkStatus();
}

// Connections that can tell whether the server closed them while they sat in the pool.
class StaleProbe {
 public:
  virtual ~StaleProbe() = default;
  // True when the idle socket is readable (a FIN, a reset, a TLS close_notify: an idle HTTP/1.1
  // connection is sent nothing else), so the server has closed it and a request on it would fail
  // (a write to it raises SIGPIPE).
  virtual bool Stale() const = 0;
};

template <class Base>
class Probed final : public Base, public StaleProbe {
 public:
  using Base::Base;
  bool Stale() const override {
    std::lock_guard<std::mutex> lock(this->socket_mutex_);
    if (!this->socket_.is_open()) return false;  // not connected yet: connects fresh
    pollfd p{this->socket_.sock, POLLIN | POLLRDHUP, 0};
    return poll(&p, 1, 0) != 0;
  }
};

bool IsStale(const httplib::ClientImpl& c) {
  const auto* probe = dynamic_cast<const StaleProbe*>(&c);
  return probe != nullptr && probe->Stale();
}

// Blocks SIGPIPE for this thread while a request runs, and discards one it raised: OpenSSL
// writes to the socket with write(2), which raises SIGPIPE when the server has gone, and a
// library must not kill (or require a handler in) the process that uses it.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{0, 0};
        sigtimedwait(&pipe_, nullptr, &zero);
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

// A directory that cannot hold certificates: set as the CA directory so that cpp-httplib does
// not add the system's trust store to a kubeconfig's own CA (kubectl trusts only that CA).
constexpr char kNoCaDir[] = "/nonexistent/tessera-kube-no-system-cas";

}  // namespace

void WatchCancel::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  if (active_ != nullptr) active_->stop();
}

bool WatchCancel::cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

bool WatchCancel::Register(httplib::ClientImpl* http) {
  absl::MutexLock lock(&mu_);
  if (cancelled_) return false;
  active_ = http;
  return true;
}

void WatchCancel::Unregister() {
  absl::MutexLock lock(&mu_);
  active_ = nullptr;
}

std::string UrlEncode(absl::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string ListQuery(const ListOptions& o, bool watch) {
  std::string q;
  auto add = [&q](absl::string_view k, absl::string_view v) {
    absl::StrAppend(&q, q.empty() ? "?" : "&", k, "=", UrlEncode(v));
  };
  if (watch) add("watch", "1");
  if (!o.label_selector.empty()) add("labelSelector", o.label_selector);
  if (!o.field_selector.empty()) add("fieldSelector", o.field_selector);
  if (!o.resource_version.empty()) add("resourceVersion", o.resource_version);
  if (!o.resource_version_match.empty()) add("resourceVersionMatch", o.resource_version_match);
  if (!watch && o.limit > 0) add("limit", absl::StrCat(o.limit));
  if (watch && o.allow_watch_bookmarks) add("allowWatchBookmarks", "true");
  if (watch && o.send_initial_events) add("sendInitialEvents", "true");
  if (watch && o.timeout_seconds) add("timeoutSeconds", absl::StrCat(*o.timeout_seconds));
  return q;
}

RestClient::RestClient(KubeConfig config, RestOptions options)
    : config_(std::move(config)), options_(std::move(options)) {}

RestClient::~RestClient() = default;

absl::StatusOr<std::unique_ptr<RestClient>> RestClient::Create(KubeConfig config,
                                                               RestOptions options) {
  std::unique_ptr<RestClient> c(new RestClient(std::move(config), std::move(options)));
  const std::string& server = c->config_.server;
  std::string rest;
  if (absl::StartsWith(server, "https://")) {
    c->https_ = true;
    rest = server.substr(8);
  } else if (absl::StartsWith(server, "http://")) {
    rest = server.substr(7);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(c->config_.source, ": server \"", server, "\": must be https:// or http://"));
  }
  if (size_t slash = rest.find('/'); slash != std::string::npos) {
    if (rest.substr(slash) != "/") {
      return absl::InvalidArgumentError(absl::StrCat(c->config_.source, ": server \"", server,
                                                     "\": a path prefix is not supported"));
    }
    rest = rest.substr(0, slash);
  }
  // host, [v6]:port or host:port
  std::string port_text;
  if (!rest.empty() && rest[0] == '[') {
    const size_t close = rest.find(']');
    if (close == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(c->config_.source, ": server \"", server, "\": unbalanced [ in the host"));
    }
    c->host_ = rest.substr(1, close - 1);
    if (close + 1 < rest.size() && rest[close + 1] == ':') port_text = rest.substr(close + 2);
  } else if (size_t colon = rest.rfind(':'); colon != std::string::npos) {
    c->host_ = rest.substr(0, colon);
    port_text = rest.substr(colon + 1);
  } else {
    c->host_ = rest;
  }
  c->port_ = c->https_ ? 443 : 80;
  if (!port_text.empty() &&
      (!absl::SimpleAtoi(port_text, &c->port_) || c->port_ <= 0 || c->port_ > 65535)) {
    return absl::InvalidArgumentError(
        absl::StrCat(c->config_.source, ": server \"", server, "\": bad port"));
  }
  if (c->host_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(c->config_.source, ": server \"", server, "\": no host"));
  }
  c->tls_ = std::make_unique<Tls>();
  if (c->https_) {
    if (!c->config_.ca_pem.empty()) {
      if (absl::Status s = ParseCas(c->config_.ca_pem, c->tls_->cas); !s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(c->config_.source, ": certificate authority: ", s.message()));
      }
    }
    if (!c->config_.client_cert_pem.empty()) {
      const std::string& cp = c->config_.client_cert_pem;
      BIO* bio = BIO_new_mem_buf(cp.data(), static_cast<int>(cp.size()));
      c->tls_->cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
      BIO_free(bio);
      if (c->tls_->cert == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(c->config_.source, ": client certificate: not a PEM certificate (",
                         OpenSslError(), ")"));
      }
      const std::string& kp = c->config_.client_key_pem;
      bio = BIO_new_mem_buf(kp.data(), static_cast<int>(kp.size()));
      c->tls_->key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
      BIO_free(bio);
      if (c->tls_->key == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            c->config_.source, ": client key: not a PEM private key (", OpenSslError(), ")"));
      }
      if (X509_check_private_key(c->tls_->cert, c->tls_->key) != 1) {
        ERR_clear_error();
        return absl::InvalidArgumentError(absl::StrCat(
            c->config_.source, ": the client key does not match the client certificate"));
      }
    }
  }
  if (c->options_.clock == nullptr) {
    c->owned_clock_ = std::make_unique<RealClock>();
    c->clock_ = c->owned_clock_.get();
  } else {
    c->clock_ = c->options_.clock;
  }
  if (c->options_.qps > 0) {
    c->bucket_ = std::make_unique<TokenBucket>(c->options_.qps, c->options_.burst, *c->clock_);
  }
  return c;
}

std::unique_ptr<httplib::ClientImpl> RestClient::NewConnection(absl::Duration read_timeout) const {
  std::unique_ptr<httplib::ClientImpl> http;
  if (https_) {
    auto ssl = std::make_unique<Probed<httplib::SSLClient>>(host_, port_, tls_->cert, tls_->key);
    if (config_.insecure_skip_tls_verify) {
      ssl->enable_server_certificate_verification(false);
    } else if (!tls_->cas.empty()) {
      X509_STORE* store = X509_STORE_new();
      for (X509* ca : tls_->cas) X509_STORE_add_cert(store, ca);
      ssl->set_ca_cert_store(store);  // the SSL_CTX owns it
      ssl->set_ca_cert_path("", kNoCaDir);
    }
    http = std::move(ssl);
  } else {
    http = std::make_unique<Probed<httplib::ClientImpl>>(host_, port_);
  }
  http->set_keep_alive(true);
  http->set_tcp_nodelay(true);
  const int64_t connect_us = absl::ToInt64Microseconds(options_.connect_timeout);
  http->set_connection_timeout(connect_us / 1000000, connect_us % 1000000);
  const int64_t read_us = absl::ToInt64Microseconds(read_timeout);
  http->set_read_timeout(read_us / 1000000, read_us % 1000000);
  http->set_write_timeout(read_us / 1000000, read_us % 1000000);
  return http;
}

std::unique_ptr<httplib::ClientImpl> RestClient::Acquire() {
  for (;;) {
    std::unique_ptr<httplib::ClientImpl> c;
    {
      absl::MutexLock lock(&pool_mu_);
      if (idle_.empty()) break;
      c = std::move(idle_.back());
      idle_.pop_back();
    }
    if (!IsStale(*c)) return c;
    // Closed by the server (idle timeout, restart): dropped here, outside the lock.
  }
  return NewConnection(options_.timeout);
}

void RestClient::Release(std::unique_ptr<httplib::ClientImpl> c) {
  absl::MutexLock lock(&pool_mu_);
  if (static_cast<int>(idle_.size()) < options_.max_idle_connections) idle_.push_back(std::move(c));
}

std::string RestClient::BearerToken() {
  if (config_.token_file.empty()) return config_.token;
  struct stat st;
  absl::MutexLock lock(&token_mu_);
  if (stat(config_.token_file.c_str(), &st) == 0) {
    const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    if (mtime != token_mtime_ns_) {
      std::ifstream in(config_.token_file);
      std::stringstream ss;
      ss << in.rdbuf();
      std::string t = ss.str();
      while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
      file_token_ = std::move(t);
      token_mtime_ns_ = mtime;
    }
  }
  return file_token_.empty() ? config_.token : file_token_;
}

absl::Status RestClient::TransportError(const httplib::ClientImpl& http, int error) const {
  const auto e = static_cast<httplib::Error>(error);
  if (e == httplib::Error::SSLServerVerification) {
    long verify = X509_V_OK;
    if (const auto* ssl = dynamic_cast<const httplib::SSLClient*>(&http)) {
      verify = ssl->get_openssl_verify_result();
    }
    std::string why = verify != X509_V_OK
                          ? X509_verify_cert_error_string(verify)
                          : "its certificate does not name this host (" + host_ + ")";
    const std::string against = config_.ca_pem.empty()
                                    ? "the system's CAs"
                                    : "the certificate authority of " + config_.source;
    return absl::UnavailableError(
        absl::StrCat(config_.server, ": TLS: the server's certificate is not trusted: ", why,
                     " (checked against ", against, ")"));
  }
  return absl::UnavailableError(
      absl::StrCat("cannot reach ", config_.server, ": ", httplib::to_string(e)));
}

absl::StatusOr<HttpResult> RestClient::Send(const std::string& method, const std::string& path,
                                            const std::string& body,
                                            const std::string& content_type, On429 on_429) {
  if (bucket_) {
    const absl::Duration wait = bucket_->Reserve();
    if (wait > absl::ZeroDuration()) clock_->Sleep(wait);
  }
  httplib::Headers headers = {{"Accept", "application/json"}, {"User-Agent", options_.user_agent}};
  if (const std::string token = BearerToken(); !token.empty()) {
    headers.emplace("Authorization", "Bearer " + token);
  }
  if (method != "GET" && method != "POST" && method != "PUT" && method != "PATCH" &&
      method != "DELETE") {
    return absl::InvalidArgumentError(absl::StrCat("unsupported HTTP method ", method));
  }
  SigpipeGuard no_sigpipe;
  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<httplib::ClientImpl> http = Acquire();
    httplib::Result res = [&] {
      if (method == "GET") return http->Get(path.c_str(), headers);
      if (method == "POST") return http->Post(path.c_str(), headers, body, content_type.c_str());
      if (method == "PUT") return http->Put(path.c_str(), headers, body, content_type.c_str());
      if (method == "PATCH") return http->Patch(path.c_str(), headers, body, content_type.c_str());
      return http->Delete(path.c_str(), headers, body, content_type.c_str());
    }();
    if (!res) {
      // A keep-alive connection the server closed just as it was reused: one retry on a fresh
      // connection for a read, or for any request whose sending failed (a request the server
      // did not receive whole cannot have been applied).
      const bool unsent = res.error() == httplib::Error::Write;
      if (attempt == 0 && (method == "GET" || unsent) &&
          res.error() != httplib::Error::SSLServerVerification) {
        continue;
      }
      return TransportError(*http, static_cast<int>(res.error()));
    }
    HttpResult out{res->status, std::move(res->body)};
    const std::string retry_after = res->get_header_value("Retry-After");
    Release(std::move(http));
    // API priority and fairness sheds load with 429 + Retry-After: honour it a few times.
    int seconds = 0;
    if (out.status == 429 && on_429 == On429::kRetryAfter && attempt < 3 &&
        absl::SimpleAtoi(retry_after, &seconds)) {
      clock_->Sleep(absl::Seconds(std::min(std::max(seconds, 1), 10)));
      continue;
    }
    return out;
  }
}

absl::StatusOr<HttpResult> RestClient::Raw(const std::string& method, const std::string& path,
                                           const std::string& body,
                                           const std::string& content_type) {
  return Send(method, path, body, content_type);
}

absl::StatusOr<Json> RestClient::Call(const std::string& what, const std::string& method,
                                      const std::string& path, const std::string& body,
                                      const std::string& content_type, On429 on_429) {
  absl::StatusOr<HttpResult> r = Send(method, path, body, content_type, on_429);
  if (!r.ok())
    return absl::Status(r.status().code(), absl::StrCat(what, ": ", r.status().message()));
  if (r->status < 200 || r->status >= 300) return ApiError(what, r->status, r->body);
  Json j = Json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InternalError(absl::StrCat(what, ": the response is not JSON"));
  }
  return j;
}

absl::StatusOr<Json> RestClient::Get(const ResourceType& t, const std::string& ns,
                                     const std::string& name, const std::string& subresource) {
  return Call(absl::StrCat("get ", DescribeObject(t, ns, name)), "GET",
              ResourcePath(t, ns, name, subresource), "", "");
}

absl::StatusOr<Json> RestClient::List(const ResourceType& t, const std::string& ns,
                                      const ListOptions& opts) {
  const std::string what = absl::StrCat("list ", DescribeObject(t, ns, ""));
  Json out = {{"metadata", Json::object()}, {"items", Json::array()}};
  std::string cont;
  for (;;) {
    std::string path = ResourcePath(t, ns) + ListQuery(opts, false);
    if (!cont.empty()) {
      absl::StrAppend(&path, path.find('?') == std::string::npos ? "?" : "&",
                      "continue=", UrlEncode(cont));
    }
    absl::StatusOr<Json> page = Call(what, "GET", path, "", "");
    if (!page.ok()) return page.status();
    if (page->contains("items") && (*page)["items"].is_array()) {
      for (Json& item : (*page)["items"]) out["items"].push_back(std::move(item));
    }
    const Json md = page->value("metadata", Json::object());
    if (md.contains("resourceVersion")) out["metadata"]["resourceVersion"] = md["resourceVersion"];
    cont = md.value("continue", "");
    if (cont.empty()) break;
  }
  return out;
}

absl::StatusOr<Json> RestClient::Create(const ResourceType& t, const std::string& ns,
                                        const Json& obj) {
  const Json md = obj.value("metadata", Json::object());
  const std::string name = md.value("name", md.value("generateName", ""));
  return Call(absl::StrCat("create ", DescribeObject(t, ns, name)), "POST", ResourcePath(t, ns),
              obj.dump(), "application/json");
}

absl::StatusOr<Json> RestClient::Update(const ResourceType& t, const std::string& ns,
                                        const std::string& name, const Json& obj,
                                        const std::string& subresource) {
  return Call(absl::StrCat("update ", DescribeObject(t, ns, name), subresource.empty() ? "" : " ",
                           subresource),
              "PUT", ResourcePath(t, ns, name, subresource), obj.dump(), "application/json");
}

absl::StatusOr<Json> RestClient::MergePatch(const ResourceType& t, const std::string& ns,
                                            const std::string& name, const Json& patch,
                                            const std::string& subresource) {
  return Call(absl::StrCat("patch ", DescribeObject(t, ns, name), subresource.empty() ? "" : " ",
                           subresource),
              "PATCH", ResourcePath(t, ns, name, subresource), patch.dump(),
              "application/merge-patch+json");
}

absl::Status RestClient::Delete(const ResourceType& t, const std::string& ns,
                                const std::string& name, const DeleteOptions& opts) {
  Json body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (opts.grace_period_seconds) body["gracePeriodSeconds"] = *opts.grace_period_seconds;
  if (!opts.propagation_policy.empty()) body["propagationPolicy"] = opts.propagation_policy;
  if (!opts.uid_precondition.empty()) body["preconditions"]["uid"] = opts.uid_precondition;
  if (!opts.resource_version_precondition.empty()) {
    body["preconditions"]["resourceVersion"] = opts.resource_version_precondition;
  }
  return Call(absl::StrCat("delete ", DescribeObject(t, ns, name)), "DELETE",
              ResourcePath(t, ns, name), body.dump(), "application/json")
      .status();
}

absl::StatusOr<Json> RestClient::PostSubresource(const ResourceType& t, const std::string& ns,
                                                 const std::string& name,
                                                 const std::string& subresource, const Json& body) {
  return Call(absl::StrCat("post ", DescribeObject(t, ns, name), " ", subresource), "POST",
              ResourcePath(t, ns, name, subresource), body.dump(), "application/json");
}

absl::Status RestClient::Bind(const Binding& b) {
  return Call(absl::StrCat("bind ", DescribeObject(PodsResource(), b.ns, b.pod_name), " to node ",
                           b.node),
              "POST", ResourcePath(PodsResource(), b.ns, b.pod_name, "binding"),
              EncodeBinding(b).dump(), "application/json")
      .status();
}

absl::Status RestClient::Evict(const Eviction& e) {
  return Call(absl::StrCat("evict ", DescribeObject(PodsResource(), e.ns, e.pod_name)), "POST",
              ResourcePath(PodsResource(), e.ns, e.pod_name, "eviction"), EncodeEviction(e).dump(),
              "application/json", On429::kReturn)
      .status();
}

absl::Status RestClient::Watch(const ResourceType& t, const std::string& ns,
                               const ListOptions& opts,
                               const std::function<bool(WatchEvent&&)>& on_event,
                               WatchCancel* cancel) {
  const std::string what = absl::StrCat("watch ", DescribeObject(t, ns, ""));
  // The server ends the watch after timeoutSeconds; the read timeout leaves room for that and
  // for the bookmarks' period (about a minute).
  const absl::Duration read_timeout =
      absl::Seconds(opts.timeout_seconds.value_or(300)) + absl::Seconds(90);
  SigpipeGuard no_sigpipe;
  std::unique_ptr<httplib::ClientImpl> http = NewConnection(read_timeout);
  if (cancel != nullptr && !cancel->Register(http.get())) {
    return absl::CancelledError(absl::StrCat(what, ": cancelled"));
  }
  httplib::Headers headers = {{"Accept", "application/json"}, {"User-Agent", options_.user_agent}};
  if (const std::string token = BearerToken(); !token.empty()) {
    headers.emplace("Authorization", "Bearer " + token);
  }
  int status = 0;
  std::string buf, error_body;
  absl::Status stream_error;
  bool stopped = false;
  const std::string path = ResourcePath(t, ns) + ListQuery(opts, true);
  httplib::Result res = http->Get(
      path.c_str(), headers,
      [&](const httplib::Response& r) {
        status = r.status;
        return true;
      },
      [&](const char* data, size_t len) {
        if (status != 200) {
          error_body.append(data, len);
          return true;
        }
        buf.append(data, len);
        size_t start = 0;
        for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
          if (nl == start) continue;
          Json line = Json::parse(buf.begin() + static_cast<std::ptrdiff_t>(start),
                                  buf.begin() + static_cast<std::ptrdiff_t>(nl), nullptr,
                                  /*allow_exceptions=*/false);
          if (line.is_discarded() || !line.is_object() || !line.contains("type")) {
            stream_error = absl::InternalError(absl::StrCat(what, ": a watch event is not JSON"));
            return false;
          }
          WatchEvent ev;
          ev.type = line.value("type", "");
          ev.object = std::move(line["object"]);
          if (ev.type == "ERROR") {
            stream_error = ApiErrorFromStatus(what, ev.object);
            return false;
          }
          if (!on_event(std::move(ev))) {
            stopped = true;
            return false;
          }
        }
        buf.erase(0, start);
        return true;
      });
  if (cancel != nullptr) cancel->Unregister();
  if (cancel != nullptr && cancel->cancelled()) {
    return absl::CancelledError(absl::StrCat(what, ": cancelled"));
  }
  if (!stream_error.ok()) return stream_error;
  if (stopped) return absl::OkStatus();
  if (!res) {
    if (status == 200) {
      return absl::UnavailableError(
          absl::StrCat(what, ": the stream broke: ", httplib::to_string(res.error())));
    }
    absl::Status s = TransportError(*http, static_cast<int>(res.error()));
    return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  }
  if (status != 200) return ApiError(what, status, error_body);
  return absl::OkStatus();
}

}  // namespace tessera::kube
