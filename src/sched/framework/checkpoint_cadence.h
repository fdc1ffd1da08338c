// Checkpoint cadence from the failure rate (Young/Daly).
//
// Algorithm: a gang on g GPUs, each failing independently with mean time
// between failures M_gpu, fails as a set with MTBF M = M_gpu / g. Writing a
// checkpoint costs c seconds of run; a failure loses on average half an
// interval of work. The expected overhead per second of work is
//   c / T + T / (2 M)
// which is least at T* = sqrt(2 c M) (Young 1974; Daly 2006 adds higher-order
// terms that matter only when c is not small against M). When c >= M / 2 the
// first-order model breaks down (a checkpoint would cost about as much as
// the work it saves) and T = M is used, as Daly recommends for c >= 2M.
//
// Pure functions: no I/O, no clock; the server's controller (which writes
// status.checkpointIntervalSeconds) and `tessera sim replay --cadence
// young-daly` both call them, so they agree on every job's interval.
#pragma once

#include <cstdint>

namespace tessera::sched {

// Per-GPU MTBF used when neither configuration nor observation gives one:
// 50,000 GPU-hours (about 5.7 years). Meta's Llama 3 report (2024) counts 419
// unexpected interruptions in 54 days on 16,384 H100s, ~78% of them hardware:
// 16,384 x 54 x 24 / 419 = 50,700 GPU-hours per interruption. (The seed's
// 25,000-GPU scenario, a failure every 2.5 h, is 62,500 GPU-hours.)
inline constexpr double kDefaultGpuMtbfSeconds = 50000.0 * 3600.0;

// Fewest failures from which an observed rate is trusted over the default.
inline constexpr int64_t kMinObservedGpuFailures = 3;

// The Young/Daly interval in seconds for a gang of `gpus` GPUs whose
// checkpoint costs `cost_s` seconds, each GPU failing with mean time between
// failures `gpu_mtbf_s`. Contract: returns 0 (no interval can be chosen) when
// any argument is not positive or not finite; otherwise
// sqrt(2 cost_s (gpu_mtbf_s / gpus)) when cost_s < (gpu_mtbf_s / gpus) / 2,
// else gpu_mtbf_s / gpus (so always > 0 then).
double YoungDalyIntervalSeconds(double cost_s, double gpu_mtbf_s, int64_t gpus);

// The interval Tessera gives a job, in whole seconds: 0 when
// YoungDalyIntervalSeconds is 0, else that rounded to the nearest second and
// at least 1. The controller writes it as status.checkpointIntervalSeconds;
// the simulator's --cadence young-daly uses the same value.
int64_t CheckpointIntervalSeconds(double cost_s, double gpu_mtbf_s, int64_t gpus);

// Per-GPU MTBF estimated from a fleet's history: `failures` GPU failures
// seen over `gpu_seconds` GPU-seconds of observation. Returns `fallback_s`
// when fewer than kMinObservedGpuFailures failures were seen or
// gpu_seconds is not positive (too little evidence), else
// gpu_seconds / failures.
double GpuMtbfSeconds(int64_t failures, double gpu_seconds, double fallback_s);

}  // namespace tessera::sched
