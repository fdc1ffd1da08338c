#include "controller/read_ahead_parser.h"

#include <algorithm>

#include "api/store_layout.h"

namespace tessera::controller {

ReadAheadParser::ReadAheadParser(const std::vector<store::KeyValue>& values)
    : values_(values), chunks_((values.size() + kChunk - 1) / kChunk) {
  if (chunks_ > 0) helper_ = std::thread([this] { Run(); });
}

ReadAheadParser::~ReadAheadParser() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (helper_.joinable()) helper_.join();
}

void ReadAheadParser::Run() {
  for (size_t c = 0; c < chunks_; ++c) {
    {
      absl::MutexLock l(&mu_);
      // Chunk c's buffer is free once the consumer has moved past chunk c - kRing.
      auto free_or_stopped = [this, c] { return stop_ || c < released_ + kRing; };
      mu_.Await(absl::Condition(&free_or_stopped));
      if (stop_) break;
    }
    std::vector<absl::StatusOr<nlohmann::json>>& buf = ring_[c % kRing];
    buf.clear();  // chunk c - kRing's objects, freed on this thread
    const size_t end = std::min(values_.size(), (c + 1) * kChunk);
    for (size_t i = c * kChunk; i < end; ++i) buf.push_back(api::ParseStored(values_[i].value));
    absl::MutexLock l(&mu_);
    parsed_ = c + 1;
  }
  {
    absl::MutexLock l(&mu_);
    auto stopped = [this] { return stop_; };
    mu_.Await(absl::Condition(&stopped));
  }
  // The consumer is done (the destructor runs): the last chunks are freed on this thread too.
  for (auto& buf : ring_) buf.clear();
}

const absl::StatusOr<nlohmann::json>& ReadAheadParser::Next() {
  const size_t c = next_ / kChunk;
  absl::MutexLock l(&mu_);
  if (next_ % kChunk == 0) released_ = c;  // moving into chunk c hands chunk c - 1 back
  auto ready = [this, c] { return parsed_ > c; };
  mu_.Await(absl::Condition(&ready));
  return ring_[c % kRing][next_++ % kChunk];
}

}  // namespace tessera::controller
