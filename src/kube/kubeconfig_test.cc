#include "kube/kubeconfig.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace tessera::kube {
namespace {

class KubeconfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "kubeconfig_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  static EnvLookup Env(const std::map<std::string, std::string>& vars) {
    return [vars](const std::string& k) -> std::optional<std::string> {
      auto it = vars.find(k);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
  }
  std::string dir_;
};

constexpr char kTwoContexts[] = R"(apiVersion: v1
kind: Config
current-context: prod
clusters:
- name: prod-cluster
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
- name: dev-cluster
  cluster:
    server: https://dev:6443
    certificate-authority: certs/ca.pem
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
- name: robot
  user:
    tokenFile: robot.token
    token: fallback
contexts:
- name: prod
  context: {cluster: prod-cluster, user: admin, namespace: ml}
- name: dev
  context: {cluster: dev-cluster, user: robot}
)";

TEST_F(KubeconfigTest, CurrentContextWithInlineData) {
  absl::StatusOr<KubeConfig> c = ParseKubeconfig(kTwoContexts, dir_, "kc", "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://10.0.0.1:6443");  // trailing slash dropped
  EXPECT_EQ(c->ca_pem, "-----BEGIN CERTIFICATE-----\n");
  EXPECT_EQ(c->client_cert_pem, "cert");
  EXPECT_EQ(c->client_key_pem, "key");
  EXPECT_EQ(c->ns, "ml");
  EXPECT_FALSE(c->insecure_skip_tls_verify);
  EXPECT_NE(c->source.find("context prod"), std::string::npos);
}

TEST_F(KubeconfigTest, NamedContextWithFilesRelativeToTheKubeconfig) {
  std::filesystem::create_directories(dir_ + "/certs");
  Write("certs/ca.pem", "CA PEM");
  const std::string path = Write("config", kTwoContexts);
  absl::StatusOr<KubeConfig> c = LoadKubeconfig({path, "dev", Env({})});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://dev:6443");
  EXPECT_EQ(c->ca_pem, "CA PEM");
  EXPECT_TRUE(c->insecure_skip_tls_verify);
  EXPECT_EQ(c->token_file, dir_ + "/robot.token");
  EXPECT_EQ(c->token, "fallback");
  EXPECT_EQ(c->ns, "default");
}

TEST_F(KubeconfigTest, KubeconfigEnvMergesFilesFirstWins) {
  const std::string a = Write("a", R"(current-context: one
contexts:
- name: one
  context: {cluster: c, user: u}
users:
- name: u
  user: {token: from-a}
)");
  const std::string b = Write("b", R"(current-context: two
clusters:
- name: c
  cluster: {server: "https://b:1"}
users:
- name: u
  user: {token: from-b}
)");
  absl::StatusOr<KubeConfig> c =
      LoadKubeconfig({"", "", Env({{"KUBECONFIG", a + ":" + dir_ + "/missing:" + b}})});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://b:1");
  EXPECT_EQ(c->token, "from-a");
  // HOME/.kube/config when KUBECONFIG is unset.
  std::filesystem::create_directories(dir_ + "/home/.kube");
  Write("home/.kube/config", std::string(kTwoContexts));
  c = LoadKubeconfig({"", "", Env({{"HOME", dir_ + "/home"}})});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://10.0.0.1:6443");
  EXPECT_EQ(LoadKubeconfig({"", "", Env({{"HOME", dir_}})}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadKubeconfig({dir_ + "/nope", "", Env({})}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(KubeconfigTest, BadFieldsAreNamedAllAtOnce) {
  absl::StatusOr<KubeConfig> c = ParseKubeconfig(R"(current-context: x
clusters:
- name: c
  cluster: {certificate-authority: nope.pem, tls-server-name: foo}
users:
- name: u
  user:
    client-certificate-data: "!!!"
    exec: {command: aws}
contexts:
- name: x
  context: {cluster: c, user: u}
)",
                                                 dir_, "kc", "");
  ASSERT_FALSE(c.ok());
  const std::string msg(c.status().message());
  EXPECT_NE(msg.find("clusters[0] (c).cluster.server: not set"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cluster.certificate-authority: cannot read " + dir_ + "/nope.pem"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("cluster.tls-server-name: not supported"), std::string::npos) << msg;
  EXPECT_NE(msg.find("user.client-certificate-data: not valid base64"), std::string::npos) << msg;
  EXPECT_NE(msg.find("user.exec: not supported"), std::string::npos) << msg;
  EXPECT_NE(ParseKubeconfig(R"(current-context: x
clusters: [{name: c, cluster: {server: "https://a:1"}}]
users: [{name: u, user: {client-key-data: a2V5}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
)",
                            dir_, "kc", "")
                .status()
                .message()
                .find("client-certificate and client-key must be given together"),
            absl::string_view::npos);

  EXPECT_NE(ParseKubeconfig(kTwoContexts, dir_, "kc", "nope")
                .status()
                .message()
                .find("no context named \"nope\""),
            absl::string_view::npos);
  EXPECT_FALSE(ParseKubeconfig("[1, 2", dir_, "kc", "").ok());
  EXPECT_FALSE(ParseKubeconfig("- a\n- b\n", dir_, "kc", "").ok());
  EXPECT_NE(ParseKubeconfig("clusters: []\n", dir_, "kc", "")
                .status()
                .message()
                .find("current-context: not set"),
            absl::string_view::npos);
}

TEST_F(KubeconfigTest, InClusterConfig) {
  std::filesystem::create_directories(dir_ + "/sa");
  EXPECT_EQ(InClusterConfig(Env({}), dir_ + "/sa").status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto env = Env({{"KUBERNETES_SERVICE_HOST", "fd00::1"}, {"KUBERNETES_SERVICE_PORT", "443"}});
  EXPECT_NE(InClusterConfig(env, dir_ + "/sa").status().message().find("token"),
            absl::string_view::npos);
  Write("sa/token", "tok\n");
  Write("sa/ca.crt", "CA");
  Write("sa/namespace", "tessera-system\n");
  absl::StatusOr<KubeConfig> c = InClusterConfig(env, dir_ + "/sa");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://[fd00::1]:443");
  EXPECT_EQ(c->token_file, dir_ + "/sa/token");
  EXPECT_EQ(c->ca_pem, "CA");
  EXPECT_EQ(c->ns, "tessera-system");
}

}  // namespace
}  // namespace tessera::kube
