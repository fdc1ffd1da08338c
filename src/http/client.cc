#include "http/client.h"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <poll.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace tessera::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

struct Url {
  bool tls = false;
  std::string host;  // without brackets
  std::string port;
  std::string host_header;  // as the Host header wants it
};

std::optional<Url> ParseUrl(std::string_view url) {
  absl::string_view s(url.data(), url.size());
  Url u;
  if (absl::ConsumePrefix(&s, "https://")) {
    u.tls = true;
  } else if (!absl::ConsumePrefix(&s, "http://")) {
    return std::nullopt;
  }
  while (absl::ConsumeSuffix(&s, "/")) {
  }
  if (s.empty() || s.find('/') != absl::string_view::npos) return std::nullopt;
  absl::string_view host = s, port;
  if (s.front() == '[') {  // [IPv6]:port
    const size_t close = s.find(']');
    if (close == absl::string_view::npos) return std::nullopt;
    host = s.substr(1, close - 1);
    absl::string_view rest = s.substr(close + 1);
    if (!rest.empty() && !absl::ConsumePrefix(&rest, ":")) return std::nullopt;
    port = rest;
  } else if (const size_t colon = s.rfind(':'); colon != absl::string_view::npos) {
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
  }
  int n = 0;
  if (host.empty() || (!port.empty() && (!absl::SimpleAtoi(port, &n) || n <= 0 || n > 65535))) {
    return std::nullopt;
  }
  u.host = std::string(host);
  u.port = port.empty() ? (u.tls ? "443" : "80") : std::string(port);
  u.host_header = std::string(s);
  return u;
}

// Lists of every job run to tens of MB. (Not boost::none: Beast 1.74 compares a Content-Length
// with an empty limit as larger.)
constexpr std::uint64_t kNoBodyLimit = std::uint64_t{1} << 40;

std::chrono::steady_clock::duration Chrono(absl::Duration d) {
  return std::chrono::microseconds(absl::ToInt64Microseconds(d));
}

}  // namespace

std::string ToString(ClientError e) {
  switch (e) {
    case ClientError::kNone:
      return "ok";
    case ClientError::kBadUrl:
      return "not an http(s)://HOST[:PORT] URL";
    case ClientError::kConnection:
      return "could not connect (nothing listening there, or refused)";
    case ClientError::kConnectionTimeout:
      return "timed out connecting";
    case ClientError::kTls:
      return "the TLS handshake failed (an http:// server behind an https:// URL?)";
    case ClientError::kTlsVerify:
      return "the server's certificate is not trusted";
    case ClientError::kWrite:
      return "the connection broke while sending the request";
    case ClientError::kRead:
      return "the connection broke while reading the answer";
    case ClientError::kCanceled:
      return "the read was stopped";
  }
  return "unknown";
}

std::string ClientResponse::ErrorText() const {
  return detail.empty() ? ToString(error) : absl::StrCat(ToString(error), ": ", detail);
}

// One connection: a TCP stream, under a TLS stream for https. Every operation runs the Client's
// own io_context until it completes; the stream's expiry bounds it.
class Client::Conn {
 public:
  explicit Conn(Url url) : url_(std::move(url)) {}
  ~Conn() { Shut(); }

  // From any thread: closes the socket of the operation in flight, on the thread running it.
  // A close posted while nothing ran is dropped by the next request's Ensure (stale).
  void Cancel() {
    asio::post(ioc_, [this, epoch = epoch_.load()] {
      if (epoch != epoch_.load()) return;  // posted before this request began
      beast::error_code ec;
      if (tls_ != nullptr) beast::get_lowest_layer(*tls_).socket().close(ec);
      if (tcp_ != nullptr) tcp_->socket().close(ec);
      open_ = false;
    });
  }

  // Connects (and handshakes) unless a connection that is still good is open.
  ClientError Ensure(const ClientOptions& o, std::string* detail) {
    // A new request: cancels posted before it are stale.
    ++epoch_;
    ioc_.restart();
    ioc_.poll();
    if (open_ && used_ && Readable()) Shut();  // closed by the server, or stray bytes: a new one
    if (open_) return ClientError::kNone;
    Shut();
    beast::error_code ec;
    tcp::resolver resolver(ioc_);
    tcp::resolver::results_type addrs = resolver.resolve(url_.host, url_.port, ec);
    if (ec) {
      *detail = ec.message();
      return ClientError::kConnection;
    }
    tcp_ = std::make_unique<beast::tcp_stream>(ioc_);
    tcp_->expires_after(Chrono(o.connect_timeout));
    ec = Run([&](auto done) { tcp_->async_connect(addrs, done); });
    if (ec) {
      *detail = ec.message();
      tcp_.reset();
      return ec == beast::error::timeout ? ClientError::kConnectionTimeout
                                         : ClientError::kConnection;
    }
    tcp_->socket().set_option(tcp::no_delay(true), ec);
    if (url_.tls) {
      if (ClientError e = Handshake(o, detail); e != ClientError::kNone) {
        Shut();
        return e;
      }
    }
    open_ = true;
    used_ = false;
    return ClientError::kNone;
  }

  ClientError Write(const bhttp::request<bhttp::string_body>& req, absl::Duration timeout,
                    std::string* detail) {
    beast::error_code ec =
        Io(timeout, [&](auto& s, auto done) { bhttp::async_write(s, req, done); });
    used_ = true;
    if (ec) {
      *detail = ec.message();
      Shut();
      return ClientError::kWrite;
    }
    return ClientError::kNone;
  }

  template <class Parser>
  beast::error_code ReadHeader(Parser& p, absl::Duration timeout) {
    return Io(timeout, [&](auto& s, auto done) { bhttp::async_read_header(s, buf_, p, done); });
  }
  template <class Parser>
  beast::error_code Read(Parser& p, absl::Duration timeout) {
    return Io(timeout, [&](auto& s, auto done) { bhttp::async_read(s, buf_, p, done); });
  }
  template <class Parser>
  beast::error_code ReadSome(Parser& p, absl::Duration timeout) {
    return Io(timeout, [&](auto& s, auto done) { bhttp::async_read_some(s, buf_, p, done); });
  }

  void Shut() {
    open_ = false;
    buf_.clear();
    beast::error_code ec;
    if (tls_ != nullptr) {
      beast::get_lowest_layer(*tls_).socket().close(ec);
      tls_.reset();
    }
    if (tcp_ != nullptr) {
      tcp_->socket().close(ec);
      tcp_.reset();
    }
  }

  const Url& url() const { return url_; }

 private:
  // Starts an operation with a handler that records its error, and runs it to completion.
  template <class Start>
  beast::error_code Run(Start&& start) {
    beast::error_code result;
    start([&result](beast::error_code ec, auto&&...) { result = ec; });
    ioc_.restart();
    ioc_.run();
    return result;
  }

  beast::tcp_stream& Lowest() { return tls_ ? beast::get_lowest_layer(*tls_) : *tcp_; }

  // Runs `start(stream, done)` on the connection's top stream (TLS or plain TCP), bounded by
  // `timeout`.
  template <class Start>
  beast::error_code Io(absl::Duration timeout, Start&& start) {
    Lowest().expires_after(Chrono(timeout));
    return tls_ ? Run([&](auto done) { start(*tls_, done); })
                : Run([&](auto done) { start(*tcp_, done); });
  }

  // A kept-alive connection with bytes to read before any request was written has been closed
  // by the server (EOF) or is out of step: either way it is not reused.
  bool Readable() {
    if (buf_.size() != 0) return true;
    pollfd p{Lowest().socket().native_handle(), POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }

  ClientError Handshake(const ClientOptions& o, std::string* detail) {
    beast::error_code ec;
    ctx_.emplace(asio::ssl::context::tls_client);
    if (o.insecure_skip_verify) {
      ctx_->set_verify_mode(asio::ssl::verify_none);
    } else {
      ctx_->set_verify_mode(asio::ssl::verify_peer);
      if (!o.ca_file.empty()) {
        ctx_->load_verify_file(o.ca_file, ec);
      } else {
        ctx_->set_default_verify_paths(ec);
      }
      if (ec) {
        *detail =
            absl::StrCat(o.ca_file.empty() ? "the system's CAs" : o.ca_file, ": ", ec.message());
        return ClientError::kTlsVerify;
      }
    }
    tls_ = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(std::move(*tcp_), *ctx_);
    tcp_.reset();
    SSL* ssl = tls_->native_handle();
    beast::error_code not_ip;
    (void)asio::ip::make_address(url_.host, not_ip);
    const bool ip = !not_ip;
    if (!ip) SSL_set_tlsext_host_name(ssl, url_.host.c_str());
    if (!o.insecure_skip_verify) {
      // The certificate must name the host of the URL (a DNS name, or an IP address in its
      // subjectAltName).
      X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
      if (ip) {
        X509_VERIFY_PARAM_set1_ip_asc(param, url_.host.c_str());
      } else {
        X509_VERIFY_PARAM_set1_host(param, url_.host.c_str(), 0);
      }
    }
    Lowest().expires_after(Chrono(o.connect_timeout));
    ec = Run([&](auto done) { tls_->async_handshake(asio::ssl::stream_base::client, done); });
    if (!ec) return ClientError::kNone;
    *detail = ec.message();
    if (ec == beast::error::timeout) return ClientError::kConnectionTimeout;
    const long verify = SSL_get_verify_result(ssl);  // NOLINT(google-runtime-int): OpenSSL's type
    if (verify != X509_V_OK) {
      *detail = X509_verify_cert_error_string(verify);
      return ClientError::kTlsVerify;
    }
    return ClientError::kTls;
  }

  Url url_;
  asio::io_context ioc_{1};
  std::optional<asio::ssl::context> ctx_;
  std::unique_ptr<beast::tcp_stream> tcp_;  // plain http, or before the TLS handshake
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls_;
  beast::flat_buffer buf_;
  bool open_ = false;
  bool used_ = false;               // a request was written on it
  std::atomic<uint64_t> epoch_{0};  // requests begun: a Cancel applies to the one it saw
};

Client::Client(std::string base_url, ClientOptions options)
    : base_url_(std::move(base_url)), options_(std::move(options)) {
  std::optional<Url> url = ParseUrl(base_url_);
  if (url) conn_ = std::make_unique<Conn>(*std::move(url));
}

Client::~Client() = default;
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;

void Client::Close() {
  if (conn_) conn_->Shut();
}

void Client::Cancel() {
  if (conn_) conn_->Cancel();
}

namespace {

bhttp::request<bhttp::string_body> Request(std::string_view method, std::string_view target,
                                           std::string_view body, std::string_view content_type,
                                           const Headers& headers, const ClientOptions& o,
                                           const std::string& host) {
  bhttp::request<bhttp::string_body> req;
  req.method_string(beast::string_view(method.data(), method.size()));
  req.target(beast::string_view(target.data(), target.size()));
  req.version(11);
  req.set(bhttp::field::host, host);
  req.set(bhttp::field::user_agent, "tessera");
  if (!o.bearer_token.empty()) {
    req.set(bhttp::field::authorization, absl::StrCat("Bearer ", o.bearer_token));
  }
  for (const auto& [k, v] : headers) req.set(k, v);
  if (!body.empty() || method == "POST" || method == "PUT") {
    if (!content_type.empty()) {
      req.set(bhttp::field::content_type,
              beast::string_view(content_type.data(), content_type.size()));
    }
    req.body() = std::string(body);
  }
  req.keep_alive(o.keep_alive);
  req.prepare_payload();
  return req;
}

}  // namespace

ClientError Client::Send(std::string_view method, std::string_view target, std::string_view body,
                         std::string_view content_type, const Headers& headers,
                         std::string* detail) {
  if (conn_ == nullptr) {
    *detail = base_url_;
    return ClientError::kBadUrl;
  }
  if (ClientError e = conn_->Ensure(options_, detail); e != ClientError::kNone) return e;
  const bhttp::request<bhttp::string_body> req =
      Request(method, target, body, content_type, headers, options_, conn_->url().host_header);
  return conn_->Write(req, options_.write_timeout, detail);
}

ClientResponse Client::Do(std::string_view method, std::string_view target, std::string_view body,
                          std::string_view content_type, const Headers& headers) {
  ClientResponse r;
  r.error = Send(method, target, body, content_type, headers, &r.detail);
  if (!r.ok()) return r;
  bhttp::response_parser<bhttp::string_body> p;
  p.body_limit(kNoBodyLimit);
  if (method == "HEAD") p.skip(true);
  if (beast::error_code ec = conn_->Read(p, options_.read_timeout); ec) {
    r.error = ClientError::kRead;
    r.detail = ec.message();
    conn_->Shut();
    return r;
  }
  r.status = p.get().result_int();
  if (!p.get().keep_alive() || !options_.keep_alive) conn_->Shut();
  r.body = std::move(p.get().body());
  return r;
}

ClientResponse Client::Stream(std::string_view target, const Headers& headers,
                              const std::function<void(int status)>& on_status,
                              const std::function<bool(std::string_view data)>& on_data) {
  ClientResponse r;
  r.error = Send("GET", target, {}, {}, headers, &r.detail);
  if (!r.ok()) return r;
  bhttp::response_parser<bhttp::buffer_body> p;
  p.body_limit(kNoBodyLimit);
  auto fail = [&](beast::error_code ec) {
    r.error = ClientError::kRead;
    r.detail = ec.message();
    conn_->Shut();
    return r;
  };
  if (beast::error_code ec = conn_->ReadHeader(p, options_.read_timeout); ec) return fail(ec);
  r.status = p.get().result_int();
  if (on_status) on_status(r.status);
  char chunk[64 * 1024];
  while (!p.is_done()) {
    p.get().body().data = chunk;
    p.get().body().size = sizeof chunk;
    beast::error_code ec = conn_->ReadSome(p, options_.read_timeout);
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec) return fail(ec);
    const size_t n = sizeof chunk - p.get().body().size;
    if (n > 0 && !on_data(std::string_view(chunk, n))) {
      conn_->Shut();  // the rest of the body is not read: the connection cannot be reused
      r.error = ClientError::kCanceled;
      return r;
    }
  }
  if (!p.get().keep_alive() || !options_.keep_alive) conn_->Shut();
  return r;
}

}  // namespace tessera::http
