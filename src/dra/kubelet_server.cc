#include "dra/kubelet_server.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "dra/pluginregistration/v1/api.grpc.pb.h"
#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace tessera::dra {
namespace {

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

ClaimRef RefOf(const drav1::Claim& c) { return {c.namespace_(), c.name(), c.uid()}; }

std::string ErrorText(const absl::Status& st) { return std::string(st.message()); }

// v1beta1 and v1 messages have the same fields and numbers: convert through the wire format.
template <typename To, typename From>
bool Convert(const From& from, To* to) {
  std::string wire;
  return from.SerializeToString(&wire) && to->ParseFromString(wire);
}

absl::Status Serve(const std::string& socket, grpc::Service* service,
                   std::unique_ptr<grpc::Server>* out) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(socket).parent_path(), ec);
  if (ec)
    return absl::InternalError(
        absl::StrCat("creating the directory of ", socket, ": ", ec.message()));
  if (::unlink(socket.c_str()) != 0 && errno != ENOENT) {
    return absl::InternalError(
        absl::StrCat("removing stale socket ", socket, ": ", std::strerror(errno)));
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("unix:", socket), grpc::InsecureServerCredentials());
  builder.RegisterService(service);
  *out = builder.BuildAndStart();
  if (*out == nullptr) return absl::UnavailableError(absl::StrCat("cannot serve on ", socket));
  return absl::OkStatus();
}

}  // namespace

class KubeletServer::Registration final : public ::pluginregistration::Registration::Service {
 public:
  explicit Registration(KubeletServer& owner) : owner_(owner) {}
  grpc::Status GetInfo(grpc::ServerContext*, const ::pluginregistration::InfoRequest*,
                       ::pluginregistration::PluginInfo* info) override {
    info->set_type(kDraPluginType);
    info->set_name(owner_.options_.driver);
    info->set_endpoint(owner_.dra_socket());
    info->add_supported_versions("v1.DRAPlugin");
    info->add_supported_versions("v1beta1.DRAPlugin");
    return grpc::Status::OK;
  }
  grpc::Status NotifyRegistrationStatus(
      grpc::ServerContext*, const ::pluginregistration::RegistrationStatus* status,
      ::pluginregistration::RegistrationStatusResponse*) override {
    owner_.registered_ = status->plugin_registered();
    owner_.Log(status->plugin_registered()
                   ? std::string("registered with kubelet")
                   : absl::StrCat("kubelet refused the registration: ", status->error()));
    if (status->plugin_registered() && owner_.options_.on_registered) {
      owner_.options_.on_registered();
    }
    return grpc::Status::OK;
  }

 private:
  KubeletServer& owner_;
};

class KubeletServer::PluginV1 final : public drav1::DRAPlugin::Service {
 public:
  explicit PluginV1(ClaimPreparer& preparer) : preparer_(preparer) {}
  grpc::Status NodePrepareResources(grpc::ServerContext*,
                                    const drav1::NodePrepareResourcesRequest* req,
                                    drav1::NodePrepareResourcesResponse* resp) override {
    for (const drav1::Claim& c : req->claims()) {
      drav1::NodePrepareResourceResponse& out = (*resp->mutable_claims())[c.uid()];
      absl::StatusOr<std::vector<PreparedDevice>> devices = preparer_.Prepare(RefOf(c));
      if (!devices.ok()) {
        out.set_error(ErrorText(devices.status()));
        continue;
      }
      for (const PreparedDevice& d : *devices) {
        drav1::Device* dev = out.add_devices();
        for (const std::string& r : d.request_names) dev->add_request_names(r);
        dev->set_pool_name(d.pool_name);
        dev->set_device_name(d.device_name);
        for (const std::string& id : d.cdi_device_ids) dev->add_cdi_device_ids(id);
      }
    }
    return grpc::Status::OK;
  }
  grpc::Status NodeUnprepareResources(grpc::ServerContext*,
                                      const drav1::NodeUnprepareResourcesRequest* req,
                                      drav1::NodeUnprepareResourcesResponse* resp) override {
    for (const drav1::Claim& c : req->claims()) {
      drav1::NodeUnprepareResourceResponse& out = (*resp->mutable_claims())[c.uid()];
      if (absl::Status st = preparer_.Unprepare(RefOf(c)); !st.ok()) out.set_error(ErrorText(st));
    }
    return grpc::Status::OK;
  }

 private:
  ClaimPreparer& preparer_;
};

class KubeletServer::PluginV1beta1 final : public drav1beta1::DRAPlugin::Service {
 public:
  explicit PluginV1beta1(PluginV1& v1) : v1_(v1) {}
  grpc::Status NodePrepareResources(grpc::ServerContext* ctx,
                                    const drav1beta1::NodePrepareResourcesRequest* req,
                                    drav1beta1::NodePrepareResourcesResponse* resp) override {
    return Forward(req, resp, [&](const auto* in, auto* out) {
      return v1_.NodePrepareResources(ctx, in, out);
    });
  }
  grpc::Status NodeUnprepareResources(grpc::ServerContext* ctx,
                                      const drav1beta1::NodeUnprepareResourcesRequest* req,
                                      drav1beta1::NodeUnprepareResourcesResponse* resp) override {
    return Forward(req, resp, [&](const auto* in, auto* out) {
      return v1_.NodeUnprepareResources(ctx, in, out);
    });
  }

 private:
  // Req/Resp are the v1beta1 messages; the call takes the v1 ones of the same shape.
  template <typename V1Req, typename V1Resp, typename Req, typename Resp, typename Call>
  static grpc::Status ForwardAs(const Req* req, Resp* resp, Call call) {
    V1Req in;
    V1Resp out;
    if (!Convert(*req, &in)) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "cannot read the request");
    }
    grpc::Status s = call(&in, &out);
    if (s.ok() && !Convert(out, resp)) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "cannot convert the response to v1beta1");
    }
    return s;
  }
  template <typename Call>
  static grpc::Status Forward(const drav1beta1::NodePrepareResourcesRequest* req,
                              drav1beta1::NodePrepareResourcesResponse* resp, Call call) {
    return ForwardAs<drav1::NodePrepareResourcesRequest, drav1::NodePrepareResourcesResponse>(
        req, resp, call);
  }
  template <typename Call>
  static grpc::Status Forward(const drav1beta1::NodeUnprepareResourcesRequest* req,
                              drav1beta1::NodeUnprepareResourcesResponse* resp, Call call) {
    return ForwardAs<drav1::NodeUnprepareResourcesRequest, drav1::NodeUnprepareResourcesResponse>(
        req, resp, call);
  }

  PluginV1& v1_;
};

KubeletServer::KubeletServer(ClaimPreparer& preparer, KubeletServerOptions options)
    : preparer_(preparer), options_(std::move(options)) {}

KubeletServer::~KubeletServer() { Stop(); }

void KubeletServer::Log(absl::string_view line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::cerr << "dra-driver: " << line << "\n";
  }
}

std::string KubeletServer::dra_socket() const {
  return (std::filesystem::path(options_.plugin_dir) / kDraSocketName).string();
}

std::string KubeletServer::registration_socket() const {
  return (std::filesystem::path(options_.registry_dir) / absl::StrCat(options_.driver, "-reg.sock"))
      .string();
}

absl::Status KubeletServer::Start() {
  if (dra_server_ != nullptr) return absl::FailedPreconditionError("DRA driver already serving");
  auto v1 = std::make_unique<PluginV1>(preparer_);
  auto v1beta1 = std::make_unique<PluginV1beta1>(*v1);
  auto reg = std::make_unique<Registration>(*this);
  grpc::ServerBuilder builder;
  const std::string dra = dra_socket();
  std::error_code ec;
  std::filesystem::create_directories(options_.plugin_dir, ec);
  if (::unlink(dra.c_str()) != 0 && errno != ENOENT) {
    return absl::InternalError(
        absl::StrCat("removing stale socket ", dra, ": ", std::strerror(errno)));
  }
  builder.AddListeningPort(absl::StrCat("unix:", dra), grpc::InsecureServerCredentials());
  builder.RegisterService(v1.get());
  builder.RegisterService(v1beta1.get());
  dra_server_ = builder.BuildAndStart();
  if (dra_server_ == nullptr) return absl::UnavailableError(absl::StrCat("cannot serve on ", dra));
  if (absl::Status st = Serve(registration_socket(), reg.get(), &reg_server_); !st.ok()) {
    dra_server_->Shutdown();
    dra_server_.reset();
    ::unlink(dra.c_str());
    return st;
  }
  services_.push_back(std::move(v1));
  services_.push_back(std::move(v1beta1));
  services_.push_back(std::move(reg));
  Log(absl::StrCat("serving ", options_.driver, " on ", dra, "; registration on ",
                   registration_socket()));
  return absl::OkStatus();
}

void KubeletServer::Stop() {
  // The registration socket first: kubelet then stops calling the plugin.
  if (reg_server_ != nullptr) {
    reg_server_->Shutdown();
    reg_server_.reset();
    ::unlink(registration_socket().c_str());
  }
  if (dra_server_ != nullptr) {
    dra_server_->Shutdown();
    dra_server_.reset();
    ::unlink(dra_socket().c_str());
  }
  services_.clear();
}

}  // namespace tessera::dra
