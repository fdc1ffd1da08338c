// DecisionTrace: what one scheduling cycle did and why, for people.
//
// The runner records one span per extension-point phase (prefilter, filter,
// score, reserve, permit, bind) with its time and candidate counts, and an
// explanation a person can act on: "placed 8 members on rack r012 (block
// b01): nodes n00401-n00408; topology required rack, tightest of 3 racks that
// fit" or "waiting: needs 64 GPUs in one rack; largest free in any rack: 40".
// Servers log it, export it as OTLP spans, and show it in `describe job`.
// Times come from an injected Clock (none: zero durations), never read here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace tessera::sched {

struct TraceSpan {
  std::string name;  // prefilter | filter | score | reserve | permit | bind
  absl::Time start = absl::InfinitePast();
  absl::Duration duration = absl::ZeroDuration();
  int64_t candidates = 0;  // nodes looked at
  int64_t feasible = 0;    // nodes that passed
};

struct DecisionTrace {
  std::vector<TraceSpan> spans;
  std::string explanation;
};

// "n00401-n00408, n00512" from node names (runs of consecutive numeric
// suffixes with one prefix are folded); at most `max_items` items, then "+N more".
std::string CompressNodeNames(std::vector<std::string> names, int max_items = 8);

}  // namespace tessera::sched
