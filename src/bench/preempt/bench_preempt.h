// `tessera bench preempt`: preemption decisions on a full 100,000-GPU fleet.
//
// 12,500 nodes x 8 H100 (NVSwitch), 32 nodes per rack; 20,000 running jobs
// of mixed sizes (1..64 GPUs; large gangs often rack-bound) and priorities
// (development, research, production); then a stream of high-priority gangs
// (8..128 GPUs, half rack-bound) that can only run by preempting. Each
// decision is one QueueManager::Cycle: the failed placement, the victim
// search (PostFilter) and the dry-run verification. Victims are then killed,
// the preemptor is placed and finished, and victims that found no room again
// are dropped, so every decision sees a full fleet.
// Prints one JSON object: preempt_p50_us, preempt_p99_us, victims per
// decision, GPUs evicted vs needed.
#pragma once

#include "CLI/CLI.hpp"

namespace tessera::bench {

void RegisterBenchPreemptCommands(CLI::App& bench);

}  // namespace tessera::bench
