// ArrivalForecast: what a scheduler knows of the work still to arrive.
//
// The look-ahead admission (lookahead.h) weighs a placement against it. Who
// fills it in decides what "known" means: `tessera sim pack` sums the next
// pods of its arrival stream (a window of the stream, or all of it); a live
// scheduler would sum its pending queue. Plain data, no invariants beyond
// non-negative sums.
#pragma once

#include <cstdint>

namespace tessera::sched::pack {

struct ArrivalForecast {
  // GPU milli asked by arriving pods that take whole GPUs (1000 milli per
  // GPU, any GPU count): work that fills a free GPU completely.
  int64_t whole_gpu_milli = 0;
  // Milli-CPU asked by every arriving pod (GPU or not): when it exceeds the
  // fleet's free CPU, CPU rather than GPUs limits what the arrivals can use.
  int64_t cpu_milli = 0;
};

}  // namespace tessera::sched::pack
