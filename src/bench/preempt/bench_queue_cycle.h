// `tessera bench queue-cycle`: the cost of one QueueManager::Cycle with a
// large backlog, on a full 100,000-GPU fleet.
//
// 12,500 nodes x 8 H100, 32 nodes per rack; two organisations of four teams
// (each guaranteed an eighth of the GPUs; --no-guarantees: weights only); 30,000
// research/development jobs submitted to fill the fleet (those that do not fit are dropped); then
// --pending waiting development jobs (1..64 GPUs, 30% of gangs rack-bound, --production (5%)
// production priority) and --cycles cycles, alternating a churn cycle (--churn running jobs finish
// and as many are submitted, a minute later) and a quiet cycle (one arrival, a second later).
// Prints one JSON object: thread CPU time per cycle (p50, p99, mean) of each kind, Schedule
// attempts per cycle, jobs started and preemptions. Two runs may differ a little in what they
// decide (victims of equal cost are found in hash-map order, which absl seeds per process), so
// compare builds on the CPU figures, not on the decisions.
#pragma once

#include "CLI/CLI.hpp"

namespace tessera::bench {

void RegisterBenchQueueCycleCommands(CLI::App& bench);

}  // namespace tessera::bench
