#include "agent/discovery.h"

#include "common/status_macros.h"

namespace tessera::agent {

absl::StatusOr<NodeSnapshot> Discover(GpuBackend& backend) {
  NodeSnapshot snap;
  snap.backend = backend.BackendName();
  snap.driver_version = backend.DriverVersion();
  snap.cuda_driver_version = backend.CudaDriverVersion();
  ASSIGN_OR_RETURN(int count, backend.DeviceCount());
  std::vector<GpuInfo> infos;
  for (int i = 0; i < count; ++i) {
    GpuSnapshot g;
    absl::StatusOr<GpuInfo> info = backend.GetDeviceInfo(i);
    if (info.ok()) {
      g.info = *info;
      absl::StatusOr<GpuMetrics> m = backend.GetMetrics(i);
      if (m.ok()) {
        g.metrics = *std::move(m);
      } else {
        g.error = m.status().ToString();
      }
    } else {
      g.info.index = i;
      g.error = info.status().ToString();
    }
    infos.push_back(g.info);
    snap.gpus.push_back(std::move(g));
  }
  snap.topology = BuildTopologyMatrix(
      infos, [&backend](int a, int b) { return backend.GetTopologyLevel(a, b); });
  return snap;
}

}  // namespace tessera::agent
