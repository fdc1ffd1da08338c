#include "deviceplugin/registration.h"

#include "absl/strings/str_cat.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace tessera::deviceplugin {

absl::Status RegisterWithKubelet(const std::string& kubelet_socket,
                                 const v1beta1::RegisterRequest& request, absl::Duration timeout) {
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(
      absl::StrCat("unix:", kubelet_socket), grpc::InsecureChannelCredentials());
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
