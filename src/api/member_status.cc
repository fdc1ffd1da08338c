#include "api/member_status.h"

#include <csignal>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "api/store_layout.h"

namespace tessera::api {

using Json = nlohmann::json;

const char* MemberStateName(MemberState s) {
  switch (s) {
    case MemberState::kStarting:
      return "Starting";
    case MemberState::kRunning:
      return "Running";
    case MemberState::kExited:
      return "Exited";
    case MemberState::kFailed:
      return "Failed";
  }
  return "Starting";
}

std::optional<MemberState> ParseMemberState(absl::string_view s) {
  for (MemberState m : {MemberState::kStarting, MemberState::kRunning, MemberState::kExited,
                        MemberState::kFailed}) {
    if (s == MemberStateName(m)) return m;
  }
  return std::nullopt;
}

Json ToJson(const MemberStatus& m) {
  Json j = {
      {"member", m.member}, {"generation", m.generation}, {"state", MemberStateName(m.state)}};
  if (m.exit_code) j["exitCode"] = *m.exit_code;
  if (!m.reason.empty()) j["reason"] = m.reason;
  if (!m.message.empty()) j["message"] = m.message;
  if (!m.node.empty()) j["node"] = m.node;
  if (m.last_checkpoint) {
    Json c = {{"step", m.last_checkpoint->step}};
    if (!m.last_checkpoint->path.empty()) c["path"] = m.last_checkpoint->path;
    if (m.last_checkpoint->time != absl::InfinitePast()) {
      c["time"] = Timestamp(m.last_checkpoint->time);
    }
    j["lastCheckpoint"] = std::move(c);
  }
  if (m.time != absl::InfinitePast()) j["time"] = Timestamp(m.time);
  return j;
}

namespace {

absl::Status Bad(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

}  // namespace

absl::StatusOr<MemberStatus> MemberStatusFromJson(const Json& j) {
  if (!j.is_object()) return Bad("members[]", "must be an object");
  MemberStatus m;
  auto member = j.find("member");
  if (member == j.end() || !member->is_string() || member->get_ref<const std::string&>().empty()) {
    return Bad("member", "must be a non-empty string");
  }
  m.member = member->get<std::string>();
  auto gen = j.find("generation");
  if (gen == j.end() || !gen->is_number_integer() || gen->get<int64_t>() < 0) {
    return Bad("generation", "must be an integer >= 0");
  }
  m.generation = gen->get<int64_t>();
  auto state = j.find("state");
  std::optional<MemberState> s = state != j.end() && state->is_string()
                                     ? ParseMemberState(state->get<std::string>())
                                     : std::nullopt;
  if (!s) return Bad("state", "must be one of Starting, Running, Exited, Failed");
  m.state = *s;
  if (auto c = j.find("exitCode"); c != j.end() && !c->is_null()) {
    if (!c->is_number_integer()) return Bad("exitCode", "must be an integer");
    m.exit_code = c->get<int64_t>();
  }
  auto text = [&](const char* key, std::string* out) -> absl::Status {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_string()) return Bad(key, "must be a string");
    *out = it->get<std::string>();
    return absl::OkStatus();
  };
  if (absl::Status st = text("reason", &m.reason); !st.ok()) return st;
  if (absl::Status st = text("message", &m.message); !st.ok()) return st;
  if (absl::Status st = text("node", &m.node); !st.ok()) return st;
  std::string time;
  if (absl::Status st = text("time", &time); !st.ok()) return st;
  if (!time.empty() && !ParseTimestamp(time, &m.time)) return Bad("time", "must be RFC 3339");
  if (auto c = j.find("lastCheckpoint"); c != j.end() && !c->is_null()) {
    if (!c->is_object()) return Bad("lastCheckpoint", "must be an object");
    MemberCheckpoint cp;
    if (auto st = c->find("step"); st != c->end() && st->is_number_integer()) {
      cp.step = st->get<int64_t>();
    }
    if (auto p = c->find("path"); p != c->end() && p->is_string()) cp.path = p->get<std::string>();
    if (auto t = c->find("time");
        t != c->end() && t->is_string() && !ParseTimestamp(t->get<std::string>(), &cp.time)) {
      return Bad("lastCheckpoint.time", "must be RFC 3339");
    }
    m.last_checkpoint = std::move(cp);
  }
  return m;
}

std::vector<MemberStatus> MembersOf(const Json& status) {
  std::vector<MemberStatus> out;
  if (!status.is_object()) return out;
  auto members = status.find("members");
  if (members == status.end() || !members->is_array()) return out;
  out.reserve(members->size());
  for (const Json& e : *members) {
    if (absl::StatusOr<MemberStatus> m = MemberStatusFromJson(e); m.ok()) {
      out.push_back(*std::move(m));
    }
  }
  return out;
}

std::optional<int64_t> JobExitCode(const std::vector<MemberStatus>& members) {
  std::optional<int64_t> code;
  for (const MemberStatus& m : members) {
    if (m.state == MemberState::kFailed) return m.exit_code.value_or(-1);
    if (m.state == MemberState::kExited) code = 0;
  }
  return code;
}

const MemberStatus* FindMember(const std::vector<MemberStatus>& members, absl::string_view member) {
  for (const MemberStatus& m : members) {
    if (m.member == member) return &m;
  }
  return nullptr;
}

std::string ExitReason(int64_t exit_code) {
  if (exit_code == 0) return "completed";
  if (exit_code > 128 && exit_code < 128 + 65) {
    const int sig = static_cast<int>(exit_code - 128);
    const char* abbrev = sigabbrev_np(sig);
    if (abbrev != nullptr) return absl::StrCat("killed by signal ", sig, " (SIG", abbrev, ")");
    return absl::StrCat("killed by signal ", sig);
  }
  if (exit_code < 0) return "could not be started";
  return absl::StrCat("exited with code ", exit_code);
}

std::string TailLines(absl::string_view text, size_t max_lines, size_t max_bytes) {
  // Drop one trailing newline so that "a\nb\n" has two lines, not three.
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  // The tail starts after the max_lines-th newline from the end (or at the text's start).
  size_t start = 0;
  size_t lines = 0;
  for (size_t pos = text.size(); pos > 0 && max_lines > 0;) {
    const size_t nl = text.rfind('\n', pos - 1);
    if (nl == absl::string_view::npos) break;
    if (++lines == max_lines) {
      start = nl + 1;
      break;
    }
    pos = nl;
  }
  absl::string_view tail = text.substr(start);
  if (tail.size() > max_bytes) {
    tail = tail.substr(tail.size() - max_bytes);
    // Prefer a line start; else at least a character start.
    if (size_t nl = tail.find('\n'); nl != absl::string_view::npos && nl + 1 < tail.size()) {
      tail.remove_prefix(nl + 1);
    }
  }
  while (!tail.empty() && (static_cast<unsigned char>(tail.front()) & 0xC0) == 0x80) {
    tail.remove_prefix(1);
  }
  std::string out;
  out.reserve(tail.size());
  // Keep printable text: control characters other than tab and newline become '?', and so do
  // bytes that are not valid UTF-8, so the message is always a valid JSON string.
  for (size_t i = 0; i < tail.size();) {
    const unsigned char c = static_cast<unsigned char>(tail[i]);
    if (c < 0x80) {
      out.push_back((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f ? '?' : static_cast<char>(c));
      ++i;
      continue;
    }
    size_t n = c >= 0xF0 && c < 0xF5 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
    bool ok = n > 0 && i + n <= tail.size();
    for (size_t k = 1; ok && k < n; ++k) {
      ok = (static_cast<unsigned char>(tail[i + k]) & 0xC0) == 0x80;
    }
    if (!ok) {
      out.push_back('?');
      ++i;
      continue;
    }
    out.append(tail.data() + i, n);
    i += n;
  }
  return out;
}

}  // namespace tessera::api
