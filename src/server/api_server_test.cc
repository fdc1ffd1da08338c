// ApiServer over real HTTP on loopback: the server runs in-process on a free
// port on a SqliteStore in a temporary directory.
#include "server/api_server.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "controller/node_leases.h"
#include "http/testing/raw_http.h"
#include "nlohmann/json.hpp"
#include "server/api_server_internal.h"
#include "server/testing/api_server_fixture.h"
#include "server/testing/http_call.h"
#include "store/sqlite_store.h"

namespace tessera::server {
namespace {

using Json = nlohmann::json;
using testing::ApiServerTest;
using ::testing::HasSubstr;
using testing::Job;
using testing::kAdmin;
using testing::kJobs;
using testing::kNode1;
using testing::kTeamA;
using testing::kTeamB;
using testing::Node;
using testing::Resp;

TEST_F(ApiServerTest, CreateGetDelete) {
  Resp r = Do("POST", kJobs, Job("llm"));
  ASSERT_EQ(r.status, 201) << r.body.dump();
  const Json& meta = r.body["metadata"];
  EXPECT_EQ(meta["namespace"], "team-a");
  EXPECT_EQ(meta["resourceVersion"], "1");
  EXPECT_EQ(meta["creationTimestamp"], "2026-01-01T00:00:00Z");
  EXPECT_EQ(meta["uid"].get<std::string>().size(), 36u);
  EXPECT_EQ(r.body["status"]["phase"], "Pending");

  Resp got = Do("GET", absl::StrCat(kJobs, "/llm"));
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(got.body, r.body);

  Resp dup = Do("POST", kJobs, Job("llm"));
  EXPECT_EQ(dup.status, 409);
  EXPECT_EQ(dup.body["reason"], "AlreadyExists");

  EXPECT_EQ(Do("GET", absl::StrCat(kJobs, "/nope")).status, 404);
  Resp del = Do("DELETE", absl::StrCat(kJobs, "/llm"));
  ASSERT_EQ(del.status, 200);
  EXPECT_EQ(del.body["metadata"]["resourceVersion"], "2");
  EXPECT_EQ(Do("GET", absl::StrCat(kJobs, "/llm")).status, 404);
  EXPECT_EQ(Do("DELETE", absl::StrCat(kJobs, "/llm")).status, 404);
}

TEST_F(ApiServerTest, UpdateUsesOptimisticConcurrency) {
  Resp c = Do("POST", kJobs, Job("j"));
  ASSERT_EQ(c.status, 201);
  Json v1 = c.body;
  v1["spec"]["groups"][0]["count"] = 4;
  v1["metadata"]["uid"] = "forged";
  Resp u = Do("PUT", absl::StrCat(kJobs, "/j"), v1);
  ASSERT_EQ(u.status, 200) << u.body.dump();
  EXPECT_EQ(u.body["metadata"]["resourceVersion"], "2");
  EXPECT_EQ(u.body["metadata"]["uid"], c.body["metadata"]["uid"]) << "uid is server-owned";
  EXPECT_EQ(u.body["spec"]["groups"][0]["count"], 4);

  // v1 still carries resourceVersion 1: stale.
  Resp stale = Do("PUT", absl::StrCat(kJobs, "/j"), v1);
  EXPECT_EQ(stale.status, 409);
  EXPECT_EQ(stale.body["reason"], "Conflict");
  EXPECT_EQ(store_->CurrentRevision(), 2);

  // No resourceVersion: last writer wins; status is kept when omitted.
  Json v2 = Job("j", 6);
  Resp w = Do("PUT", absl::StrCat(kJobs, "/j"), v2);
  ASSERT_EQ(w.status, 200);
  EXPECT_EQ(w.body["status"]["phase"], "Pending");
  v2["metadata"]["resourceVersion"] = "";  // empty: also unconditional
  EXPECT_EQ(Do("PUT", absl::StrCat(kJobs, "/j"), v2).status, 200);
  v2["metadata"]["resourceVersion"] = "abc";
  EXPECT_EQ(Do("PUT", absl::StrCat(kJobs, "/j"), v2).status, 422);
  EXPECT_EQ(Do("PUT", absl::StrCat(kJobs, "/other"), Job("other")).status, 404);
  EXPECT_EQ(Do("PUT", absl::StrCat(kJobs, "/j"), Job("k")).status, 422) << "name mismatch";
  // Delete with a stale precondition.
  EXPECT_EQ(Do("DELETE", absl::StrCat(kJobs, "/j?resourceVersion=1")).status, 409);
  EXPECT_EQ(Do("DELETE", absl::StrCat(kJobs, "/j?resourceVersion=4")).status, 200);
}

TEST_F(ApiServerTest, ValidationErrorsNameFieldsAndChangeNothing) {
  Json bad = Job("j");
  bad["spec"]["groups"][0]["count"] = 0;
  bad["spec"]["colour"] = "blue";
  bad["spec"]["groups"][0]["gpusPerReplica"] = "eight";
  Resp r = Do("POST", kJobs, bad);
  ASSERT_EQ(r.status, 422);
  EXPECT_EQ(r.body["reason"], "Invalid");
  std::set<std::string> fields;
  for (const Json& c : r.body["details"]["causes"]) {
    fields.insert(c["field"].get<std::string>() + ": " + c["message"].get<std::string>());
  }
  EXPECT_EQ(fields, (std::set<std::string>{"spec.groups[0].count: must be > 0",
                                           "spec.groups[0].gpusPerReplica: must be an integer",
                                           "spec.colour: unknown field"}));
  EXPECT_THAT(r.body["message"].get<std::string>(), HasSubstr("spec.groups[0].count"));

  Json other_ns = Job("j");
  other_ns["metadata"]["namespace"] = "team-b";
  EXPECT_EQ(Do("POST", kJobs, other_ns).status, 422);
  EXPECT_EQ(store_->CurrentRevision(), 0);
}

TEST_F(ApiServerTest, HostileBodiesAreRejected) {
  std::string big = Job("j").dump();
  big.insert(big.size() - 1, absl::StrCat(",\"pad\":\"", std::string(1100000, 'x'), "\""));
  EXPECT_EQ(DoRaw("POST", kJobs, big).status, 413);
  std::string deep = absl::StrCat("{\"a\":", std::string(100, '['), std::string(100, ']'), "}");
  Resp d = DoRaw("POST", kJobs, deep);
  EXPECT_EQ(d.status, 400);
  EXPECT_THAT(d.body["message"].get<std::string>(), HasSubstr("nests deeper"));
  std::string utf = Job("j").dump();
  utf.replace(utf.find("research"), 8, "res\xc3\x28rch");
  Resp u = DoRaw("POST", kJobs, utf);
  EXPECT_EQ(u.status, 400);
  EXPECT_THAT(u.body["message"].get<std::string>(), HasSubstr("UTF-8"));
  EXPECT_EQ(DoRaw("POST", kJobs, "{\"apiVersion\":").status, 400);
  EXPECT_EQ(DoRaw("POST", kJobs, "[]").status, 400);
  EXPECT_EQ(Do("GET", "/api/v1/namespaces/Bad_NS/trainingjobs").status, 400);
  EXPECT_EQ(Do("GET", "/api/v1/widgets").status, 404);
  EXPECT_EQ(Do("GET", "/api/v1/namespaces/team-a/queues").status, 404);
  EXPECT_EQ(Do("POST", "/api/v1/trainingjobs", Job("x")).status, 405);
  EXPECT_EQ(store_->CurrentRevision(), 0);
}

// The body limit holds for chunked bodies too, and is applied as the bytes arrive: the server
// answers without waiting for the body's end, reads no body at all without a valid token, and
// stores nothing. (Before, a chunked body was buffered whole, however large, before the 401.)
TEST_F(ApiServerTest, ChunkedBodiesAreBoundedAsTheyArriveAndOnlyAfterAuthentication) {
  const size_t limit = ApiServerOptions().max_body_bytes;
  // No token: 401 on the headers alone, then the connection is closed (the unread body is never
  // parsed as requests). The body never ends, so an answer proves it was not awaited.
  http::testing::RawReply anon = http::testing::SendUnendingChunkedBody(
      port_, http::testing::ChunkedPostHead(kJobs, ""), 64 << 10);
  EXPECT_THAT(anon.text, HasSubstr("HTTP/1.1 401"));
  EXPECT_THAT(anon.text, HasSubstr("bearer token is required"));
  EXPECT_TRUE(anon.closed);
  // A token, and a body 1 MiB over the limit that never ends: 413 naming the limit.
  http::testing::RawReply big = http::testing::SendUnendingChunkedBody(
      port_, http::testing::ChunkedPostHead(kJobs, kAdmin), limit + (1 << 20));
  EXPECT_THAT(big.text, HasSubstr("HTTP/1.1 413"));
  EXPECT_THAT(big.text, HasSubstr(absl::StrCat("over the limit of ", limit, " bytes")));
  EXPECT_THAT(big.text, HasSubstr("Connection: close"));
  EXPECT_TRUE(big.closed);
  // A declared length far over the limit is refused before a byte of it is sent.
  http::testing::RawReply declared = http::testing::SendUnendingChunkedBody(
      port_,
      absl::StrCat("POST ", kJobs, " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ", kAdmin,
                   "\r\nContent-Length: ", 100 << 20, "\r\n\r\n"),
      0);
  EXPECT_TRUE(declared.closed);
  EXPECT_THAT(declared.text, HasSubstr("HTTP/1.1 413"));
  EXPECT_EQ(store_->CurrentRevision(), 0) << "nothing stored";
  // A chunked body within the limit is read whole and served.
  httplib::Client cli("127.0.0.1", port_);
  const std::string job = Job("chunked").dump();
  auto ok = cli.Post(
      kJobs, {{"Authorization", absl::StrCat("Bearer ", kAdmin)}},
      [&](size_t offset, httplib::DataSink& sink) {
        sink.write(job.data() + offset, std::min<size_t>(7, job.size() - offset));
        if (offset + 7 >= job.size()) sink.done();
        return true;
      },
      "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 201) << ok->body;
}

// Methods that take no body here may not announce one, and unknown ones are refused, before any
// body is read (httplib would read a PRI body whole, or parse a GET's body as requests).
TEST_F(ApiServerTest, BodiesWhereNoneBelongAreRefusedUnread) {
  for (const char* m : {"GET", "PRI"}) {
    http::testing::RawReply r = http::testing::SendUnendingChunkedBody(
        port_,
        absl::StrCat(m, " ", kJobs, " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"),
        64 << 10);
    EXPECT_THAT(r.text, HasSubstr(std::string(m) == "GET" ? "HTTP/1.1 400" : "HTTP/1.1 405")) << m;
    EXPECT_TRUE(r.closed) << m;
  }
  // httplib would give a multipart body to its own parser, past the counting reader.
  http::testing::RawReply multipart = http::testing::SendUnendingChunkedBody(
      port_,
      absl::StrCat("POST ", kJobs, " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ", kAdmin,
                   "\r\nContent-Type: multipart/form-data; boundary=b\r\n",
                   "Transfer-Encoding: chunked\r\n\r\n"),
      64 << 10);
  EXPECT_THAT(multipart.text, HasSubstr("HTTP/1.1 415"));
}

// A client that sends part of a body and stalls gets a 400 naming the
// problem after the read timeout, changes nothing, and blocks nobody else.
TEST_F(ApiServerTest, SlowSenderGets400AndChangesNothing) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port_);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string body = Job("slow").dump();
  const std::string head =
      absl::StrCat("POST ", kJobs, " HTTP/1.1\r\nHost: x\r\n", "Authorization: Bearer ", kAdmin,
                   "\r\n", "Content-Type: application/json\r\nContent-Length: ", body.size(),
                   "\r\n\r\n", body.substr(0, 10));
  ASSERT_EQ(send(fd, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  // Others are served meanwhile.
  EXPECT_EQ(Do("GET", kJobs).status, 200);
  std::string reply;
  char buf[4096];
  while (reply.find("}\n") == std::string::npos) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    reply.append(buf, n);
  }
  close(fd);
  EXPECT_THAT(reply, HasSubstr("HTTP/1.1 400"));
  EXPECT_THAT(reply, HasSubstr("did not arrive within the read timeout"));
  EXPECT_EQ(store_->CurrentRevision(), 0);
  EXPECT_EQ(Do("GET", absl::StrCat(kJobs, "/slow")).status, 404);
}

TEST_F(ApiServerTest, ListWithSelectorsAndPagination) {
  for (int i = 0; i < 25; ++i) {
    Json labels = {{"team", i % 2 ? "nlp" : "cv"}, {"idx", std::to_string(i)}};
    ASSERT_EQ(Do("POST", kJobs, Job(absl::StrCat("job-", 100 + i), 1, labels)).status, 201);
  }
  ASSERT_EQ(Do("POST", "/api/v1/namespaces/team-b/trainingjobs", Job("b-job")).status, 201);

  Resp all = Do("GET", kJobs);
  ASSERT_EQ(all.status, 200);
  EXPECT_EQ(all.body["kind"], "TrainingJobList");
  EXPECT_EQ(all.body["items"].size(), 25u);
  EXPECT_EQ(all.body["metadata"]["resourceVersion"], "26");
  EXPECT_FALSE(all.body["metadata"].contains("continue"));

  std::vector<std::string> names;
  std::string cont;
  int pages = 0;
  do {
    std::string path = absl::StrCat(kJobs, "?limit=10&labelSelector=team%3Dnlp");
    if (!cont.empty()) path += "&continue=" + cont;
    Resp page = Do("GET", path);
    ASSERT_EQ(page.status, 200) << page.body.dump();
    for (const Json& item : page.body["items"]) {
      EXPECT_EQ(item["metadata"]["labels"]["team"], "nlp");
      names.push_back(item["metadata"]["name"]);
    }
    cont = page.body["metadata"].value("continue", "");
    ++pages;
  } while (!cont.empty());
  EXPECT_EQ(names.size(), 12u);
  EXPECT_EQ(pages, 2);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), 12u);

  Resp f = Do("GET", absl::StrCat(kJobs, "?fieldSelector=metadata.name%3Djob-103"));
  ASSERT_EQ(f.body["items"].size(), 1u);
  Resp notin = Do("GET", absl::StrCat(kJobs, "?labelSelector=team%3Dcv,idx%20notin%20(0,2)"));
  EXPECT_EQ(notin.body["items"].size(), 11u);
  EXPECT_EQ(Do("GET", absl::StrCat(kJobs, "?labelSelector=a%20in%20b")).status, 400);
  EXPECT_EQ(Do("GET", absl::StrCat(kJobs, "?continue=!!!")).status, 400);
  EXPECT_EQ(Do("GET", absl::StrCat(kJobs, "?limit=-1")).status, 400);
  EXPECT_EQ(Do("GET", "/api/v1/trainingjobs").body["items"].size(), 26u);
}

// kubectl's server-side printing: a list asked for as a Table answers rows of cells, paged as
// objects are, and an object that changed is printed anew (rows are kept per revision).
TEST_F(ApiServerTest, ListsAsTablesForKubectl) {
  for (int i = 0; i < 12; ++i) {
    Json labels = {{"team", i % 2 ? "nlp" : "cv"}};
    ASSERT_EQ(Do("POST", kJobs, Job(absl::StrCat("job-", 100 + i), 1, labels)).status, 201);
  }
  auto table = [&](const std::string& path) {
    httplib::Client cli("127.0.0.1", port_);
    auto r = cli.Get(path, {{"Authorization", absl::StrCat("Bearer ", kAdmin)},
                            {"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"}});
    EXPECT_TRUE(r) << path;
    Resp out;
    if (r) {
      out.status = r->status;
      out.text = r->body;
      out.body = Json::parse(r->body, nullptr, false);
    }
    return out;
  };
  Resp t = table(kJobs);
  ASSERT_EQ(t.status, 200) << t.body;
  EXPECT_EQ(t.body["kind"], "Table");
  EXPECT_EQ(t.body["apiVersion"], "meta.k8s.io/v1");
  EXPECT_EQ(t.body["columnDefinitions"][0]["name"], "NAME");
  ASSERT_EQ(t.body["rows"].size(), 12u);
  EXPECT_EQ(t.body["rows"][0]["cells"][0], "job-100");
  EXPECT_EQ(t.body["rows"][0]["cells"][1], "Pending");
  EXPECT_EQ(t.body["rows"][0]["cells"][8], "research");  // QUEUE, a -o wide column
  EXPECT_EQ(t.body["rows"][0]["object"]["metadata"]["namespace"], "team-a");
  EXPECT_EQ(t.body["metadata"]["resourceVersion"], "12");

  // Pages and selectors as for objects; includeObject=None leaves the metadata out.
  std::vector<std::string> names;
  std::string cont;
  do {
    std::string path = absl::StrCat(kJobs, "?limit=4&includeObject=None&labelSelector=team%3Dnlp");
    if (!cont.empty()) path += "&continue=" + cont;
    Resp page = table(path);
    ASSERT_EQ(page.status, 200) << page.body;
    for (const Json& row : page.body["rows"]) {
      EXPECT_FALSE(row.contains("object"));
      names.push_back(row["cells"][0]);
    }
    cont = page.body["metadata"].value("continue", "");
  } while (!cont.empty());
  EXPECT_EQ(names, (std::vector<std::string>{"job-101", "job-103", "job-105", "job-107", "job-109",
                                             "job-111"}));

  // A changed object gets a new row.
  Resp got = Do("GET", absl::StrCat(kJobs, "/job-100"));
  got.body["spec"]["queue"] = "training";
  ASSERT_EQ(Do("PUT", absl::StrCat(kJobs, "/job-100"), got.body).status, 200);
  t = table(kJobs);
  EXPECT_EQ(t.body["rows"][0]["cells"][8], "training");
  EXPECT_EQ(t.body["rows"][1]["cells"][8], "research");

  Resp bad = table(absl::StrCat(kJobs, "?includeObject=Everything"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body.dump(), ::testing::HasSubstr("includeObject"));
  // Without the Accept header, objects as before.
  EXPECT_EQ(Do("GET", kJobs).body["kind"], "TrainingJobList");
}

TEST_F(ApiServerTest, ClusterScopedKinds) {
  Json q = {{"apiVersion", "tessera.dev/v1"},
            {"kind", "Queue"},
            {"metadata", {{"name", "research"}}},
            {"spec", {{"weight", 2.5}, {"gpuQuota", {{"H100", 64}}}}}};
  Resp r = Do("POST", "/api/v1/queues", q);
  ASSERT_EQ(r.status, 201) << r.body.dump();
  EXPECT_FALSE(r.body["metadata"].contains("namespace"));
  EXPECT_EQ(r.body["status"]["phase"], "Active");
  EXPECT_EQ(Do("GET", "/api/v1/queues/research").status, 200);
  q["spec"]["gpuQuota"]["H100"] = -1;
  Resp bad = Do("POST", "/api/v1/queues", q);
  EXPECT_EQ(bad.status, 422);
  EXPECT_EQ(bad.body["details"]["causes"][0]["field"], "spec.gpuQuota[\"H100\"]");
  Json pc = {{"apiVersion", "tessera.dev/v1"},
             {"kind", "PriorityClass"},
             {"metadata", {{"name", "high"}}},
             {"spec", {{"value", 1000}, {"preemptionPolicy", "Never"}}}};
  EXPECT_EQ(Do("POST", "/api/v1/priorityclasses", pc).status, 201);
  EXPECT_EQ(Do("GET", "/api/v1/priorityclasses").body["items"].size(), 1u);
}

TEST_F(ApiServerTest, AuthenticationAndAuthorization) {
  EXPECT_EQ(Do("GET", kJobs, nullptr, "").status, 401);
  EXPECT_EQ(Do("GET", kJobs, nullptr, "wrong-token").status, 401);
  EXPECT_EQ(Do("POST", kJobs, Job("mine"), kTeamA).status, 201);
  EXPECT_EQ(Do("GET", absl::StrCat(kJobs, "/mine"), nullptr, kTeamA).status, 200);
  Resp cross = Do("GET", absl::StrCat(kJobs, "/mine"), nullptr, kTeamB);
  EXPECT_EQ(cross.status, 403);
  EXPECT_EQ(cross.body["reason"], "Forbidden");
  EXPECT_EQ(Do("POST", kJobs, Job("theirs"), kTeamB).status, 403);
  EXPECT_EQ(Do("DELETE", absl::StrCat(kJobs, "/mine"), nullptr, kTeamB).status, 403);
  EXPECT_EQ(Do("GET", "/api/v1/trainingjobs", nullptr, kTeamA).status, 403);
  EXPECT_EQ(Do("GET", "/api/v1/queues", nullptr, kTeamA).status, 200);
  EXPECT_EQ(Do("POST", "/api/v1/nodes", Node("gpu-02"), kTeamA).status, 403);

  // A node token touches only its own Node.
  EXPECT_EQ(Do("POST", "/api/v1/nodes", Node("gpu-02"), kNode1).status, 403);
  Resp n = Do("POST", "/api/v1/nodes", Node("gpu-01"), kNode1);
  ASSERT_EQ(n.status, 201) << n.body.dump();
  EXPECT_EQ(n.body["status"]["phase"], "Unknown");
  EXPECT_EQ(Do("PUT", "/api/v1/nodes/gpu-01", n.body, kNode1).status, 200);
  EXPECT_EQ(Do("POST", "/api/v1/nodes", Node("gpu-02")).status, 201);
  EXPECT_EQ(Do("GET", "/api/v1/nodes/gpu-02", nullptr, kNode1).status, 403);
  EXPECT_EQ(Do("GET", "/api/v1/nodes", nullptr, kNode1).status, 403);
  EXPECT_EQ(Do("DELETE", "/api/v1/nodes/gpu-01", nullptr, kNode1).status, 403);
  EXPECT_EQ(Do("GET", kJobs, nullptr, kNode1).status, 403);
  EXPECT_EQ(Do("POST", kJobs, Job("mine"), kNode1).status, 403);
}

// Status is the control plane's (docs/api.md, "Status"): what each role may write through
// create, update and the status subresource.
TEST_F(ApiServerTest, WatchStreamsChangesAndResumes) {
  ASSERT_EQ(Do("POST", kJobs, Job("a")).status, 201);  // rv 1
  ASSERT_EQ(Do("POST", kJobs, Job("b")).status, 201);  // rv 2

  // Without a resourceVersion: the current objects as ADDED, then changes.
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(100));
    Json a = Do("GET", absl::StrCat(kJobs, "/a")).body;
    a["spec"]["groups"][0]["count"] = 3;
    EXPECT_EQ(Do("PUT", absl::StrCat(kJobs, "/a"), a).status, 200);                         // rv 3
    EXPECT_EQ(Do("DELETE", absl::StrCat(kJobs, "/b")).status, 200);                         // rv 4
    EXPECT_EQ(Do("POST", "/api/v1/namespaces/team-b/trainingjobs", Job("x")).status, 201);  // 5
    EXPECT_EQ(Do("POST", kJobs, Job("c")).status, 201);                                     // rv 6
  });
  std::vector<Json> evs = Watch(absl::StrCat(kJobs, "?watch=true&timeoutSeconds=10"), 5);
  writer.join();
  ASSERT_EQ(evs.size(), 5u);
  std::vector<std::string> got;
  for (const Json& e : evs) {
    got.push_back(absl::StrCat(e["type"].get<std::string>(), " ",
                               e["object"]["metadata"]["name"].get<std::string>(), " ",
                               e["object"]["metadata"]["resourceVersion"].get<std::string>()));
  }
  EXPECT_EQ(got, (std::vector<std::string>{"ADDED a 1", "ADDED b 2", "MODIFIED a 3", "DELETED b 4",
                                           "ADDED c 6"}));

  // Resume from a resourceVersion: exactly the later events.
  evs = Watch(absl::StrCat(kJobs, "?watch=true&resourceVersion=3&timeoutSeconds=1"), 100);
  ASSERT_EQ(evs.size(), 2u);
  EXPECT_EQ(evs[0]["type"], "DELETED");
  EXPECT_EQ(evs[1]["object"]["metadata"]["name"], "c");

  // Label-selected, all namespaces.
  evs = Watch("/api/v1/trainingjobs?watch=true&resourceVersion=4&timeoutSeconds=1", 100);
  ASSERT_EQ(evs.size(), 2u);
  EXPECT_EQ(evs[0]["object"]["metadata"]["namespace"], "team-b");

  // Bookmarks carry the revision forward when nothing matches.
  evs = Watch(absl::StrCat(
                  kJobs, "?watch=true&resourceVersion=6&allowWatchBookmarks=true&timeoutSeconds=5"),
              1);
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0]["type"], "BOOKMARK");
  EXPECT_EQ(evs[0]["object"]["metadata"]["resourceVersion"], "6");

  // A compacted resourceVersion is 410 Gone.
  ASSERT_TRUE(store_->Compact(4).ok());
  int status = 0;
  Watch(absl::StrCat(kJobs, "?watch=true&resourceVersion=2"), 1, kAdmin, &status);
  EXPECT_EQ(status, 410);
  Resp gone = Do("GET", absl::StrCat(kJobs, "?watch=true&resourceVersion=2"));
  EXPECT_EQ(gone.body["reason"], "Expired");
  // Watching is authorized like listing.
  Watch(absl::StrCat(kJobs, "?watch=true&resourceVersion=5"), 1, kTeamB, &status);
  EXPECT_EQ(status, 403);
}

// An open watch stream, held until its timeoutSeconds ends it.
class OpenWatch {
 public:
  OpenWatch(int port, const std::string& path, const std::string& token) {
    std::future<int> status = status_.get_future();
    thread_ = std::thread([this, port, path, token] {
      httplib::Client cli("127.0.0.1", port);
      cli.set_read_timeout(10, 0);
      bool told = false;
      auto r = cli.Get(
          path, {{"Authorization", absl::StrCat("Bearer ", token)}},
          [&](const httplib::Response& head) {
            status_.set_value(head.status);
            told = true;
            return true;
          },
          [](const char*, size_t) { return true; });
      if (!told) status_.set_value(r ? r->status : 0);
    });
    code_ = status.get();  // the stream's headers arrived: its slot is held (or refused)
  }
  ~OpenWatch() { thread_.join(); }
  int status() const { return code_; }

 private:
  std::promise<int> status_;
  std::thread thread_;
  int code_ = 0;
};

TEST_F(ApiServerTest, OpenWatchesAreCapped) {
  const std::string path = absl::StrCat(kJobs, "?watch=true&timeoutSeconds=2");
  {
    // Four slots in all, two per token: both tokens take their share.
    std::vector<std::unique_ptr<OpenWatch>> open;
    for (const char* token : {kAdmin, kAdmin, kTeamA, kTeamA}) {
      open.push_back(std::make_unique<OpenWatch>(port_, path, token));
      EXPECT_EQ(open.back()->status(), 200);
    }
    Resp full = Do("GET", "/api/v1/namespaces/team-b/trainingjobs?watch=true", nullptr, kTeamB);
    EXPECT_EQ(full.status, 429);
    EXPECT_THAT(full.body["message"].get<std::string>(), HasSubstr("4 in all"));
    EXPECT_EQ(Do("GET", kJobs).status, 200) << "other requests are still served";
  }
  OpenWatch again(port_, path, kAdmin);
  EXPECT_EQ(again.status(), 200) << "slots are freed when streams end";
}

// One token cannot take every watch slot: past its share it gets 429 naming the share, and
// another token still gets a slot.
TEST_F(ApiServerTest, WatchSlotsAreSharedFairlyBetweenTokens) {
  const std::string path = absl::StrCat(kJobs, "?watch=true&timeoutSeconds=2");
  OpenWatch a1(port_, path, kAdmin), a2(port_, path, kAdmin);
  ASSERT_EQ(a1.status(), 200);
  ASSERT_EQ(a2.status(), 200);
  Resp third = Do("GET", path, nullptr, kAdmin);
  EXPECT_EQ(third.status, 429);
  EXPECT_THAT(third.body["message"].get<std::string>(), HasSubstr("at most 2 per token"));
  OpenWatch other(port_, path, kTeamA);
  EXPECT_EQ(other.status(), 200) << "another tenant still gets a slot";
}

TEST_F(ApiServerTest, MetricsAreForAdmins) {
  ASSERT_EQ(Do("POST", kJobs, Job("m")).status, 201);
  EXPECT_EQ(Do("GET", "/metrics", nullptr, kTeamA).status, 403);
  httplib::Client cli("127.0.0.1", port_);
  auto r = cli.Get("/metrics", {{"Authorization", absl::StrCat("Bearer ", kAdmin)}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(r->body, HasSubstr("tessera_api_responses_total{code=\"2xx\"} "));
  EXPECT_THAT(r->body, HasSubstr("tessera_api_open_watches 0"));
}

TEST_F(ApiServerTest, BatchCreateIsAllOrNothing) {
  Json a = Job("a"), b = Job("b"), bad = Job("c", 0);
  a["metadata"]["namespace"] = b["metadata"]["namespace"] = bad["metadata"]["namespace"] = "team-a";
  Resp r = Do("POST", "/api/v1/batch", {{"items", {a, b, bad}}});
  ASSERT_EQ(r.status, 422);
  EXPECT_EQ(r.body["details"]["causes"][0]["field"], "items[2].spec.groups[0].count");
  EXPECT_EQ(store_->CurrentRevision(), 0);
  r = Do("POST", "/api/v1/batch", {{"items", {a, b}}});
  ASSERT_EQ(r.status, 201) << r.body.dump();
  EXPECT_EQ(r.body["items"][1]["metadata"]["resourceVersion"], "1");
  EXPECT_EQ(Do("GET", kJobs).body["items"].size(), 2u);
  Json c = Job("c");
  c["metadata"]["namespace"] = "team-a";
  r = Do("POST", "/api/v1/batch", {{"items", {c, a}}});
  EXPECT_EQ(r.status, 409) << "a exists: c must not be created either";
  EXPECT_EQ(Do("GET", absl::StrCat(kJobs, "/c")).status, 404);
  EXPECT_EQ(Do("POST", "/api/v1/batch", {{"items", {c}}}, kTeamB).status, 403);
}

// A ModelVersion still served by a live InferenceService is not deleted: 409 with the message
// both modes give (api::ServedDeletionMessage), nothing changed, a dry run refused alike.
TEST_F(ApiServerTest, DeletingAServedModelVersionIsRefused) {
  const std::string mvs = "/api/v1/namespaces/team-a/modelversions";
  const std::string isvcs = "/api/v1/namespaces/team-a/inferenceservices";
  Json mv = {{"apiVersion", "tessera.dev/v1"},
             {"kind", "ModelVersion"},
             {"metadata", {{"name", "llama-v3"}}},
             {"spec", {{"model", "llama"}, {"version", "3"}}}};
  ASSERT_EQ(Do("POST", mvs, mv).status, 201);
  for (const char* name : {"search", "chat"}) {
    Json is = {{"apiVersion", "tessera.dev/v1"},
               {"kind", "InferenceService"},
               {"metadata", {{"name", name}}},
               {"spec",
                {{"modelVersion", "llama-v3"},
                 {"replicas", {{"min", 1}, {"max", 1}}},
                 {"gpusPerReplica", 1}}}};
    ASSERT_EQ(Do("POST", isvcs, is).status, 201);
  }
  const int64_t rev = store_->CurrentRevision();
  for (const std::string q : {"", "?dryRun=All"}) {
    Resp r = Do("DELETE", mvs + "/llama-v3" + q);
    EXPECT_EQ(r.status, 409) << q;
    EXPECT_EQ(r.body["message"],
              "modelversion \"llama-v3\" is served by inferenceservices chat, search: delete or "
              "repoint them first");
  }
  EXPECT_EQ(store_->CurrentRevision(), rev);
  ASSERT_EQ(Do("DELETE", isvcs + "/chat").status, 200);
  ASSERT_EQ(Do("DELETE", isvcs + "/search").status, 200);
  EXPECT_EQ(Do("DELETE", mvs + "/llama-v3").status, 200);
}

// Nodes registered together refresh their stored status spread over half an interval, not in
// one burst: each node's interval is stretched by its own share, between none and a half.
TEST(NodeStatusInterval, SpreadsNodesOverHalfAnInterval) {
  std::set<int64_t> seconds;
  for (int i = 0; i < 1000; ++i) {
    const absl::Duration d =
        internal::NodeStatusInterval(absl::StrCat("node-", i), absl::Seconds(60));
    ASSERT_GE(d, absl::Seconds(60));
    ASSERT_LT(d, absl::Seconds(90));
    EXPECT_EQ(d, internal::NodeStatusInterval(absl::StrCat("node-", i), absl::Seconds(60)));
    seconds.insert(absl::ToInt64Seconds(d));
  }
  EXPECT_GE(seconds.size(), 28u);  // nearly every second of the 30 is someone's
}

// Node heartbeats renew the in-memory lease on every call and write the Node
// only when something other than the utilization sample changed or the stored
// heartbeat is older than node_status_interval.
TEST_F(ApiServerTest, NodeHeartbeatsRenewTheLeaseAndWriteOnlyOnChange) {
  const std::string hb = "/api/v1/nodes/gpu-01/heartbeat";
  auto gpus = [](const char* health1, int util) {
    Json g = Json::array();
    for (int i = 0; i < 8; ++i) {
      g.push_back({{"index", i}, {"health", i == 1 ? health1 : "Healthy"}, {"utilization", util}});
    }
    return Json{{"gpus", g}};
  };
  EXPECT_EQ(Do("POST", hb, gpus("Healthy", 5), kNode1).status, 404);  // not registered
  ASSERT_EQ(Do("POST", "/api/v1/nodes", Node("gpu-01"), kNode1).status, 201);
  // The first heartbeat is written: the Node has none yet.
  Resp r = Do("POST", hb, gpus("Healthy", 5), kNode1);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["written"], true);
  Json node = Do("GET", "/api/v1/nodes/gpu-01").body;
  EXPECT_EQ(node["status"]["lastHeartbeatTime"], "2026-01-01T00:00:00Z");
  EXPECT_EQ(node["status"]["gpus"][3]["utilization"], 5);
  const int64_t rev = store_->CurrentRevision();
  // Ten more, 5 s apart, with new samples only: the lease moves, the store does not.
  for (int i = 0; i < 10; ++i) {
    clock_.Advance(absl::Seconds(5));
    r = Do("POST", hb, gpus("Healthy", 50 + i), kNode1);
    ASSERT_EQ(r.status, 200) << r.body.dump();
    EXPECT_EQ(r.body["written"], false);
  }
  EXPECT_EQ(store_->CurrentRevision(), rev);
  EXPECT_EQ(leases_.LastRenew("gpu-01"), clock_.Now());
  // A health change is written at once.
  clock_.Advance(absl::Seconds(5));
  r = Do("POST", hb, gpus("Unhealthy", 60), kNode1);
  EXPECT_EQ(r.body["written"], true);
  node = Do("GET", "/api/v1/nodes/gpu-01").body;
  EXPECT_EQ(node["status"]["gpus"][1]["health"], "Unhealthy");
  EXPECT_EQ(node["status"]["gpus"][1]["utilization"], 60);
  // And a stale stored heartbeat is refreshed: after node_status_interval (60 s) plus this
  // node's share of up to half of it, so never before 60 s and always by 90 s.
  clock_.Advance(absl::Seconds(59));
  EXPECT_EQ(Do("POST", hb, gpus("Unhealthy", 61), kNode1).body["written"], false);
  clock_.Advance(absl::Seconds(31));
  EXPECT_EQ(Do("POST", hb, gpus("Unhealthy", 62), kNode1).body["written"], true);
  // Bad bodies name the field and change nothing; other nodes and users may not.
  const int64_t before = store_->CurrentRevision();
  const absl::Time renewed = *leases_.LastRenew("gpu-01");
  clock_.Advance(absl::Seconds(1));
  Json bad = gpus("Sick", 1);
  r = Do("POST", hb, bad, kNode1);
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.body["details"]["causes"][0]["field"], "gpus[1].health");
  bad = gpus("Healthy", 1);
  bad["gpus"][7]["index"] = 8;
  r = Do("POST", hb, bad, kNode1);
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.body["message"], "heartbeat is invalid: gpus[7].index: the node has 8 GPUs");
  bad["gpus"][7]["index"] = 0;
  EXPECT_EQ(Do("POST", hb, bad, kNode1).body["details"]["causes"][0]["field"], "gpus[7].index");
  EXPECT_EQ(Do("POST", hb, Json{{"gpus", Json::array()}, {"extra", 1}}, kNode1).status, 422);
  EXPECT_EQ(Do("POST", hb, Json::object(), kNode1).status, 422);
  EXPECT_EQ(store_->CurrentRevision(), before);
  EXPECT_EQ(leases_.LastRenew("gpu-01"), renewed);
  ASSERT_EQ(Do("POST", "/api/v1/nodes", Node("gpu-02")).status, 201);
  EXPECT_EQ(Do("POST", "/api/v1/nodes/gpu-02/heartbeat", gpus("Healthy", 1), kNode1).status, 403);
  EXPECT_EQ(Do("POST", hb, gpus("Healthy", 1), kTeamA).status, 403);
  // GET reads the lease, for whoever may read the Node.
  Resp lease = Do("GET", hb, nullptr, kNode1);
  EXPECT_EQ(lease.status, 200);
  EXPECT_EQ(lease.body["renewTime"], "2026-01-01T00:02:25Z");  // the bad ones renewed nothing
  EXPECT_EQ(Do("GET", "/api/v1/nodes/gpu-02/heartbeat", nullptr, kNode1).status, 403);
  EXPECT_TRUE(Do("GET", "/api/v1/nodes/gpu-02/heartbeat").body["renewTime"].is_null());
  EXPECT_EQ(Do("PUT", hb, gpus("Healthy", 1), kNode1).status, 405);
  EXPECT_EQ(Do("POST", "/api/v1/nodes/gpu-02/heartbeat", gpus("Healthy", 1)).status, 200);
}

}  // namespace
}  // namespace tessera::server
