#include "sched/framework/scheduler.h"

#include <algorithm>
#include <map>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/gpu_model_name.h"
#include "sched/framework/cordoned_room.h"

namespace tessera::sched {

Scheduler::~Scheduler() = default;

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(const Profile& profile,
                                                             const PluginRegistry& registry,
                                                             ClusterState* state) {
  absl::Status s = ValidateProfile(profile, registry);
  if (!s.ok()) return s;
  std::unique_ptr<Scheduler> sch(new Scheduler());
  sch->profile_ = profile;
  sch->state_ = state;

  auto make = [&](const std::string& name, const PluginArgs& args) -> absl::StatusOr<Plugin*> {
    auto p = registry.Create(name, args);
    if (!p.ok()) return p.status();
    sch->owned_.push_back(std::move(*p));
    return sch->owned_.back().get();
  };
  auto qs = make(profile.queue_sort, {});
  if (!qs.ok()) return qs.status();
  sch->queue_sort_ = dynamic_cast<QueueSortPlugin*>(*qs);
  if (sch->queue_sort_ == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile.queueSort: plugin \"", profile.queue_sort, "\" is not a QueueSort"));
  }
  auto gc = make(profile.gpu_chooser, {});
  if (!gc.ok()) return gc.status();
  sch->gpu_chooser_ = dynamic_cast<GpuChooserPlugin*>(*gc);
  if (sch->gpu_chooser_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("profile.gpuChooser: plugin \"",
                                                   profile.gpu_chooser, "\" does not choose GPUs"));
  }
  for (size_t i = 0; i < profile.plugins.size(); ++i) {
    const PluginConfig& c = profile.plugins[i];
    auto p = make(c.name, c.args);
    if (!p.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("profile.plugins[", i, "]: ", p.status().message()));
    }
    Plugin* pl = *p;
    Named n{pl->Name(), c.weight};
    bool any = false;
    if (auto* x = dynamic_cast<PreFilterPlugin*>(pl))
      sch->pre_filters_.push_back({x, n}), any = true;
    if (auto* x = dynamic_cast<FilterPlugin*>(pl)) sch->filters_.push_back({x, n}), any = true;
    if (auto* x = dynamic_cast<ScorePlugin*>(pl)) sch->scorers_.push_back({x, n}), any = true;
    if (auto* x = dynamic_cast<ReservePlugin*>(pl)) sch->reservers_.push_back({x, n}), any = true;
    if (auto* x = dynamic_cast<PermitPlugin*>(pl)) sch->permits_.push_back({x, n}), any = true;
    if (auto* x = dynamic_cast<PostFilterPlugin*>(pl)) {
      sch->post_filters_.push_back({x, n});
      any = true;
    }
    if (auto* x = dynamic_cast<BindPlugin*>(pl)) sch->binders_.push_back({x, n}), any = true;
    if (!any) {
      return absl::InvalidArgumentError(absl::StrCat("profile.plugins[", i, "].name: \"", c.name,
                                                     "\" implements no extension point"));
    }
  }
  return sch;
}

ScheduleResult Scheduler::Schedule(const model::Job& job) { return Run(job, /*dry_run=*/false); }
ScheduleResult Scheduler::Evaluate(const model::Job& job) { return Run(job, /*dry_run=*/true); }

absl::Status Scheduler::Release(absl::string_view job_key) { return state_->Release(job_key); }

template <typename Visit>
void Scheduler::ForEachCandidate(const JobContext& ctx, const model::ResourceRequest& req,
                                 Visit&& visit) {
  const ClusterState& cs = *state_;
  switch (ctx.domain.level) {
    case model::TopologyLevel::kNode:
      visit(static_cast<NodeId>(ctx.domain.id));
      return;
    case model::TopologyLevel::kRack:
      for (NodeId id : cs.rack_nodes(ctx.domain.id)) {
        if (!visit(id)) return;
      }
      return;
    case model::TopologyLevel::kBlock:
      for (NodeId id : cs.block_nodes(ctx.domain.id)) {
        if (!visit(id)) return;
      }
      return;
    case model::TopologyLevel::kNone:
      break;
  }
  const CapacityIndex& ix = cs.index();
  const bool pack = ctx.job->placement == model::PlacementPreference::kPack;
  // Models to visit: the job's allowed ones; a member without GPUs may use
  // any node.
  absl::InlinedVector<ModelId, 8> models;
  if (req.gpus == 0 || ctx.any_model) {
    for (ModelId m = 0; m < cs.num_models(); ++m) models.push_back(m);
  } else {
    models.assign(ctx.allowed_models.begin(), ctx.allowed_models.end());
  }
  auto whole_buckets = [&](int from, int to, int step) -> bool {
    for (int k = from; k != to; k += step) {
      for (ModelId m : models) {
        for (NodeId id : ix.whole_bucket(m, k)) {
          if (!visit(id)) return false;
        }
      }
    }
    return true;
  };
  auto partial_buckets = [&](int from, int to, int step) -> bool {
    for (int d = from; d != to; d += step) {
      for (ModelId m : models) {
        for (NodeId id : ix.partial_bucket(m, d)) {
          if (!visit(id)) return false;
        }
      }
    }
    return true;
  };
  constexpr int kMaxK = model::kMaxGpusPerNode;
  if (req.fractional()) {
    int d0 = req.gpu_milli / 100;
    if (pack) {
      // Partly used GPUs first (tightest share first), then whole free GPUs.
      if (!partial_buckets(d0, CapacityIndex::kPartialBuckets, 1)) return;
      whole_buckets(1, kMaxK + 1, 1);
    } else {
      if (!whole_buckets(kMaxK, 0, -1)) return;
      partial_buckets(CapacityIndex::kPartialBuckets - 1, d0 - 1, -1);
    }
    return;
  }
  int g = req.gpus;
  if (pack) {
    whole_buckets(g, kMaxK + 1, 1);
  } else {
    whole_buckets(kMaxK, g - 1, -1);
  }
}

void Scheduler::CollectClasses(const JobContext& ctx, const model::MemberGroup& g,
                               std::map<std::string, int>* rejections, std::string* first_plugin,
                               int64_t* evaluated) {
  const model::ResourceRequest& req = g.resources;
  // Members with GPUs only need the classes with free GPU share.
  for (int list = 0; list < (req.gpus > 0 ? 1 : 2); ++list) {
    for (const ClassInfo& info : state_->class_infos(/*with_free_gpu=*/list == 0)) {
      // Like ForEachCandidate's capacity-index walk, classes whose nodes lack
      // the GPUs (model, whole GPUs or a large enough share) are not
      // candidates at all; Filter plugins decide on the rest.
      if (req.gpus > 0) {
        if (info.num_gpus == 0 || !ctx.AllowsModel(info.model)) continue;
        if (req.fractional() ? (info.max_partial < req.gpu_milli && info.whole_free == 0)
                             : info.whole_free < req.gpus) {
          continue;
        }
      }
      // Nor are nodes without the CPU (Assume would refuse them); when
      // explaining a failure, the Filter plugins give every reason.
      if (rejections == nullptr && req.cpu_milli > info.cpu_free) continue;
      NodeId id = info.rep;
      const NodeState& st = state_->state(id);
      NodeView nv{id, state_->node(id), st};
      ++*evaluated;
      bool ok = true;
      for (auto& [f, named] : filters_) {
        PluginStatus s = f->Filter(cycle_, ctx, g, nv);
        if (!s.ok()) {
          if (rejections != nullptr) {
            (*rejections)[s.reason()] += info.size;
            if (first_plugin->empty()) *first_plugin = std::string(named.name);
          }
          ok = false;
          break;
        }
      }
      if (!ok) continue;
      feasible_.push_back(id);
      class_weight_.push_back(info.size);
    }
  }
}

size_t Scheduler::PickBest(bool classes) {
  using TieBreak = Profile::TieBreak;
  TieBreak tb = profile_.tie_break;
  if (tb == TieBreak::kRandom && rng_ == nullptr) tb = TieBreak::kFirstCandidate;
  auto total = [&](size_t i) -> int64_t { return scorers_.empty() ? 0 : totals_[i]; };
  // The lowest node id an entry stands for.
  auto lowest = [&](size_t i) -> NodeId {
    return classes ? state_->class_info(state_->node_class(feasible_[i])).min_id : feasible_[i];
  };
  size_t best = 0;
  switch (tb) {
    case TieBreak::kFirstCandidate:
      for (size_t i = 1; i < feasible_.size(); ++i) {
        if (total(i) > total(best)) best = i;
      }
      return best;
    case TieBreak::kLowestNodeId: {
      NodeId best_id = lowest(0);
      for (size_t i = 1; i < feasible_.size(); ++i) {
        if (total(i) < total(best)) continue;
        NodeId id = lowest(i);
        if (total(i) > total(best) || id < best_id) {
          best = i;
          best_id = id;
        }
      }
      feasible_[best] = best_id;
      return best;
    }
    case TieBreak::kRandom: {
      // One draw over the tied entries, weighted by the nodes each stands
      // for, so every tied node is equally likely.
      int64_t tied = 0;
      for (size_t i = 0; i < feasible_.size(); ++i) {
        int64_t w = classes ? class_weight_[i] : 1;
        if (total(i) > total(best)) {
          best = i;
          tied = w;
        } else if (total(i) == total(best) && i > 0) {
          tied += w;
        } else if (i == 0) {
          tied = w;
        }
      }
      int64_t pick = std::uniform_int_distribution<int64_t>(0, tied - 1)(*rng_);
      const int64_t top = total(best);
      for (size_t i = 0; i < feasible_.size(); ++i) {
        if (total(i) != top) continue;
        int64_t w = classes ? class_weight_[i] : 1;
        if (pick < w) {
          best = i;
          break;
        }
        pick -= w;
      }
      if (classes) {
        const std::vector<NodeId>& m = state_->class_nodes(state_->node_class(feasible_[best]));
        feasible_[best] = m[std::uniform_int_distribution<size_t>(0, m.size() - 1)(*rng_)];
      }
      return best;
    }
  }
  return best;
}

bool Scheduler::PlaceMember(const JobContext& ctx, int group, int member, std::string* why,
                            std::string* why_plugin, int64_t* evaluated) {
  const model::MemberGroup& g = ctx.job->groups[group];
  const int limit = profile_.nodes_to_score;
  feasible_.clear();
  class_weight_.clear();
  std::map<std::string, int> rejections;  // "reason" -> nodes; filled only on rejection
  std::string first_plugin;
  int64_t short_of_gpus = 0;  // domain nodes skipped by the index-level check
  const absl::Time filter_start = Now();
  const int64_t evaluated_before = *evaluated;
  const bool whole = g.resources.gpus > 0 && !g.resources.fractional();
  const bool dedupe = profile_.dedupe_equivalent_nodes && limit == 0 &&
                      ctx.domain.level == model::TopologyLevel::kNone && cycle_.placed().empty();
  if (dedupe) {
    CollectClasses(ctx, g, nullptr, &first_plugin, evaluated);
  } else {
    ForEachCandidate(ctx, g.resources, [&](NodeId id) -> bool {
      const NodeState& st = state_->state(id);
      if (!st.indexed()) return true;
      // The check the capacity index makes implicitly outside domains; here it
      // saves running the filter chain on full nodes of a rack or block.
      if (whole && st.whole_free < g.resources.gpus) {
        ++short_of_gpus;
        return true;
      }
      NodeView nv{id, state_->node(id), st};
      ++*evaluated;
      for (auto& [f, named] : filters_) {
        PluginStatus s = f->Filter(cycle_, ctx, g, nv);
        if (!s.ok()) {
          ++rejections[s.reason()];
          if (first_plugin.empty()) first_plugin = std::string(named.name);
          return true;
        }
      }
      feasible_.push_back(id);
      return limit == 0 || static_cast<int>(feasible_.size()) < limit;
    });
  }

  filter_phase_.time += Now() - filter_start;
  filter_phase_.candidates += *evaluated - evaluated_before + short_of_gpus;
  filter_phase_.feasible += static_cast<int64_t>(feasible_.size());

  absl::InlinedVector<GpuGrant, 8> grants;
  while (!feasible_.empty()) {
    const absl::Time score_start = Now();
    // Score the feasible nodes and pick the best (ties per profile).
    if (!scorers_.empty() && (feasible_.size() > 1 || dedupe)) {
      totals_.assign(feasible_.size(), 0);
      for (auto& [sp, named] : scorers_) {
        plugin_scores_.resize(feasible_.size());
        for (size_t i = 0; i < feasible_.size(); ++i) {
          NodeId id = feasible_[i];
          plugin_scores_[i] =
              sp->Score(cycle_, ctx, g, NodeView{id, state_->node(id), state_->state(id)});
        }
        sp->Normalize(ctx, absl::MakeSpan(plugin_scores_));
        for (size_t i = 0; i < feasible_.size(); ++i)
          totals_[i] += plugin_scores_[i] * named.weight;
      }
    }
    size_t best = PickBest(dedupe);
    const absl::Time reserve_start = Now();
    score_phase_.time += reserve_start - score_start;
    score_phase_.candidates += static_cast<int64_t>(feasible_.size());
    NodeId id = feasible_[best];
    NodeView nv{id, state_->node(id), state_->state(id)};
    grants.clear();
    if (g.resources.gpus > 0 && !gpu_chooser_->ChooseGpus(ctx, g, nv, &grants)) {
      ++rejections["no suitable GPU set"];
      feasible_.erase(feasible_.begin() + best);
      if (dedupe) class_weight_.erase(class_weight_.begin() + best);
      continue;
    }
    MemberPlacement mp;
    mp.group = group;
    mp.member = member;
    mp.node = id;
    mp.gpus = grants;
    mp.cpu_milli = g.resources.cpu_milli;
    mp.memory_mib = g.resources.memory_mib;
    mp.scalars = g.resources.scalars;
    absl::Status as = state_->Assume(mp);
    if (!as.ok()) {
      // A Filter/GpuChooser bug: never over-allocate; treat as not fitting.
      ++rejections[std::string(as.message())];
      feasible_.erase(feasible_.begin() + best);
      if (dedupe) class_weight_.erase(class_weight_.begin() + best);
      continue;
    }
    cycle_.mutable_placed().push_back(std::move(mp));
    for (auto& [rp, named] : reservers_) {
      PluginStatus s = rp->Reserve(cycle_, ctx, cycle_.placed().back());
      if (!s.ok()) {
        // Undo this member only; the caller rolls back the rest.
        MemberPlacement undo = cycle_.placed().back();
        for (auto& [rp2, n2] : reservers_) rp2->Unreserve(cycle_, ctx, undo);
        state_->Forget(undo);
        cycle_.mutable_placed().pop_back();
        *why = s.reason();
        *why_plugin = std::string(named.name);
        return false;
      }
    }
    reserve_phase_.time += Now() - reserve_start;
    ++reserve_phase_.feasible;
    return true;
  }
  if (dedupe && rejections.empty()) {
    // The fast path skipped the tally; redo the filter pass to explain.
    feasible_.clear();
    class_weight_.clear();
    int64_t ignored = 0;
    CollectClasses(ctx, g, &rejections, &first_plugin, &ignored);
    feasible_.clear();
    class_weight_.clear();
  }
  // Explain, Kubernetes style: "0/N nodes fit: 5 reason-a; 3 reason-b".
  if (short_of_gpus > 0) rejections["Insufficient GPUs"] += short_of_gpus;
  std::vector<std::string> parts;
  int64_t total = 0;
  for (auto& [r, n] : rejections) {
    parts.push_back(absl::StrCat(n, " ", r));
    total += n;
  }
  std::string where = ctx.domain.level == model::TopologyLevel::kNone
                          ? std::string("the cluster")
                          : absl::StrCat(model::TopologyLevelName(ctx.domain.level), " ",
                                         ctx.domain.level == model::TopologyLevel::kRack
                                             ? state_->rack_name(ctx.domain.id)
                                         : ctx.domain.level == model::TopologyLevel::kBlock
                                             ? state_->block_name(ctx.domain.id)
                                             : state_->node(ctx.domain.id).name);
  if (total == 0) {
    *why = absl::StrCat("member group ", g.name.empty() ? absl::StrCat(group) : g.name,
                        ": no schedulable node in ", where, " has ",
                        g.resources.fractional() ? absl::StrCat(g.resources.gpu_milli, " milli-GPU")
                                                 : absl::StrCat(g.resources.gpus, " free GPUs"),
                        ctx.any_model ? "" : " of an allowed model");
    // Say when cordoned nodes (a drain) have the room (cordoned_room.h).
    if (!g.resources.fractional() && g.resources.gpus > 0) {
      const CordonedRoom room = FindCordonedRoom(*state_, ctx, g.resources.gpus);
      if (room.nodes > 0) {
        absl::StrAppend(why, " (", room.nodes, " cordoned node", room.nodes > 1 ? "s have" : " has",
                        " the room, e.g. ", room.example, " with ", room.example_free,
                        " free GPUs)");
      }
    }
    *why_plugin = "resource-fit";
  } else {
    *why = absl::StrCat("member group ", g.name.empty() ? absl::StrCat(group) : g.name, ": 0/",
                        total, " candidate nodes in ", where, " fit: ", absl::StrJoin(parts, "; "));
    *why_plugin = first_plugin;
  }
  return false;
}

void Scheduler::Rollback(const JobContext& ctx) {
  auto& placed = cycle_.mutable_placed();
  for (auto it = placed.rbegin(); it != placed.rend(); ++it) {
    for (auto r = reservers_.rbegin(); r != reservers_.rend(); ++r) {
      r->first->Unreserve(cycle_, ctx, *it);
    }
    state_->Forget(*it);
  }
  placed.clear();
}

bool Scheduler::TryDomain(JobContext& ctx, ScheduleResult* result, FailureSummary* failure) {
  const model::Job& job = *ctx.job;
  std::string why, why_plugin;
  for (int gi = 0; gi < static_cast<int>(job.groups.size()); ++gi) {
    for (int m = 0; m < job.groups[gi].count; ++m) {
      if (!PlaceMember(ctx, gi, m, &why, &why_plugin, &result->nodes_evaluated)) {
        break;  // the group's remaining members are identical: they fail too
      }
    }
  }
  int32_t placed = static_cast<int32_t>(cycle_.placed().size());
  failure->best_members_placed = std::max(failure->best_members_placed, placed);
  if (placed < ctx.min_member) {
    if (failure->reason.empty() || placed >= failure->best_members_placed) {
      failure->reason = why.empty() ? absl::StrCat("only ", placed, " of ", ctx.min_member,
                                                   " required members fit")
                                    : why;
      failure->plugin = why_plugin;
    }
    Rollback(ctx);
    return false;
  }
  const absl::Time permit_start = Now();
  for (auto& [pp, named] : permits_) {
    PluginStatus s = pp->Permit(cycle_, ctx, cycle_.placed());
    if (!s.ok()) {
      failure->reason = s.reason();
      failure->plugin = std::string(named.name);
      permit_phase_.time += Now() - permit_start;
      Rollback(ctx);
      return false;
    }
  }
  permit_phase_.time += Now() - permit_start;
  ++permit_phase_.feasible;
  return true;
}

ScheduleResult Scheduler::Run(const model::Job& job, bool dry_run) {
  ++stats_.cycles;
  ScheduleResult result;
  cycle_.Clear();
  prefilter_phase_ = filter_phase_ = score_phase_ = reserve_phase_ = permit_phase_ = bind_phase_ =
      Phase{};
  const absl::Time cycle_start = Now();
  Domain won;
  auto finish = [&](ScheduleResult::Outcome o) {
    result.outcome = o;
    absl::Time t = cycle_start;
    result.trace.spans.reserve(6);
    auto span = [&](const char* name, const Phase& p) {
      result.trace.spans.push_back(TraceSpan{name, t, p.time, p.candidates, p.feasible});
      t += p.time;
    };
    span("prefilter", prefilter_phase_);
    span("filter", filter_phase_);
    span("score", score_phase_);
    span("reserve", reserve_phase_);
    span("permit", permit_phase_);
    span("bind", bind_phase_);
    if (!explain_) {
      // Explanations are opt-in (set_explain); spans are always recorded.
    } else if (o == ScheduleResult::Outcome::kPlaced) {
      Explain(job, won, &result);
    } else {
      result.trace.explanation = absl::StrCat(
          o == ScheduleResult::Outcome::kError ? "error: " : "waiting: ", result.reason,
          result.victims.empty() ? ""
                                 : absl::StrCat(" (preemption of ", result.victims.size(),
                                                " job(s) would make room)"));
    }
    stats_.nodes_evaluated += result.nodes_evaluated;
    if (o == ScheduleResult::Outcome::kPlaced) ++stats_.placed;
    if (o == ScheduleResult::Outcome::kUnschedulable) ++stats_.unschedulable;
    if (o == ScheduleResult::Outcome::kError) ++stats_.errors;
    return result;
  };

  absl::Status valid = model::ValidateJob(job, nullptr);
  if (!valid.ok()) {
    result.reason = std::string(valid.message());
    result.unresolvable = true;
    return finish(ScheduleResult::Outcome::kUnschedulable);
  }
  JobContext ctx;
  ctx.job = &job;
  ctx.cluster = state_;
  ctx.min_member = job.effective_min_member();
  if (!job.gpu_models.empty()) {
    ctx.any_model = false;
    // Short aliases ("H100") match NVML's names ("NVIDIA H100 80GB HBM3"): model/gpu_model_name.h.
    // In the job's order of preference.
    for (const std::string& name : job.gpu_models) {
      for (ModelId m = 0; m < state_->num_models(); ++m) {
        if (model::GpuModelMatches(name, state_->model_name(m)) &&
            std::find(ctx.allowed_models.begin(), ctx.allowed_models.end(), m) ==
                ctx.allowed_models.end()) {
          ctx.allowed_models.push_back(m);
        }
      }
    }
  }

  PreFilterResult pre;
  const absl::Time prefilter_start = Now();
  for (auto& [pf, named] : pre_filters_) {
    PreFilterResult one;
    PluginStatus s = pf->PreFilter(cycle_, ctx, &one);
    if (s.skipped()) continue;
    if (!s.ok()) {
      prefilter_phase_.time = Now() - prefilter_start;
      result.reason = s.reason();
      result.plugin = std::string(named.name);
      result.unresolvable = s.code() == PluginStatus::Code::kUnschedulableAndUnresolvable;
      if (s.code() == PluginStatus::Code::kError) return finish(ScheduleResult::Outcome::kError);
      if (!result.unresolvable) {
        FailureSummary f{result.reason, result.plugin, ctx.min_member, 0};
        for (auto& [post, pn] : post_filters_) {
          PostFilterResult r = post->PostFilter(cycle_, ctx, f);
          if (r.status.ok()) {
            result.victims = std::move(r.victims);
            break;
          }
        }
      }
      return finish(ScheduleResult::Outcome::kUnschedulable);
    }
    if (!one.domains.empty() && pre.domains.empty()) pre = std::move(one);
  }
  prefilter_phase_.time = Now() - prefilter_start;
  prefilter_phase_.feasible = static_cast<int64_t>(pre.domains.size());

  std::vector<Domain> attempts = pre.domains;
  if (attempts.size() > static_cast<size_t>(profile_.max_domains)) {
    attempts.resize(profile_.max_domains);
  }
  if (attempts.empty() || pre.fallback_to_cluster) attempts.push_back(Domain{});

  FailureSummary failure;
  failure.members_needed = ctx.min_member;
  bool ok = false;
  for (const Domain& d : attempts) {
    ctx.domain = d;
    ++result.domains_tried;
    if (TryDomain(ctx, &result, &failure)) {
      ok = true;
      won = d;
      break;
    }
  }
  if (!ok) {
    result.reason = failure.reason;
    result.plugin = failure.plugin;
    for (auto& [post, named] : post_filters_) {
      PostFilterResult r = post->PostFilter(cycle_, ctx, failure);
      if (r.status.ok()) {
        result.victims = std::move(r.victims);
        if (!r.message.empty()) result.reason = absl::StrCat(result.reason, "; ", r.message);
        break;
      }
    }
    return finish(ScheduleResult::Outcome::kUnschedulable);
  }

  result.placement.job_key = job.key();
  result.placement.members = cycle_.placed();
  if (dry_run) {
    Rollback(ctx);
    return finish(ScheduleResult::Outcome::kPlaced);
  }
  const absl::Time bind_start = Now();
  for (auto& [bp, named] : binders_) {
    PluginStatus s = bp->Bind(ctx, result.placement);
    if (s.skipped()) continue;
    if (!s.ok()) {
      Rollback(ctx);
      result.reason = absl::StrCat("bind failed: ", s.reason());
      result.plugin = std::string(named.name);
      result.placement.members.clear();
      bind_phase_.time = Now() - bind_start;
      return finish(ScheduleResult::Outcome::kError);
    }
    break;
  }
  absl::Status b = state_->Bind(result.placement);
  if (!b.ok()) {
    Rollback(ctx);
    result.reason = std::string(b.message());
    result.placement.members.clear();
    bind_phase_.time = Now() - bind_start;
    return finish(ScheduleResult::Outcome::kError);
  }
  cycle_.mutable_placed().clear();
  bind_phase_.time = Now() - bind_start;
  return finish(ScheduleResult::Outcome::kPlaced);
}

}  // namespace tessera::sched

namespace tessera::sched {

void Scheduler::Explain(const model::Job& job, const Domain& won, ScheduleResult* r) const {
  const ClusterState& cs = *state_;
  std::vector<std::string> names;
  absl::flat_hash_set<int> racks, blocks;
  model::LinkClass worst = model::LinkClass::kSelf;
  for (const MemberPlacement& m : r->placement.members) {
    names.push_back(cs.node(m.node).name);
    racks.insert(cs.state(m.node).rack);
    blocks.insert(cs.state(m.node).block);
    const model::NodeTopology& t = cs.node(m.node).topology;
    for (size_t i = 0; i < m.gpus.size(); ++i) {
      for (size_t j = i + 1; j < m.gpus.size(); ++j) {
        worst = std::max(worst, t.link(m.gpus[i].gpu, m.gpus[j].gpu));
      }
    }
  }
  std::string where;
  if (racks.size() == 1) {
    int rack = *racks.begin();
    where = absl::StrCat("rack ", cs.rack_name(rack), " (block ",
                         cs.block_name(cs.rack_block(rack)), ")");
  } else if (blocks.size() == 1) {
    where = absl::StrCat(racks.size(), " racks of block ", cs.block_name(*blocks.begin()));
  } else {
    where = absl::StrCat(racks.size(), " racks in ", blocks.size(), " blocks");
  }
  std::vector<std::string> why;
  const model::TopologyLevel level = job.topology.level;
  const bool pack = job.placement == model::PlacementPreference::kPack;
  if (level != model::TopologyLevel::kNone) {
    std::string lv(model::TopologyLevelName(level));
    if (won.level != model::TopologyLevel::kNone) {
      why.push_back(absl::StrCat("topology ", job.topology.required ? "required" : "preferred", " ",
                                 lv, "; ", pack ? "tightest" : "emptiest", " of ",
                                 prefilter_phase_.feasible, " ", lv, "s that fit"));
    } else {
      why.push_back(absl::StrCat("topology preferred ", lv, "; no single ", lv,
                                 " had room, so the gang spans several"));
    }
  }
  why.push_back(pack ? "pack: fullest feasible nodes first" : "spread: emptiest nodes first");
  if (worst != model::LinkClass::kSelf) {
    why.push_back(
        absl::StrCat("each member's GPUs linked by ", model::LinkClassName(worst), " or better"));
  }
  r->trace.explanation =
      absl::StrCat("placed ", r->placement.members.size(), " member(s) on ", where, ": nodes ",
                   CompressNodeNames(names), "; because ", absl::StrJoin(why, "; "));
}

}  // namespace tessera::sched
