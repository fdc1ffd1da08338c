#include "server/resource_quota.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "api/object_codec.h"
#include "nlohmann/json.hpp"

namespace tessera::server {

void QuotaGate::Written(const api::KindInfo& kind) {
  if (kind.kind == "ResourceQuota") epoch_.fetch_add(1);
}

absl::StatusOr<std::shared_ptr<const std::vector<QuotaGate::Quota>>> QuotaGate::QuotasOf(
    const std::string& ns) {
  // Read before the store: a quota written meanwhile bumps the epoch past this one, so what is
  // read now is not kept beyond the next check.
  const int64_t epoch = epoch_.load();
  {
    absl::MutexLock l(&cache_mu_);
    auto it = cache_.find(ns);
    if (it != cache_.end() && it->second.epoch == epoch) return it->second.quotas;
  }
  const api::KindInfo* kind = api::KindByPlural("resourcequotas");
  auto quotas = std::make_shared<std::vector<Quota>>();
  store::ListOptions opts;
  while (kind != nullptr) {
    absl::StatusOr<store::ListResult> page = store_.List(api::StorePrefix(*kind, ns), opts);
    if (!page.ok()) return page.status();
    for (const store::KeyValue& kv : page->kvs) {
      nlohmann::json obj = nlohmann::json::parse(kv.value, nullptr, /*allow_exceptions=*/false);
      if (!obj.is_object()) continue;
      const nlohmann::json* hard = nullptr;
      if (auto spec = obj.find("spec"); spec != obj.end() && spec->is_object()) {
        if (auto h = spec->find("hard"); h != spec->end() && h->is_object()) hard = &*h;
      }
      if (hard == nullptr) continue;
      Quota q{obj["metadata"].value("name", ""), {}};
      for (auto it = hard->begin(); it != hard->end(); ++it) {
        if (it->is_number_integer()) q.hard.emplace_back(it.key(), it->get<int64_t>());
      }
      quotas->push_back(std::move(q));
    }
    if (!page->more) break;
    opts.continue_after = page->next_key;
  }
  absl::MutexLock l(&cache_mu_);
  cache_[ns] = Cached{epoch, quotas};
  return std::shared_ptr<const std::vector<Quota>>(std::move(quotas));
}

absl::Status QuotaGate::LimitsFor(const Demand& d, std::vector<Limit>& out) {
  if (d.kind == nullptr || !d.kind->namespaced || d.count <= 0) return absl::OkStatus();
  absl::StatusOr<std::shared_ptr<const std::vector<Quota>>> quotas = QuotasOf(d.ns);
  if (!quotas.ok()) return quotas.status();
  const std::string key = absl::StrCat("count/", d.kind->plural);
  for (const Quota& q : **quotas) {
    for (const auto& [resource, hard] : q.hard) {
      if (resource == key) out.push_back(Limit{q.name, hard, &d});
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> QuotaGate::Count(const Demand& d, int64_t cap) {
  store::ListOptions opts;
  opts.limit = std::max<int64_t>(std::min<int64_t>(cap, 1000), 1);
  int64_t n = 0;
  while (true) {
    absl::StatusOr<store::ListResult> page = store_.List(api::StorePrefix(*d.kind, d.ns), opts);
    if (!page.ok()) return page.status();
    n += static_cast<int64_t>(page->kvs.size());
    if (!page->more || n >= cap) return n;
    opts.continue_after = page->next_key;
  }
}

absl::Status QuotaGate::Create(const std::vector<Demand>& demands,
                               absl::FunctionRef<absl::Status()> write) {
  std::vector<Limit> limits;
  for (const Demand& d : demands) {
    if (absl::Status s = LimitsFor(d, limits); !s.ok()) return s;
  }
  if (limits.empty()) return write();
  absl::MutexLock lock(&mu_);
  for (const Limit& l : limits) {
    const Demand& d = *l.demand;
    absl::StatusOr<int64_t> used = Count(d, l.hard + 1);
    if (!used.ok()) return used.status();
    if (*used + d.count > l.hard) {
      // A quota lowered below what is stored: the count stopped at hard + 1.
      const std::string res = absl::StrCat("count/", d.kind->plural);
      const std::string used_text =
          *used > l.hard ? absl::StrCat("more than ", l.hard) : absl::StrCat(*used);
      return absl::PermissionDeniedError(
          absl::StrCat("exceeded quota: ", l.quota, ", requested: ", res, "=", d.count,
                       ", used: ", res, "=", used_text, ", limited: ", res, "=", l.hard));
    }
  }
  return write();
}

}  // namespace tessera::server
