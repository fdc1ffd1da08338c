// RunComponent: what the main of a Kubernetes control-plane component does, once for all of them
// (`tessera scheduler`, `tessera operator`): the flags they share, the API connection checked
// before anything else, /metrics and /healthz, leader election, and stopping on SIGINT/SIGTERM.
//
// Sequence:
//   1. The log format, then the connection: the kubeconfig (--kubeconfig/--context), else the
//      in-cluster service account; a RestClient; one GET /version, so a wrong CA, address or
//      credential is one clear error at start, not informers backing off until a sync timeout.
//   2. The metrics server on --metrics-addr (HOST:PORT; port 0 picks one; "" none), then one line
//      on stdout, "tessera NAME IDENTITY: metrics http://HOST:PORT" (tests and scripts read it).
//   3. With --leader-elect (default), waits for the Lease --lease-namespace/--lease-name; then
//      `start`. A leader that loses its lease stops and exits 1, as kube-scheduler and
//      controller-manager do (a fresh replica starts standing by). Without it, `start` at once.
//   4. Runs until SIGINT/SIGTERM (exit 0); then `stop`, the lease released.
// Exit codes: 0 stopped by a signal; 1 could not connect, listen, start, or lost the lease;
// 2 bad flags or configuration.
// Thread safety: call from the main thread; it blocks SIGINT and SIGTERM for the process.
#pragma once

#include <functional>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "common/clock.h"
#include "kube/rest_client.h"
#include "metrics/registry.h"
#include "obs/log.h"

namespace tessera::kube {

struct ComponentFlags {
  std::string kubeconfig, context;
  bool leader_elect = true;
  std::string lease_namespace = "tessera-system", lease_name;
  double lease_duration_s = 15, renew_deadline_s = 10, retry_period_s = 2;
  std::string metrics_addr;
  double qps = 0;
  int burst = 100;
  std::string log_format = "text";
};

// Adds the shared flags to `c` (defaults from `f`, which must outlive parsing).
void AddComponentFlags(CLI::App* c, ComponentFlags* f);

// What a component gets once it may run. Borrowed for the component's life (until `stop`).
struct ComponentContext {
  RestClient& client;
  const Clock& clock;
  metrics::Registry& registry;
  const std::string& identity;  // hostname + random suffix: the lease holder, Events' instance
  obs::Logger log;
};

struct ComponentHooks {
  // Called before connecting: validates what the component reads from its own flags (files,
  // ranges); an error is printed after "tessera NAME: " and the process exits 2.
  std::function<absl::Status()> configure;
  // Starts the component's threads and returns (an error exits 1).
  std::function<absl::Status(const ComponentContext&)> start;
  // Stops what `start` started; called once, after a successful start.
  std::function<void()> stop;
};

// `name`: "scheduler", "operator" (the log component and the messages' prefix). `rest` is
// used as given, but for its user agent ("tessera-NAME" when empty), QPS and burst (the flags').
int RunComponent(const std::string& name, const ComponentFlags& f, RestOptions rest,
                 const ComponentHooks& hooks);

}  // namespace tessera::kube
