#include "kube/kubeconfig.h"

#include <stdlib.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace tessera::kube {
namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Resolve(const std::string& dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || dir.empty()) return path;
  return absl::StrCat(dir, "/", path);
}

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// One parsed kubeconfig file: its named entries, in order.
struct File {
  std::string name, dir;
  YAML::Node root;
};

// Collects the errors of one parse ("FIELD: message").
struct Errors {
  std::vector<std::string> list;
  void Add(const std::string& field, const std::string& msg) {
    list.push_back(absl::StrCat(field, ": ", msg));
  }
};

// The entry named `want` in root[section] (a list of {name, <key>: {...}}), with its field path.
// NOLINTNEXTLINE(bugprone-exception-escape): YAML::Node's assignment does not throw here.
struct Entry {
  YAML::Node body;
  std::string field;  // "clusters[0] (kind).cluster"
  const File* file = nullptr;
};
std::optional<Entry> Find(const std::vector<File>& files, const char* section, const char* key,
                          const std::string& want, Errors& errs) {
  for (const File& f : files) {
    const YAML::Node list = f.root[section];
    if (!list) continue;
    if (!list.IsSequence()) {
      errs.Add(absl::StrCat(f.name, ": ", section), "must be a list");
      continue;
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const YAML::Node n = list[i];
      if (!n.IsMap() || !n["name"] || n["name"].as<std::string>() != want) continue;
      Entry e{n[key], absl::StrCat(f.name, ": ", section, "[", i, "] (", want, ").", key), &f};
      return e;
    }
  }
  return std::nullopt;
}

std::string Str(const YAML::Node& n, const char* key) {
  if (!n || !n.IsMap() || !n[key]) return "";
  return n[key].as<std::string>();
}

// `key` (a file path) or `key`-data (base64): the bytes, or an error on the field.
std::string FileOrData(const Entry& e, const char* key, Errors& errs) {
  const std::string data_key = absl::StrCat(key, "-data");
  const std::string data = Str(e.body, data_key.c_str());
  const std::string path = Str(e.body, key);
  if (!data.empty()) {
    std::string out;
    if (!absl::Base64Unescape(data, &out)) {
      errs.Add(absl::StrCat(e.field, ".", data_key), "not valid base64");
    }
    return out;
  }
  if (path.empty()) return "";
  const std::string full = Resolve(e.file->dir, path);
  std::optional<std::string> bytes = ReadFile(full);
  if (!bytes) {
    errs.Add(absl::StrCat(e.field, ".", key), absl::StrCat("cannot read ", full));
    return "";
  }
  return *bytes;
}

absl::StatusOr<KubeConfig> FromFiles(const std::vector<File>& files, const std::string& context) {
  Errors errs;
  const std::string names =
      absl::StrJoin(files, ":", [](std::string* out, const File& f) { out->append(f.name); });
  try {
    std::string ctx_name = context;
    for (const File& f : files) {
      if (!ctx_name.empty()) break;
      ctx_name = Str(f.root, "current-context");
    }
    if (ctx_name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("kubeconfig ", names, ": current-context: not set (and no context given)"));
    }
    std::optional<Entry> ctx = Find(files, "contexts", "context", ctx_name, errs);
    if (!ctx) {
      return absl::InvalidArgumentError(
          absl::StrCat("kubeconfig ", names, ": contexts: no context named \"", ctx_name, "\""));
    }
    KubeConfig c;
    c.source = absl::StrCat("kubeconfig ", names, " (context ", ctx_name, ")");
    const std::string cluster_name = Str(ctx->body, "cluster");
    const std::string user_name = Str(ctx->body, "user");
    if (!Str(ctx->body, "namespace").empty()) c.ns = Str(ctx->body, "namespace");
    std::optional<Entry> cluster;
    if (cluster_name.empty()) {
      errs.Add(ctx->field + ".cluster", "not set");
    } else if (!(cluster = Find(files, "clusters", "cluster", cluster_name, errs))) {
      errs.Add(ctx->field + ".cluster", absl::StrCat("no cluster named \"", cluster_name, "\""));
    }
    if (cluster) {
      c.server = Str(cluster->body, "server");
      if (c.server.empty()) errs.Add(cluster->field + ".server", "not set");
      if (!c.server.empty() && c.server.rfind("https://", 0) != 0 &&
          c.server.rfind("http://", 0) != 0) {
        errs.Add(cluster->field + ".server", "must start with https:// or http://");
      }
      while (!c.server.empty() && c.server.back() == '/') c.server.pop_back();
      c.ca_pem = FileOrData(*cluster, "certificate-authority", errs);
      if (cluster->body["insecure-skip-tls-verify"]) {
        c.insecure_skip_tls_verify = cluster->body["insecure-skip-tls-verify"].as<bool>();
      }
      for (const char* unsupported : {"tls-server-name", "proxy-url"}) {
        if (!Str(cluster->body, unsupported).empty()) {
          errs.Add(absl::StrCat(cluster->field, ".", unsupported), "not supported");
        }
      }
    }
    if (!user_name.empty()) {
      std::optional<Entry> user = Find(files, "users", "user", user_name, errs);
      if (!user) {
        errs.Add(ctx->field + ".user", absl::StrCat("no user named \"", user_name, "\""));
      } else {
        c.client_cert_pem = FileOrData(*user, "client-certificate", errs);
        c.client_key_pem = FileOrData(*user, "client-key", errs);
        if (c.client_cert_pem.empty() != c.client_key_pem.empty()) {
          errs.Add(user->field, "client-certificate and client-key must be given together");
        }
        c.token = Str(user->body, "token");
        const std::string token_file = Str(user->body, "tokenFile");
        if (!token_file.empty()) c.token_file = Resolve(user->file->dir, token_file);
        for (const char* unsupported : {"exec", "auth-provider", "username", "password"}) {
          if (user->body && user->body.IsMap() && user->body[unsupported]) {
            errs.Add(absl::StrCat(user->field, ".", unsupported),
                     "not supported (use a client certificate, token or tokenFile)");
          }
        }
      }
    }
    if (!errs.list.empty()) {
      return absl::InvalidArgumentError(absl::StrJoin(errs.list, "; "));
    }
    return c;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", names, ": ", e.what()));
  }
}

}  // namespace

absl::StatusOr<KubeConfig> ParseKubeconfig(const std::string& yaml, const std::string& dir,
                                           const std::string& name, const std::string& context) {
  File f{name, dir, {}};
  try {
    f.root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", name, ": ", e.what()));
  }
  if (!f.root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", name, ": not a YAML mapping"));
  }
  return FromFiles({f}, context);
}

absl::StatusOr<KubeConfig> LoadKubeconfig(const KubeconfigOptions& opts) {
  const EnvLookup env = opts.env ? opts.env : ProcessEnv();
  std::vector<std::string> paths;
  if (!opts.path.empty()) {
    paths.push_back(opts.path);
  } else if (std::optional<std::string> list = env("KUBECONFIG"); list && !list->empty()) {
    for (absl::string_view p : absl::StrSplit(*list, ':', absl::SkipEmpty())) {
      paths.emplace_back(p);
    }
  } else if (std::optional<std::string> home = env("HOME"); home) {
    paths.push_back(absl::StrCat(*home, "/.kube/config"));
  }
  std::vector<File> files;
  for (const std::string& p : paths) {
    std::optional<std::string> text = ReadFile(p);
    // kubectl skips missing $KUBECONFIG entries; a file named explicitly must exist.
    if (!text) {
      if (!opts.path.empty()) {
        return absl::NotFoundError(absl::StrCat("kubeconfig ", p, ": cannot be read"));
      }
      continue;
    }
    File f{p, DirOf(p), {}};
    try {
      f.root = YAML::Load(*text);
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", p, ": ", e.what()));
    }
    if (!f.root.IsMap()) {
      return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", p, ": not a YAML mapping"));
    }
    files.push_back(std::move(f));
  }
  if (files.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no kubeconfig: none of ", absl::StrJoin(paths, ", "), " can be read"));
  }
  return FromFiles(files, opts.context);
}

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

absl::StatusOr<KubeConfig> InClusterConfig(const EnvLookup& env, const std::string& sa_dir) {
  const std::optional<std::string> host = env("KUBERNETES_SERVICE_HOST");
  const std::optional<std::string> port = env("KUBERNETES_SERVICE_PORT");
  if (!host || host->empty() || !port || port->empty()) {
    return absl::FailedPreconditionError(
        "not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  }
  KubeConfig c;
  const bool ipv6 = host->find(':') != std::string::npos;
  c.server = absl::StrCat("https://", ipv6 ? "[" : "", *host, ipv6 ? "]" : "", ":", *port);
  c.token_file = sa_dir + "/token";
  if (!ReadFile(c.token_file)) {
    return absl::FailedPreconditionError(
        absl::StrCat("in-cluster config: cannot read the service-account token ", c.token_file));
  }
  std::optional<std::string> ca = ReadFile(sa_dir + "/ca.crt");
  if (!ca) {
    return absl::FailedPreconditionError(
        absl::StrCat("in-cluster config: cannot read the cluster CA ", sa_dir, "/ca.crt"));
  }
  c.ca_pem = *ca;
  if (std::optional<std::string> ns = ReadFile(sa_dir + "/namespace"); ns && !ns->empty()) {
    c.ns = *ns;
    while (!c.ns.empty() && (c.ns.back() == '\n' || c.ns.back() == ' ')) c.ns.pop_back();
  }
  c.source = absl::StrCat("in-cluster config (", sa_dir, ")");
  return c;
}

absl::StatusOr<KubeConfig> ConfigFromFlags(const std::string& kubeconfig,
                                           const std::string& context) {
  if (!kubeconfig.empty() || !context.empty()) {
    return LoadKubeconfig({kubeconfig, context, nullptr});
  }
  absl::StatusOr<KubeConfig> in_cluster = InClusterConfig(ProcessEnv());
  if (in_cluster.ok()) return in_cluster;
  return absl::Status(in_cluster.status().code(),
                      absl::StrCat(in_cluster.status().message(),
                                   " (no --kubeconfig: tried the in-cluster config)"));
}

}  // namespace tessera::kube
