#include "agent/backend_flags.h"

#include "absl/strings/str_cat.h"
#include "agent/fake/fake_backend.h"
#include "agent/nvml/nvml_backend.h"

namespace tessera::agent {

absl::StatusOr<std::unique_ptr<GpuBackend>> BackendFromFlags(const std::string& backend,
                                                             const std::string& fake_config,
                                                             const std::string& nvml_lib,
                                                             Clock& clock) {
  if (backend == "nvml") return std::make_unique<NvmlBackend>(clock, nvml_lib);
  if (backend != "fake") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend: expected nvml or fake, got '", backend, "'"));
  }
  if (fake_config.empty()) {
    return absl::InvalidArgumentError(
        "--fake-config: required with --backend fake (see deploy/fake-gpus/)");
  }
  absl::StatusOr<std::unique_ptr<FakeBackend>> fake = FakeBackend::FromFile(fake_config, clock);
  if (!fake.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--fake-config: ", fake.status().message()));
  }
  return std::unique_ptr<GpuBackend>(*std::move(fake));
}

}  // namespace tessera::agent
