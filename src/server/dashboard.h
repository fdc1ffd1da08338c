// The web dashboard inside `tessera server`: the page at / and /ui/ (files
// compiled into the binary, see ui_assets.h) and the compact fleet summary
// it draws from, GET /api/v1/fleet (fleet.h). docs/dashboard.md.
//
// The page itself is public (it holds no data); every request for data
// carries the user's bearer token and is authorized like the API.
#pragma once

#include "absl/time/time.h"
#include "server/auth.h"
#include "server/gpu_samples.h"
#include "store/store.h"

namespace httplib {
class Server;
}

namespace tessera::server {

// Adds the routes to `http`. `store` and `samples` (the heartbeats' live
// utilization, may be null) must outlive the server; `auth` is copied.
// Register before the /api/v1 catch-all (ApiServerOptions::extra_routes).
// `metrics_freshness`: how old an autoscaled service's replica reading may be
// to count in the latency the summary shows (the autoscaler's freshness).
// Long-polls (waitSeconds > 0) open at once, by default.
inline constexpr int kMaxFleetWaits = 256;
// Long-polls (waitSeconds > 0) each hold a request thread: at most `max_waits` at once, and no
// token more than `max_waits_per_token` (0: a quarter); beyond, 429 (slot_shares.h).
void RegisterDashboardRoutes(httplib::Server& http, store::Store& store, Authenticator auth,
                             const GpuSamples* samples = nullptr,
                             absl::Duration metrics_freshness = absl::Seconds(30),
                             int max_waits = kMaxFleetWaits, int max_waits_per_token = 0);

}  // namespace tessera::server
