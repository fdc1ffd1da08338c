#include "deviceplugin/testing/test_kubelet.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tessera::deviceplugin::testing {

PluginClient::PluginClient(const std::string& socket_path)
    : channel_(grpc::CreateChannel("unix:" + socket_path, grpc::InsecureChannelCredentials())),
      stub_(v1beta1::DevicePlugin::NewStub(channel_)) {}

PluginClient::~PluginClient() {
  if (reader_.joinable()) {
    watch_context_.TryCancel();
    reader_.join();
  }
}

namespace {

void Prepare(grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  context->set_wait_for_ready(true);
}

}  // namespace

grpc::Status PluginClient::GetDevicePluginOptions(v1beta1::DevicePluginOptions* out) {
  grpc::ClientContext context;
  Prepare(&context);
  return stub_->GetDevicePluginOptions(&context, v1beta1::Empty(), out);
}

grpc::Status PluginClient::Allocate(const v1beta1::AllocateRequest& request,
                                    v1beta1::AllocateResponse* out) {
  grpc::ClientContext context;
  Prepare(&context);
  return stub_->Allocate(&context, request, out);
}

grpc::Status PluginClient::GetPreferredAllocation(
    const v1beta1::PreferredAllocationRequest& request, v1beta1::PreferredAllocationResponse* out) {
  grpc::ClientContext context;
  Prepare(&context);
  return stub_->GetPreferredAllocation(&context, request, out);
}

grpc::Status PluginClient::PreStartContainer(const v1beta1::PreStartContainerRequest& request) {
  grpc::ClientContext context;
  Prepare(&context);
  v1beta1::PreStartContainerResponse out;
  return stub_->PreStartContainer(&context, request, &out);
}

void PluginClient::StartWatch() {
  watch_context_.set_wait_for_ready(true);
  reader_ = std::thread([this] {
    std::unique_ptr<grpc::ClientReader<v1beta1::ListAndWatchResponse>> reader =
        stub_->ListAndWatch(&watch_context_, v1beta1::Empty());
    v1beta1::ListAndWatchResponse list;
    while (reader->Read(&list)) {
      absl::MutexLock l(&mu_);
      lists_.push_back(list);
    }
    reader->Finish().IgnoreError();
    absl::MutexLock l(&mu_);
    ended_ = true;
  });
}

std::optional<v1beta1::ListAndWatchResponse> PluginClient::WaitForList(
    const std::function<bool(const v1beta1::ListAndWatchResponse&)>& pred, size_t from,
    absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  std::optional<v1beta1::ListAndWatchResponse> found;
  auto match = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    for (size_t i = from; i < lists_.size(); ++i) {
      if (pred(lists_[i])) {
        found = lists_[i];
        return true;
      }
    }
    return false;
  };
  mu_.AwaitWithTimeout(absl::Condition(&match), timeout);
  return found;
}

std::vector<v1beta1::ListAndWatchResponse> PluginClient::lists() const {
  absl::MutexLock l(&mu_);
  return lists_;
}

bool PluginClient::WaitForStreamEnd(absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&ended_), timeout);
}

std::map<std::string, std::string> HealthById(const v1beta1::ListAndWatchResponse& list) {
  std::map<std::string, std::string> out;
  for (const v1beta1::Device& d : list.devices()) out[d.id()] = d.health();
  return out;
}

class TestKubelet::RegistrationService final : public v1beta1::Registration::Service {
 public:
  explicit RegistrationService(TestKubelet& kubelet) : kubelet_(kubelet) {}
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* request,
                        v1beta1::Empty*) override {
    return kubelet_.OnRegister(*request);
  }

 private:
  TestKubelet& kubelet_;
};

TestKubelet::TestKubelet(std::string dir) : dir_(std::move(dir)) {}

TestKubelet::~TestKubelet() {
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_.reset();
  }
}

absl::Status TestKubelet::Start() {
  if (server_ != nullptr) return absl::FailedPreconditionError("test kubelet already serving");
  service_ = std::make_unique<RegistrationService>(*this);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + dir_ + "/kubelet.sock", grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) return absl::UnavailableError("test kubelet: cannot serve kubelet.sock");
  return absl::OkStatus();
}

void TestKubelet::StopAndDeleteSockets() {
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_.reset();
    service_.reset();
  }
  // Like kubelet's device manager at start: remove every socket in the directory.
  DIR* d = opendir(dir_.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    const std::string path = dir_ + "/" + e->d_name;
    struct stat st;
    if (lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) unlink(path.c_str());
  }
  closedir(d);
}

absl::Status TestKubelet::Restart() {
  StopAndDeleteSockets();
  return Start();
}

grpc::Status TestKubelet::OnRegister(const v1beta1::RegisterRequest& request) {
  std::string problem;
  const std::string& name = request.resource_name();
  if (request.version() != "v1beta1") {
    problem = "unsupported version '" + request.version() + "'";
  } else if (request.endpoint().empty() || request.endpoint().find('/') != std::string::npos) {
    problem = "endpoint must be a file name in the device plugin directory";
  } else if (name.find('/') == std::string::npos || name.front() == '/' || name.back() == '/') {
    problem = "resource_name '" + name + "' is not domain/name";
  } else {
    struct stat st;
    const std::string path = dir_ + "/" + request.endpoint();
    if (stat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
      problem = "no socket at " + path + " (serve before registering)";
    }
  }
  absl::MutexLock l(&mu_);
  if (!problem.empty()) {
    rejections_.push_back(problem);
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, problem);
  }
  if (refuse_next_ > 0) {
    --refuse_next_;
    rejections_.push_back("refused: device manager not ready");
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "device manager not ready");
  }
  registrations_.push_back(request);
  return grpc::Status::OK;
}

bool TestKubelet::WaitForRegistrations(size_t n, absl::Duration timeout) const {
  absl::MutexLock l(&mu_);
  auto enough = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return registrations_.size() >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

std::vector<v1beta1::RegisterRequest> TestKubelet::registrations() const {
  absl::MutexLock l(&mu_);
  return registrations_;
}

std::vector<std::string> TestKubelet::rejections() const {
  absl::MutexLock l(&mu_);
  return rejections_;
}

bool TestKubelet::WaitForRejections(size_t n, absl::Duration timeout) const {
  absl::MutexLock l(&mu_);
  auto enough = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return rejections_.size() >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

void TestKubelet::RefuseNext(int n) {
  absl::MutexLock l(&mu_);
  refuse_next_ = n;
}

std::unique_ptr<PluginClient> TestKubelet::Connect(const std::string& endpoint) const {
  return std::make_unique<PluginClient>(dir_ + "/" + endpoint);
}

}  // namespace tessera::deviceplugin::testing
