#include "deviceplugin/registration.h"

#include "absl/strings/str_cat.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace tessera::deviceplugin {

absl::Status RegisterWithKubelet(const std::string& kubelet_socket,
                                 const v1beta1::RegisterRequest& request, absl::Duration timeout) {
  // kubelet.sock may exist a moment before kubelet listens on it: retry the connection quickly
  // rather than after gRPC's default 1 s backoff.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      absl::StrCat("unix:", kubelet_socket), grpc::InsecureChannelCredentials(), args);
  std::unique_ptr<v1beta1::Registration::Stub> stub = v1beta1::Registration::NewStub(channel);
  grpc::ClientContext context;
  context.set_wait_for_ready(true);
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  v1beta1::Empty response;
  grpc::Status s = stub->Register(&context, request, &response);
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat("registering ", request.resource_name(), " with kubelet at ",
                                   kubelet_socket, ": ", s.error_message()));
}

}  // namespace tessera::deviceplugin
