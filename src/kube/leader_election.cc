#include "kube/leader_election.h"

#include "absl/strings/str_cat.h"
#include "kube/api_error.h"
#include "kube/codec.h"

namespace tessera::kube {
namespace {

constexpr double kJitterFactor = 1.2;

std::string Record(const Lease& l) { return EncodeLease(l).value("spec", Json::object()).dump(); }

}  // namespace

absl::StatusOr<std::unique_ptr<LeaderElector>> LeaderElector::Create(RestClient& client,
                                                                     const Clock& clock,
                                                                     LeaderElectionConfig c) {
  std::vector<std::string> errs;
  if (c.lease_name.empty()) errs.push_back("lease_name: empty");
  if (c.lease_namespace.empty()) errs.push_back("lease_namespace: empty");
  if (c.identity.empty()) errs.push_back("identity: empty");
  if (c.lease_duration <= c.renew_deadline) {
    errs.push_back("lease_duration: must be greater than renew_deadline");
  }
  if (c.renew_deadline <= c.retry_period * kJitterFactor) {
    errs.push_back("renew_deadline: must be greater than 1.2 * retry_period");
  }
  if (c.retry_period <= absl::ZeroDuration()) errs.push_back("retry_period: must be positive");
  if (c.lease_duration < absl::Seconds(1)) {
    errs.push_back("lease_duration: at least 1s (the Lease counts whole seconds)");
  }
  if (!errs.empty()) {
    std::string msg = "leader election:";
    for (const std::string& e : errs) absl::StrAppend(&msg, " ", e, ";");
    msg.pop_back();
    return absl::InvalidArgumentError(msg);
  }
  return std::unique_ptr<LeaderElector>(new LeaderElector(client, clock, std::move(c)));
}

LeaderElector::LeaderElector(RestClient& client, const Clock& clock, LeaderElectionConfig config)
    : client_(client), clock_(clock), config_(std::move(config)), rng_(config_.seed) {}

void LeaderElector::Observe(const Lease& l, const std::string& raw_record) {
  observed_ = l;
  observed_record_ = raw_record;
  observed_time_ = clock_.Now();
  const std::string holder = l.holder_identity.value_or("");
  if (holder != reported_leader_) {
    reported_leader_ = holder;
    if (config_.on_new_leader && !holder.empty()) config_.on_new_leader(holder);
  }
}

bool LeaderElector::TryAcquireOrRenew() {
  const absl::Time now = clock_.Now();
  const std::string now_text = FormatMicroTime(now);
  const int32_t duration_s = static_cast<int32_t>(absl::ToInt64Seconds(config_.lease_duration));
  const auto fail = [this](const absl::Status& s) {
    absl::MutexLock lock(&mu_);
    last_error_ = std::string(s.message());
    return false;
  };
  absl::StatusOr<Json> got =
      client_.Get(LeasesResource(), config_.lease_namespace, config_.lease_name);
  if (!got.ok() && IsApiNotFound(got.status())) {
    Lease l;
    l.metadata.name = config_.lease_name;
    l.metadata.ns = config_.lease_namespace;
    l.holder_identity = config_.identity;
    l.lease_duration_seconds = duration_s;
    l.acquire_time = now_text;
    l.renew_time = now_text;
    l.lease_transitions = 0;
    absl::StatusOr<Json> created =
        client_.Create(LeasesResource(), config_.lease_namespace, EncodeLease(l));
    if (!created.ok()) return fail(created.status());
    absl::StatusOr<Lease> cl = DecodeLease(*created);
    if (!cl.ok()) return fail(cl.status());
    absl::MutexLock lock(&mu_);
    Observe(*cl, Record(*cl));
    last_error_.clear();
    return true;
  }
  if (!got.ok()) return fail(got.status());
  absl::StatusOr<Lease> old = DecodeLease(*got);
  if (!old.ok()) return fail(old.status());
  const std::string old_record = Record(*old);
  bool leader = false;
  {
    absl::MutexLock lock(&mu_);
    if (!observed_ || observed_record_ != old_record) Observe(*old, old_record);
    leader = observed_->holder_identity.value_or("") == config_.identity;
    const std::string holder = old->holder_identity.value_or("");
    const absl::Duration held_for = absl::Seconds(old->lease_duration_seconds.value_or(0));
    if (!holder.empty() && !leader && observed_time_ + held_for > now) {
      last_error_ = absl::StrCat("the lease is held by ", holder);
      return false;  // held by another and not expired
    }
  }
  Lease next = *old;  // keeps the raw object (and its resourceVersion) for the update
  next.holder_identity = config_.identity;
  next.lease_duration_seconds = duration_s;
  next.renew_time = now_text;
  if (leader) {
    if (!next.acquire_time) next.acquire_time = now_text;
  } else {
    next.acquire_time = now_text;
    next.lease_transitions = old->lease_transitions.value_or(0) + 1;
  }
  absl::StatusOr<Json> updated = client_.Update(LeasesResource(), config_.lease_namespace,
                                                config_.lease_name, EncodeLease(next));
  if (!updated.ok()) return fail(updated.status());
  absl::StatusOr<Lease> ul = DecodeLease(*updated);
  if (!ul.ok()) return fail(ul.status());
  absl::MutexLock lock(&mu_);
  Observe(*ul, Record(*ul));
  last_error_.clear();
  return true;
}

absl::Status LeaderElector::Release() {
  std::optional<Lease> mine;
  {
    absl::MutexLock lock(&mu_);
    if (!observed_ || observed_->holder_identity.value_or("") != config_.identity) {
      return absl::OkStatus();
    }
    mine = observed_;
  }
  const std::string now_text = FormatMicroTime(clock_.Now());
  Lease released = *mine;
  released.holder_identity = "";
  released.lease_duration_seconds = 1;
  released.renew_time = now_text;
  released.acquire_time = now_text;
  absl::StatusOr<Json> updated = client_.Update(LeasesResource(), config_.lease_namespace,
                                                config_.lease_name, EncodeLease(released));
  if (!updated.ok()) return updated.status();
  absl::StatusOr<Lease> ul = DecodeLease(*updated);
  if (!ul.ok()) return ul.status();
  absl::MutexLock lock(&mu_);
  Observe(*ul, Record(*ul));
  return absl::OkStatus();
}

bool LeaderElector::WaitJittered(absl::Duration d) {
  const double jitter = std::uniform_real_distribution<double>(0, kJitterFactor - 1)(rng_);
  return !stop_.WaitForNotificationWithTimeout(d * (1 + jitter));
}

void LeaderElector::Run() {
  // Acquire.
  while (!stop_.HasBeenNotified()) {
    if (TryAcquireOrRenew()) break;
    if (!WaitJittered(config_.retry_period)) return;
  }
  if (stop_.HasBeenNotified()) {
    (void)Release();
    return;
  }
  config_.log.Info("became leader", {{"lease", config_.lease_namespace + "/" + config_.lease_name},
                                     {"identity", config_.identity}});
  if (config_.on_started_leading) config_.on_started_leading();
  // Renew.
  bool lost = false;
  while (!stop_.HasBeenNotified() && !lost) {
    if (stop_.WaitForNotificationWithTimeout(config_.retry_period)) break;
    const absl::Time round = clock_.Now();
    for (;;) {
      if (TryAcquireOrRenew()) break;
      if (clock_.Now() - round >= config_.renew_deadline) {
        lost = true;
        break;
      }
      if (stop_.WaitForNotificationWithTimeout(config_.retry_period)) break;
    }
  }
  if (lost) {
    config_.log.Warn("lost leadership",
                     {{"lease", config_.lease_namespace + "/" + config_.lease_name},
                      {"identity", config_.identity},
                      {"error", last_error()}});
  } else if (config_.release_on_cancel) {
    if (absl::Status s = Release(); !s.ok()) {
      config_.log.Warn("releasing the lease failed", {{"error", std::string(s.message())}});
    }
  }
  {
    absl::MutexLock lock(&mu_);
    // Whatever the API says now, we no longer act as leader.
    if (observed_ && observed_->holder_identity.value_or("") == config_.identity && lost) {
      observed_->holder_identity = "";
    }
  }
  if (config_.on_stopped_leading) config_.on_stopped_leading();
}

void LeaderElector::Stop() {
  absl::MutexLock lock(&mu_);
  if (!stop_.HasBeenNotified()) stop_.Notify();
}

bool LeaderElector::IsLeader() const {
  absl::MutexLock lock(&mu_);
  return observed_ && observed_->holder_identity.value_or("") == config_.identity;
}

std::string LeaderElector::GetLeader() const {
  absl::MutexLock lock(&mu_);
  return observed_ ? observed_->holder_identity.value_or("") : "";
}

std::string LeaderElector::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

}  // namespace tessera::kube
