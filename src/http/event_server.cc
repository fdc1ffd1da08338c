#include "http/event_server.h"

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tessera::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Failure = DeadlineStream::Failure;
using Message = bhttp::request<bhttp::string_body>;

namespace {

absl::string_view SV(beast::string_view s) { return absl::string_view(s.data(), s.size()); }

// A limit's duration for a timer; zero or less means no limit (a year).
std::chrono::nanoseconds ToChrono(absl::Duration d) {
  return d <= absl::ZeroDuration() ? std::chrono::hours(24 * 365) : absl::ToChronoNanoseconds(d);
}

using SteadyTime = std::chrono::steady_clock::time_point;

// How often a fired read or write timer cancels again until its operation's handler runs.
constexpr std::chrono::milliseconds kRecancel{5};

// A whole response with Content-Length (deferred answers, cut requests, refusals). A response
// whose body is a provider of known length (request_body.h's RefuseAndClose) is written out.
std::string Serialize(const httplib::Response& res, bool close) {
  std::string provided;
  if (res.body.empty() && res.content_provider_ && res.content_length_ > 0) {
    httplib::DataSink sink;
    sink.write = [&provided](const char* d, size_t n) {
      provided.append(d, n);
      return true;
    };
    sink.is_writable = [] { return true; };
    sink.done = [] {};
    while (provided.size() < res.content_length_) {
      const size_t off = provided.size();
      res.content_provider_(off, res.content_length_ - off, sink);
      if (provided.size() == off) break;  // the provider gave up
    }
  }
  const std::string& body = provided.empty() ? res.body : provided;
  const int status = res.status <= 0 ? 200 : res.status;
  std::string out =
      absl::StrCat("HTTP/1.1 ", status, " ",
                   SV(bhttp::obsolete_reason(static_cast<bhttp::status>(status))), "\r\n");
  for (const auto& [k, v] : res.headers) {
    if (absl::EqualsIgnoreCase(k, "Content-Length") || absl::EqualsIgnoreCase(k, "Connection")) {
      continue;
    }
    absl::StrAppend(&out, k, ": ", v, "\r\n");
  }
  absl::StrAppend(&out, "Content-Length: ", body.size(), "\r\n",
                  close ? "Connection: close\r\n" : "", "\r\n", body);
  return out;
}

void DefaultCutResponse(Failure f, uint64_t, httplib::Response& res) {
  res.status = f == Failure::kBodyTooLarge ? 413 : 400;
  res.set_content(f == Failure::kBodyTooLarge ? "request body too large\n" : "bad request\n",
                  "text/plain");
}

// The request as cpp-httplib sees it before routing: method, target, path, headers, version.
httplib::Request Head(const Message& m) {
  httplib::Request r;
  r.method = std::string(m.method_string());
  r.target = std::string(m.target());
  r.version = m.version() == 10 ? "HTTP/1.0" : "HTTP/1.1";
  const size_t q = r.target.find('?');
  r.path = httplib::detail::decode_url(r.target.substr(0, q), false);
  for (const auto& f : m) r.headers.emplace(std::string(f.name_string()), std::string(f.value()));
  return r;
}

// The request again as bytes, for cpp-httplib's parser: the body decoded (chunks joined), so it
// goes with a Content-Length and without Transfer-Encoding.
std::string Replay(const Message& m) {
  std::string out = absl::StrCat(SV(m.method_string()), " ", SV(m.target()),
                                 m.version() == 10 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n");
  for (const auto& f : m) {
    if (f.name() == bhttp::field::content_length || f.name() == bhttp::field::transfer_encoding) {
      continue;
    }
    absl::StrAppend(&out, SV(f.name_string()), ": ", SV(f.value()), "\r\n");
  }
  if (!m.body().empty() || m.has_content_length() || m.chunked()) {
    absl::StrAppend(&out, "Content-Length: ", m.body().size(), "\r\n");
  }
  absl::StrAppend(&out, "\r\n", m.body());
  return out;
}

}  // namespace

// The worker side's view of a connection. Every method may be called from any thread.
class Conn {
 public:
  virtual ~Conn() = default;
  // Queues `data` for the peer. `may_block`: wait while more than max_pending_bytes are queued
  // (worker threads only). False once the connection is dead.
  virtual bool Enqueue(std::string data, bool may_block) = 0;
  // The request is answered: once the queued bytes are out, read the next one or (close) close.
  virtual void Finish(bool close) = 0;
  virtual void Close() = 0;
  virtual bool dead() const = 0;
  virtual const SSL* ssl() const = 0;
  virtual asio::any_io_executor executor() = 0;
  std::string remote_ip, local_ip;
  int remote_port = -1, local_port = -1;
};

struct EventServer::Impl {
  struct Deferred {
    std::string method;
    std::regex path;
    DeferredHandler handler;
  };

  Impl(EventServer& s, EventServerOptions o)
      : self(s),
        options(std::move(o)),
        pool(static_cast<size_t>(std::max(1, options.worker_threads))) {
    if (options.tls != nullptr) tls.emplace(options.tls);
    if (!options.cut_response) options.cut_response = DefaultCutResponse;
  }

  void PostWork(std::function<void()> fn) { asio::post(pool, std::move(fn)); }
  void Accept();
  void Refuse(tcp::socket sock);
  void Track(uint64_t id, std::weak_ptr<Conn> c) {
    std::lock_guard l(conns_mu);
    conns.emplace(id, std::move(c));
  }
  void Untrack(uint64_t id) {
    std::lock_guard l(conns_mu);
    conns.erase(id);
  }

  bool Process(httplib::Stream& stream, bool close, bool& closed, const SSL* ssl) {
    return self.Process(stream, close, closed, ssl);
  }

  // Declared first, destroyed last: the handlers io's destruction drops hold connections and
  // responders whose destructors use these.
  EventServer& self;
  EventServerOptions options;
  std::atomic<bool> stopping{false};
  std::atomic<bool> started{false};
  std::atomic<int> open{0};
  std::atomic<int> parked{0};
  std::atomic<int> queued{0};
  std::atomic<int64_t> refused_connections{0};
  std::atomic<int64_t> refused_requests{0};
  std::atomic<uint64_t> next_id{1};
  std::mutex conns_mu;
  std::map<uint64_t, std::weak_ptr<Conn>> conns;
  std::vector<Deferred> deferred;
  asio::io_context io{std::max(1, options.io_threads)};
  std::optional<asio::ssl::context> tls;
  tcp::acceptor acceptor{io};
  asio::thread_pool pool;
  std::vector<std::thread> io_threads;
};

namespace {

// cpp-httplib's view of one request: reads the replayed bytes, writes through the connection.
class ReplayStream final : public httplib::Stream {
 public:
  ReplayStream(std::string in, std::shared_ptr<Conn> conn)
      : in_(std::move(in)), conn_(std::move(conn)) {}
  bool is_readable() const override { return pos_ < in_.size(); }
  bool is_writable() const override { return !conn_->dead(); }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, in_.size() - pos_);
    std::memcpy(ptr, in_.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!conn_->Enqueue(std::string(ptr, size), true)) return -1;
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = conn_->remote_ip;
    port = conn_->remote_port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = conn_->local_ip;
    port = conn_->local_port;
  }
  ::socket_t socket() const override { return INVALID_SOCKET; }

 private:
  std::string in_;
  size_t pos_ = 0;
  std::shared_ptr<Conn> conn_;
};

class DeferredResponder final : public Responder,
                                public std::enable_shared_from_this<DeferredResponder> {
 public:
  DeferredResponder(EventServer::Impl& srv, std::shared_ptr<Conn> conn, bool close)
      : srv_(srv), conn_(std::move(conn)), close_(close), timer_(conn_->executor()) {
    srv_.parked++;
  }
  ~DeferredResponder() override {
    if (!sent_.exchange(true)) {
      srv_.parked--;
      if (!srv_.stopping) conn_->Close();
    }
  }
  void Send(httplib::Response res) override {
    if (sent_.exchange(true)) return;
    srv_.parked--;
    asio::post(timer_.get_executor(), [self = shared_from_this()] { self->timer_.cancel(); });
    const bool close = close_ || res.get_header_value("Connection") == "close";
    conn_->Enqueue(Serialize(res, close), false);
    conn_->Finish(close);
  }
  void Post(std::function<void()> fn) override { srv_.PostWork(std::move(fn)); }
  void RunAt(absl::Time deadline, std::function<void()> fn) override {
    // A deadline already past runs at once (ToChrono reads zero as "no limit").
    auto wait = std::max(absl::Nanoseconds(1), deadline - absl::Now());
    asio::post(timer_.get_executor(), [self = shared_from_this(), wait, fn = std::move(fn)] {
      if (self->sent_) return;
      self->timer_.expires_after(ToChrono(wait));
      self->timer_.async_wait([self, fn](const boost::system::error_code& ec) {
        if (!ec && !self->sent_) self->srv_.PostWork(fn);
      });
    });
  }

 private:
  EventServer::Impl& srv_;
  std::shared_ptr<Conn> conn_;
  const bool close_;
  std::atomic<bool> sent_{false};
  asio::steady_timer timer_;  // on the connection's strand
};

// One connection: S is tcp::socket or ssl::stream<tcp::socket>. Every member below "strand" is
// touched on the connection's strand only; the queue under mu_ from any thread.
template <typename S>
class ConnImpl final : public Conn, public std::enable_shared_from_this<ConnImpl<S>> {
 public:
  ConnImpl(EventServer::Impl& srv, S stream)
      : srv_(srv),
        id_(srv.next_id++),
        stream_(std::move(stream)),
        timer_(stream_.get_executor()),
        wtimer_(stream_.get_executor()) {
    srv_.open++;
    boost::system::error_code ec;
    tcp::socket& sock = beast::get_lowest_layer(stream_);
    tcp::endpoint r = sock.remote_endpoint(ec), l = sock.local_endpoint(ec);
    remote_ip = r.address().to_string(ec);
    remote_port = r.port();
    local_ip = l.address().to_string(ec);
    local_port = l.port();
  }
  ~ConnImpl() override {
    srv_.Untrack(id_);
    srv_.open--;
  }

  void Start() {
    srv_.Track(id_, this->shared_from_this());
    if constexpr (std::is_same_v<S, tcp::socket>) {
      ReadNext();
    } else {
      Arm(timer_, srv_.options.limits.header_timeout);
      stream_.async_handshake(
          asio::ssl::stream_base::server,
          [self = this->shared_from_this()](const boost::system::error_code& ec) {
            self->Disarm();
            if (ec) return self->CloseNow();
            self->ReadNext();
          });
    }
  }

  bool Enqueue(std::string data, bool may_block) override {
    {
      std::unique_lock l(mu_);
      if (may_block) {
        cv_.wait(l, [&] { return dead_ || pending_ <= srv_.options.max_pending_bytes; });
      }
      if (dead_) return false;
      pending_ += data.size();
      out_.push_back(std::move(data));
    }
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] { self->Kick(); });
    return true;
  }
  void Finish(bool close) override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this(), close] {
      self->finishing_ = true;
      self->close_after_ = self->close_after_ || close;
      self->Kick();
    });
  }
  void Close() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] { self->CloseNow(); });
  }
  bool dead() const override {
    std::lock_guard l(mu_);
    return dead_;
  }
  const SSL* ssl() const override {
    if constexpr (std::is_same_v<S, tcp::socket>) {
      return nullptr;
    } else {
      return const_cast<S&>(stream_).native_handle();
    }
  }
  asio::any_io_executor executor() override { return stream_.get_executor(); }

 private:
  using Self = std::shared_ptr<ConnImpl>;
  enum class Phase { kHeader, kBody };

  // Arms `t` to cancel the socket's operations after `d` (strand), and again every
  // kRecancel until the operation's handler disarms it. One cancel is not enough: a composed
  // operation (Beast's header read loops over socket reads until the header ends; async_write
  // loops over writes; the handshake) may sit between two of its steps, its last read done and
  // its next not yet started, when the timer fires. That cancel then finds nothing pending, the
  // next step starts untimed, and a client trickling a byte at a time would hold the connection
  // as long as it liked.
  void Arm(asio::steady_timer& t, absl::Duration d) {
    timed_out_ = false;
    const uint64_t gen = ++gen_;
    t.expires_after(ToChrono(d));
    AwaitCancel(t, &ConnImpl::gen_, &ConnImpl::timed_out_, gen);
  }
  // Cancels the socket's operations when `t` fires while `this->*gen_of` is still `gen` (and
  // sets `this->*fired`), then again every kRecancel until the generation moves on.
  void AwaitCancel(asio::steady_timer& t, uint64_t ConnImpl::*gen_of, bool ConnImpl::*fired,
                   uint64_t gen) {
    t.async_wait([self = this->shared_from_this(), &t, gen_of, fired,
                  gen](const boost::system::error_code& ec) {
      if (ec || gen != (*self).*gen_of) return;
      (*self).*fired = true;
      boost::system::error_code ignored;
      beast::get_lowest_layer(self->stream_).cancel(ignored);
      t.expires_after(kRecancel);
      self->AwaitCancel(t, gen_of, fired, gen);
    });
  }
  void Disarm() {
    ++gen_;
    timer_.cancel();
  }

  void ReadNext() {
    if (closed_) return;
    if (served_ >= srv_.options.keep_alive_max || srv_.stopping) return CloseNow();
    if (buffer_.size() > 0) return ReadHeader();
    // Idle between requests: a quiet close when nothing comes.
    Arm(timer_, srv_.options.keep_alive_idle);
    stream_.async_read_some(
        buffer_.prepare(8192),
        [self = this->shared_from_this()](const boost::system::error_code& ec, size_t n) {
          self->Disarm();
          self->buffer_.commit(n);
          if (ec || n == 0) return self->CloseNow();
          self->ReadHeader();
        });
  }

  void ReadHeader() {
    const ConnectionLimits& lim = srv_.options.limits;
    parser_.emplace();
    parser_->header_limit(lim.max_header_bytes > 0 ? static_cast<uint32_t>(lim.max_header_bytes)
                                                   : std::numeric_limits<uint32_t>::max());
    parser_->body_limit(
        lim.max_body_wire_bytes > 0
            ? boost::optional<uint64_t>(static_cast<uint64_t>(lim.max_body_wire_bytes))
            : boost::none);
    phase_deadline_ = Deadline(lim.header_timeout);
    ReadMore(Phase::kHeader);
  }

  // On the steady clock: a step of the wall clock neither cuts a request early nor lets one run on.
  static SteadyTime Deadline(absl::Duration d) {
    return d > absl::ZeroDuration() ? SteadyNow() + ToChrono(d) : SteadyTime::max();
  }
  static SteadyTime SteadyNow() { return std::chrono::steady_clock::now(); }

  // Reads and parses until the phase is done: each read within io_timeout, all of them before
  // the phase's deadline.
  void ReadMore(Phase phase) {
    const absl::Duration left =
        phase_deadline_ == SteadyTime::max()
            ? absl::InfiniteDuration()
            : absl::FromChrono(std::chrono::duration_cast<std::chrono::nanoseconds>(
                  phase_deadline_ - SteadyNow()));
    absl::Duration wait = srv_.options.limits.io_timeout;
    stall_ = true;
    if (wait <= absl::ZeroDuration() || left < wait) {
      wait = left;
      stall_ = false;
    }
    Arm(timer_, std::max(wait, absl::Milliseconds(1)));
    bhttp::async_read_some(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this(), phase](const boost::system::error_code& ec, size_t) {
          self->Disarm();
          if (ec) return self->ReadFailed(ec, phase);
          if (phase == Phase::kHeader && self->parser_->is_header_done()) return self->OnHeader();
          if (phase == Phase::kBody && self->parser_->is_done()) return self->Dispatch();
          self->ReadMore(phase);
        });
  }

  void ReadFailed(const boost::system::error_code& ec, Phase phase) {
    if (timed_out_) {
      if (stall_) return Cut(Failure::kIoTimeout);
      return Cut(phase == Phase::kBody ? Failure::kBodyTimeout : Failure::kHeaderTimeout);
    }
    if (ec == bhttp::error::header_limit) return Cut(Failure::kHeadersTooLarge);
    if (ec == bhttp::error::body_limit) return Cut(Failure::kBodyTooLarge);
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
        ec == asio::ssl::error::stream_truncated) {
      return CloseNow();
    }
    Cut(Failure::kError);  // malformed
  }

  // Answers a request a limit cut (or a malformed one) and closes.
  void Cut(Failure f) {
    if (f != Failure::kError && srv_.options.on_cut) srv_.options.on_cut(f);
    httplib::Response res;
    srv_.options.cut_response(f, parser_ ? parser_->get().body().size() : 0, res);
    AnswerAndClose(res);
  }
  void AnswerAndClose(const httplib::Response& res) {
    linger_ = true;
    Answer(res, true);
  }
  // Answers on this strand (no worker): then reads the next request, or closes.
  void Answer(const httplib::Response& res, bool close) {
    Enqueue(Serialize(res, close), false);
    finishing_ = true;
    close_after_ = close;
    Kick();
  }

  void OnHeader() {
    ++served_;
    const Message& m = parser_->get();
    head_ = Head(m);  // for screen, the deferred routes and is_stream alike
    if (srv_.options.screen) {
      httplib::Response res;
      if (srv_.options.screen(head_, res)) return AnswerAndClose(res);
    }
    if (parser_->is_done()) return Dispatch();
    if (absl::EqualsIgnoreCase(SV(m[bhttp::field::expect]), "100-continue")) {
      Enqueue("HTTP/1.1 100 Continue\r\n\r\n", false);
    }
    phase_deadline_ = Deadline(srv_.options.limits.body_timeout);
    ReadMore(Phase::kBody);
  }

  void Dispatch() {
    Message m = parser_->release();
    parser_.reset();
    const bool close =
        !m.keep_alive() || served_ >= srv_.options.keep_alive_max || srv_.stopping.load();
    if (srv_.queued.load() >= srv_.options.max_queued) {
      srv_.refused_requests++;
      httplib::Response res;
      res.status = 503;
      res.set_header("Retry-After", "1");
      res.set_content(
          "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":"
          "\"the server is overloaded: too many requests queued\",\"reason\":"
          "\"ServiceUnavailable\",\"code\":503}",
          "application/json");
      return Answer(res, close);
    }
    std::shared_ptr<Conn> conn = this->shared_from_this();
    EventServer::Impl& srv = srv_;
    for (const EventServer::Impl::Deferred& d : srv_.deferred) {
      if (d.method != head_.method || !std::regex_match(head_.path, head_.matches, d.path)) {
        continue;
      }
      httplib::Request req = std::move(head_);
      const size_t q = req.target.find('?');
      if (q != std::string::npos) {
        httplib::detail::parse_query_text(req.target.substr(q + 1), req.params);
      }
      req.body = std::move(m.body());
      req.remote_addr = remote_ip;
      req.remote_port = remote_port;
      req.ssl = ssl();
      srv_.queued++;
      srv_.PostWork([&srv, &d, conn, close, req = std::move(req)] {
        srv.queued--;
        d.handler(req, std::make_shared<DeferredResponder>(srv, conn, close));
      });
      return;
    }
    auto run = [&srv, conn, close, raw = Replay(m)]() mutable {
      srv.queued--;
      ReplayStream stream(std::move(raw), conn);
      bool closed = false;
      srv.Process(stream, close, closed, conn->ssl());
      conn->Finish(close || closed);
    };
    srv_.queued++;
    if (srv_.options.is_stream && srv_.options.stream_executor && srv_.options.is_stream(head_)) {
      srv_.options.stream_executor(std::move(run));
    } else {
      srv_.PostWork(std::move(run));
    }
  }

  // Writes what is queued; after the last byte of a finished request, reads the next one.
  void Kick() {
    if (writing_ || closed_) return;
    {
      std::lock_guard l(mu_);
      batch_.assign(std::make_move_iterator(out_.begin()), std::make_move_iterator(out_.end()));
      out_.clear();
    }
    if (batch_.empty()) {
      if (!finishing_) return;
      finishing_ = false;
      // After a cut (unread bytes may follow) linger; after a whole request close at once.
      if (close_after_) return linger_ ? Linger() : CloseNow();
      return ReadNext();
    }
    std::vector<asio::const_buffer> bufs;
    bufs.reserve(batch_.size());
    for (const std::string& s : batch_) bufs.emplace_back(s.data(), s.size());
    writing_ = true;
    write_timed_out_ = false;
    wtimer_.expires_after(ToChrono(srv_.options.limits.io_timeout));
    // async_write is composed too: the same repeated cancel (Arm).
    AwaitCancel(wtimer_, &ConnImpl::wgen_, &ConnImpl::write_timed_out_, ++wgen_);
    asio::async_write(
        stream_, bufs,
        [self = this->shared_from_this()](const boost::system::error_code& ec, size_t n) {
          self->writing_ = false;
          ++self->wgen_;
          self->wtimer_.cancel();
          if (ec) {
            if (self->write_timed_out_ && self->srv_.options.on_cut) {
              self->srv_.options.on_cut(Failure::kIoTimeout);
            }
            return self->CloseNow();
          }
          self->batch_.clear();
          {
            std::lock_guard l(self->mu_);
            self->pending_ -= n;
          }
          self->cv_.notify_all();
          self->Kick();
        });
  }

  // Closes after the answer: stops sending, then reads (and drops) what the peer still sends
  // for a moment, so that the kernel does not reset the connection over unread bytes before the
  // peer has read the answer.
  void Linger() {
    boost::system::error_code ec;
    if constexpr (std::is_same_v<S, tcp::socket>) {
      stream_.shutdown(tcp::socket::shutdown_send, ec);
      Arm(timer_, absl::Seconds(1));
      Drain();
    } else {
      CloseNow();
    }
  }
  void Drain() {
    stream_.async_read_some(asio::buffer(drain_), [self = this->shared_from_this()](
                                                      const boost::system::error_code& ec, size_t) {
      if (ec) return self->CloseNow();
      self->Drain();
    });
  }

  void CloseNow() {
    if (closed_) return;
    closed_ = true;
    {
      std::lock_guard l(mu_);
      dead_ = true;
    }
    cv_.notify_all();
    Disarm();
    wtimer_.cancel();
    boost::system::error_code ec;
    beast::get_lowest_layer(stream_).close(ec);
  }

  EventServer::Impl& srv_;
  const uint64_t id_;
  S stream_;
  // strand
  asio::steady_timer timer_;   // reads (idle, header, body, linger)
  asio::steady_timer wtimer_;  // writes
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  httplib::Request head_;  // the request being read: method, target, path, headers
  std::vector<std::string> batch_;
  std::array<char, 4096> drain_{};
  uint64_t gen_ = 0;   // the read timer's: bumped by Arm and Disarm
  uint64_t wgen_ = 0;  // the write timer's: bumped as each write starts and ends
  size_t served_ = 0;
  SteadyTime phase_deadline_;
  bool stall_ = false;  // the armed read timer is io_timeout's, not the phase's
  bool timed_out_ = false;
  bool write_timed_out_ = false;
  bool writing_ = false;
  bool finishing_ = false;
  bool close_after_ = false;
  bool linger_ = false;  // the peer may still be sending: drain before closing
  bool closed_ = false;
  // any thread
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> out_;
  size_t pending_ = 0;
  bool dead_ = false;
};

}  // namespace

void EventServer::Impl::Refuse(tcp::socket sock) {
  refused_connections++;
  if (tls) return;  // closed by the socket's destructor: no plain-text answer on TLS
  auto s = std::make_shared<tcp::socket>(std::move(sock));
  httplib::Response res;
  res.status = 503;
  res.set_header("Retry-After", "1");
  res.set_content(
      "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":"
      "\"too many open connections\",\"reason\":\"ServiceUnavailable\",\"code\":503}",
      "application/json");
  auto busy = std::make_shared<std::string>(Serialize(res, true));
  asio::async_write(*s, asio::buffer(*busy), [s, busy](const boost::system::error_code&, size_t) {
    boost::system::error_code ec;
    s->shutdown(tcp::socket::shutdown_both, ec);
  });
}

void EventServer::Impl::Accept() {
  acceptor.async_accept(
      asio::make_strand(io), [this](const boost::system::error_code& ec, tcp::socket sock) {
        if (stopping) return;
        if (!ec) {
          if (open.load() >= options.max_connections) {
            Refuse(std::move(sock));
          } else {
            boost::system::error_code ignored;
            sock.set_option(tcp::no_delay(true), ignored);
            if (tls) {
              std::make_shared<ConnImpl<asio::ssl::stream<tcp::socket>>>(
                  *this, asio::ssl::stream<tcp::socket>(std::move(sock), *tls))
                  ->Start();
            } else {
              std::make_shared<ConnImpl<tcp::socket>>(*this, std::move(sock))->Start();
            }
          }
        }
        Accept();
      });
}

EventServer::EventServer(EventServerOptions options)
    : impl_(std::make_unique<Impl>(*this, std::move(options))) {}

EventServer::~EventServer() { Stop(); }

void EventServer::AddDeferred(const std::string& method, const std::string& path,
                              DeferredHandler handler) {
  impl_->deferred.push_back({method, std::regex(path), std::move(handler)});
}

absl::StatusOr<int> EventServer::Start(const std::string& host, int port) {
  Impl& im = *impl_;
  boost::system::error_code ec;
  tcp::resolver resolver(im.io);
  auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  if (ec || results.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", ec.message()));
  }
  tcp::endpoint ep = results.begin()->endpoint();
  im.acceptor.open(ep.protocol(), ec);
  if (!ec) im.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) im.acceptor.bind(ep, ec);
  if (!ec) im.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", host, ":", port, ": ", ec.message()));
  }
  const int bound = im.acceptor.local_endpoint().port();
  // cpp-httplib ends chunked streams when its own listening socket is invalid (not listening).
  svr_sock_ = im.acceptor.native_handle();
  im.started = true;
  im.Accept();
  for (int i = 0; i < std::max(1, im.options.io_threads); ++i) {
    im.io_threads.emplace_back([&im] { im.io.run(); });
  }
  return bound;
}

void EventServer::Stop() {
  Impl& im = *impl_;
  if (im.stopping.exchange(true)) return;
  svr_sock_ = INVALID_SOCKET;  // ends cpp-httplib's chunked streams
  if (!im.started) {
    im.pool.stop();
    im.pool.join();
    return;
  }
  asio::post(im.acceptor.get_executor(), [&im] {
    boost::system::error_code ec;
    im.acceptor.close(ec);
  });
  std::vector<std::shared_ptr<Conn>> open;
  {
    std::lock_guard l(im.conns_mu);
    for (auto& [id, w] : im.conns) {
      if (auto c = w.lock()) open.push_back(std::move(c));
    }
  }
  for (auto& c : open) c->Close();
  open.clear();
  im.pool.join();  // running handlers see dead connections and end
  im.io.stop();
  for (std::thread& t : im.io_threads) t.join();
  im.io_threads.clear();
}

bool EventServer::Process(httplib::Stream& stream, bool close, bool& closed, const SSL* ssl) {
  return process_request(stream, close, closed, [ssl](httplib::Request& req) { req.ssl = ssl; });
}

int EventServer::open_connections() const { return impl_->open.load(); }
int EventServer::parked() const { return impl_->parked.load(); }
int EventServer::queued() const { return impl_->queued.load(); }
int64_t EventServer::refused_connections() const { return impl_->refused_connections.load(); }
int64_t EventServer::refused_requests() const { return impl_->refused_requests.load(); }
int EventServer::threads() const {
  return std::max(1, impl_->options.io_threads) + std::max(1, impl_->options.worker_threads);
}

}  // namespace tessera::http
