// Test helper: an OTLP/HTTP collector stand-in on loopback that keeps every
// POST /v1/traces request (body and Content-Type). Thread-safe; header-only,
// for tests (links cpp-httplib).
#pragma once

#include <httplib.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace tessera::obs::testing {

class OtlpReceiver {
 public:
  OtlpReceiver() {
    server_.Post("/v1/traces", [this](const httplib::Request& req, httplib::Response& res) {
      absl::MutexLock l(&mu_);
      bodies_.push_back(req.body);
      content_types_.push_back(req.get_header_value("Content-Type"));
      res.set_content("{}", "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~OtlpReceiver() {
    server_.stop();
    thread_.join();
  }
  OtlpReceiver(const OtlpReceiver&) = delete;
  OtlpReceiver& operator=(const OtlpReceiver&) = delete;

  int port() const { return port_; }
  std::vector<std::string> bodies() {
    absl::MutexLock l(&mu_);
    return bodies_;
  }
  std::vector<std::string> content_types() {
    absl::MutexLock l(&mu_);
    return content_types_;
  }

 private:
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  absl::Mutex mu_;
  std::vector<std::string> bodies_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> content_types_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::obs::testing
