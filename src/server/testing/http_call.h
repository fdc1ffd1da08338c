// Test helper: one HTTP request to a server on 127.0.0.1, for the API tests.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tessera::server::testing {

struct HttpResp {
  int status = 0;  // 0: no answer (a test failure is recorded)
  std::string text;
  nlohmann::json body;  // `text` parsed; discarded when it is not JSON
  std::string location;
};

// METHOD `path` (GET, POST, PUT, DELETE) with `body` (sent as JSON when not
// empty) and a bearer `token` (none when empty).
inline HttpResp HttpCall(int port, const std::string& method, const std::string& path,
                         const std::string& body, const std::string& token,
                         int read_timeout_s = 30) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(read_timeout_s, 0);
  httplib::Headers headers;
  if (!token.empty()) headers.emplace("Authorization", absl::StrCat("Bearer ", token));
  httplib::Result r = method == "GET"    ? cli.Get(path, headers)
                      : method == "POST" ? cli.Post(path, headers, body, "application/json")
                      : method == "PUT"  ? cli.Put(path, headers, body, "application/json")
                                         : cli.Delete(path, headers);
  HttpResp out;
  if (!r) {
    ADD_FAILURE() << method << " " << path << ": " << httplib::to_string(r.error());
    return out;
  }
  out.status = r->status;
  out.text = r->body;
  out.body = nlohmann::json::parse(r->body, nullptr, false);
  out.location = r->get_header_value("Location");
  return out;
}

}  // namespace tessera::server::testing
