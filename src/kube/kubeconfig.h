// KubeConfig: how to reach and authenticate to a kube-apiserver, from a kubeconfig file (kubectl's
// format) or from inside a Pod (the service-account token and CA).
//
// kubeconfig: the file named by the caller, else each file of $KUBECONFIG (':'-separated, merged
// as kubectl does: the first file that names a cluster, user, context or current-context wins),
// else ~/.kube/config. Supported: clusters[].cluster.{server, certificate-authority,
// certificate-authority-data, insecure-skip-tls-verify}, users[].user.{client-certificate(-data),
// client-key(-data), token, tokenFile}, contexts[].context.{cluster, user, namespace},
// current-context. Relative file paths are relative to the kubeconfig's directory. Credential
// plugins (exec, auth-provider), basic auth, proxy-url and tls-server-name are refused with the
// field named rather than silently ignored.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace tessera::kube {

struct KubeConfig {
  std::string server;  // "https://127.0.0.1:6443"
  // PEM; empty: the system's trust store. Verification is on unless insecure_skip_tls_verify.
  std::string ca_pem;
  bool insecure_skip_tls_verify = false;
  std::string client_cert_pem, client_key_pem;  // both or neither
  std::string token;                            // bearer token
  // A bearer token file, re-read when it changes (projected service-account tokens rotate).
  // Takes precedence over `token`, as in client-go.
  std::string token_file;
  std::string ns = "default";  // the context's namespace
  std::string source;          // where this came from, for messages: "kubeconfig /x (context y)"
};

// Looks up an environment variable (injected so tests do not mutate the process's environment).
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup ProcessEnv();

struct KubeconfigOptions {
  std::string path;     // empty: $KUBECONFIG, else ~/.kube/config
  std::string context;  // empty: current-context
  EnvLookup env;        // for KUBECONFIG and HOME; null: the process's environment
};

// NotFound when no kubeconfig file exists; InvalidArgument naming the file and every bad field.
absl::StatusOr<KubeConfig> LoadKubeconfig(const KubeconfigOptions& opts);

// Parses kubeconfig YAML text; `dir` resolves relative paths, `name` names it in messages.
absl::StatusOr<KubeConfig> ParseKubeconfig(const std::string& yaml, const std::string& dir,
                                           const std::string& name, const std::string& context);

// In-cluster: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, the token file
// `sa_dir`/token (re-read as it rotates), CA `sa_dir`/ca.crt and namespace `sa_dir`/namespace.
// FailedPrecondition when not running in a Pod (the variables or files are missing).
absl::StatusOr<KubeConfig> InClusterConfig(
    const EnvLookup& env,
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// What a component's --kubeconfig/--context flags mean: that file (and context) when either is
// given, else the in-cluster service account of the process's Pod; an error from the latter
// says that no --kubeconfig was given.
absl::StatusOr<KubeConfig> ConfigFromFlags(const std::string& kubeconfig,
                                           const std::string& context = "");

}  // namespace tessera::kube
