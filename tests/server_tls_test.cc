// `tessera server --tls-cert --tls-key` over real TLS on loopback: a
// self-signed certificate made here with the `openssl` CLI; the API answers
// over HTTPS only, and the `tessera` CLI reaches it with --ca-file (verified)
// or --insecure-skip-tls-verify, and refuses it without either; a node agent
// registers over HTTPS with --ca-file and cannot without it.
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <string>
#include <thread>

#include "agent_process.h"
#include "httplib.h"
#include "server_process.h"

namespace tessera::testing {
namespace {

using Result = CliResult;
Result RunCli(const std::string& args) { return RunTessera(args); }

TEST(ServerTlsTest, ServesHttpsAndTheCliVerifiesTheCertificate) {
  if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set";
  if (system("command -v openssl >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "the openssl CLI is not installed (scripts/setup.sh installs Debian's openssl)";
  }
  const std::string dir = MakeTempDir("tessera_tls");
  ASSERT_FALSE(dir.empty());
  const std::string cert = dir + "/server.pem", key = dir + "/server.key";
  const std::string gen =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 "
      "-addext subjectAltName=IP:127.0.0.1 -keyout " +
      key + " -out " + cert + " >" + dir + "/openssl.log 2>&1";
  ASSERT_EQ(system(gen.c_str()), 0) << "openssl req failed; see " << dir << "/openssl.log";

  // A key that does not load is refused at start.
  ServerProcess broken;
  EXPECT_LT(broken.Start({"--data-dir", dir + "/data0", "--tls-cert", cert, "--tls-key",
                          dir + "/missing.key"}),
            0);

  ServerProcess server;
  const int port = server.Start(
      {"--data-dir", dir + "/data", "--insecure-no-auth", "--tls-cert", cert, "--tls-key", key});
  ASSERT_GT(port, 0) << server.error();
  EXPECT_NE(server.listening_line().find("https://"), std::string::npos) << server.listening_line();

  httplib::SSLClient tls("127.0.0.1", port);
  tls.set_ca_cert_path(cert.c_str());
  tls.enable_server_certificate_verification(true);
  auto r = tls.Get("/healthz");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);

  // Plain HTTP gets no answer from a TLS port.
  httplib::Client plain("127.0.0.1", port);
  plain.set_connection_timeout(2);
  plain.set_read_timeout(2);
  auto p = plain.Get("/healthz");
  EXPECT_TRUE(!p || p->status != 200);

  const std::string url = "https://127.0.0.1:" + std::to_string(port);
  const std::string node =
      "apply -f - <<'EOF'\n"
      "{\"apiVersion\": \"tessera.dev/v1\", \"kind\": \"Node\", \"metadata\": {\"name\": \"n1\"}, "
      "\"spec\": {\"gpuType\": \"H100\", \"gpuCount\": 8}}\nEOF\n";
  setenv("HOME", dir.c_str(), 1);  // no ~/.tessera/config of the user
  // Connection flags go after the subcommand.
  Result ok = RunCli(node.substr(0, node.find(' ')) + " --server " + url + " --ca-file " + cert +
                     node.substr(node.find(' ')));
  ASSERT_EQ(ok.rc, 0) << ok.out;
  Result got = RunCli("get nodes --server " + url + " --ca-file " + cert);
  ASSERT_EQ(got.rc, 0) << got.out;
  EXPECT_NE(got.out.find("n1"), std::string::npos) << got.out;
  Result unverified = RunCli("get nodes --server " + url);
  EXPECT_NE(unverified.rc, 0) << unverified.out;  // the self-signed CA is not trusted
  Result insecure = RunCli("get nodes --insecure-skip-tls-verify --server " + url);
  EXPECT_EQ(insecure.rc, 0) << insecure.out;
  EXPECT_NE(insecure.out.find("n1"), std::string::npos) << insecure.out;

  // A node agent with fake GPUs registers over HTTPS, verifying with --ca-file...
  const std::string fake =
      std::string(TESSERA_SOURCE_DIR) + "/deploy/fake-gpus/up-h100-nvswitch-8.yaml";
  AgentProcess agent;
  ASSERT_TRUE(
      agent.Start({"--server", url, "--ca-file", cert, "--node-name", "tls-n1", "--backend", "fake",
                   "--fake-config", fake, "--state-dir", dir + "/agent", "--heartbeat", "1s"},
                  dir + "/agent.log"))
      << "see " << dir << "/agent.log";
  // 1: registered with its GPUs; 0: the Node exists without GPUs; -1: no such Node.
  auto node_gpus = [&](const std::string& name) {
    auto g = tls.Get("/api/v1/nodes/" + name);
    if (!g || g->status != 200) return -1;
    return g->body.find("\"uuid\"") != std::string::npos ? 1 : 0;
  };
  bool registered = false;
  for (int i = 0; i < 100 && !registered; ++i) {
    registered = node_gpus("tls-n1") == 1;
    if (!registered) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(registered) << "the agent did not register its GPUs over HTTPS; see " << dir
                          << "/agent.log";
  agent.Kill(SIGTERM);
  // ...and without the CA it cannot register (the certificate is not trusted).
  const std::string untrusting = "timeout 3 " + TesseraBin() + " agent --server " + url +
                                 " --node-name tls-n2 --backend fake --fake-config " + fake +
                                 " --state-dir " + dir + "/agent2 >" + dir + "/agent2.log 2>&1";
  (void)system(untrusting.c_str());  // exits (or is stopped by timeout) without registering
  EXPECT_EQ(node_gpus("tls-n2"), -1) << "an agent registered without trusting the certificate";
}

// The TLS policy (src/server/tls_policy.h): forward-secret suites only, and weak or mismatched
// keys refused with a message that says which and why.
TEST(ServerTlsTest, OnlyForwardSecretSuitesAndClearKeyErrors) {
  if (TesseraBin().empty()) GTEST_SKIP() << "TESSERA_BIN is not set";
  if (system("command -v openssl >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "the openssl CLI is not installed (scripts/setup.sh installs Debian's openssl)";
  }
  const std::string dir = MakeTempDir("tessera_tls_policy");
  ASSERT_FALSE(dir.empty());
  auto make = [&](const std::string& name, const std::string& key_type) {
    const std::string gen = "openssl req -x509 -newkey " + key_type +
                            " -nodes -days 2 -subj /CN=127.0.0.1 -keyout " + dir + "/" + name +
                            ".key -out " + dir + "/" + name + ".pem >>" + dir + "/openssl.log 2>&1";
    return system(gen.c_str()) == 0;
  };
  ASSERT_TRUE(make("good", "rsa:2048")) << "see " << dir << "/openssl.log";
  ASSERT_TRUE(make("weak", "rsa:1024")) << "see " << dir << "/openssl.log";
  ASSERT_TRUE(make("other", "rsa:2048")) << "see " << dir << "/openssl.log";

  CliResult weak = RunTessera("server --insecure-no-auth --listen 127.0.0.1:0 --data-dir " + dir +
                              "/d1 --tls-cert " + dir + "/weak.pem --tls-key " + dir + "/weak.key");
  EXPECT_NE(weak.rc, 0) << weak.out;
  EXPECT_NE(weak.out.find("RSA key of 1024 bits is too weak; at least 2048 bits are required"),
            std::string::npos)
      << weak.out;
  CliResult mismatched =
      RunTessera("server --insecure-no-auth --listen 127.0.0.1:0 --data-dir " + dir +
                 "/d2 --tls-cert " + dir + "/good.pem --tls-key " + dir + "/other.key");
  EXPECT_NE(mismatched.rc, 0) << mismatched.out;
  EXPECT_NE(mismatched.out.find("is not the key of the certificate"), std::string::npos)
      << mismatched.out;

  ServerProcess server;
  const int port = server.Start({"--data-dir", dir + "/d3", "--insecure-no-auth", "--tls-cert",
                                 dir + "/good.pem", "--tls-key", dir + "/good.key"});
  ASSERT_GT(port, 0) << server.error();
  auto handshake = [&](const std::string& flags) {
    return RunShell("timeout 10 openssl s_client -connect 127.0.0.1:" + std::to_string(port) + " " +
                    flags + " </dev/null");
  };
  // Static RSA key exchange (no forward secrecy): refused.
  Result rsa = handshake("-tls1_2 -cipher AES128-SHA256");
  EXPECT_NE(rsa.rc, 0) << rsa.out;
  // ECDHE: accepted.
  Result ecdhe = handshake("-tls1_2 -cipher ECDHE-RSA-AES128-GCM-SHA256");
  EXPECT_EQ(ecdhe.rc, 0) << ecdhe.out;
  EXPECT_NE(ecdhe.out.find("ECDHE-RSA-AES128-GCM-SHA256"), std::string::npos) << ecdhe.out;
  // TLS 1.3 (forward secret by design): accepted; TLS 1.1: refused.
  EXPECT_EQ(handshake("-tls1_3").rc, 0);
  EXPECT_NE(handshake("-tls1_1 -cipher DEFAULT@SECLEVEL=0").rc, 0);
}

}  // namespace
}  // namespace tessera::testing
