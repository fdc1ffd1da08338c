// Registration with kubelet: one v1beta1.Registration/Register call on kubelet's socket.
// Kubelet then connects to <device-plugin-dir>/<endpoint>, so the plugin must already serve.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "deviceplugin/v1beta1/api.pb.h"

namespace tessera::deviceplugin {

inline constexpr char kKubeletSocket[] = "kubelet.sock";
inline constexpr char kApiVersion[] = "v1beta1";

// Calls Register on the Unix socket `kubelet_socket`, waiting up to `timeout` for kubelet to
// answer (a just-created socket may not accept yet). Returns kubelet's error, if any, as is.
absl::Status RegisterWithKubelet(const std::string& kubelet_socket,
                                 const v1beta1::RegisterRequest& request, absl::Duration timeout);

}  // namespace tessera::deviceplugin
