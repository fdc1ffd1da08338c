#include "agent/member_logs.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace tessera::agent {
namespace {

namespace fs = std::filesystem;

// "worker-1.g3.stdout" -> {worker-1, 3, stdout}; "worker-1.stdout" -> generation 0.
bool ParseName(const std::string& name, LogFile* out) {
  for (const char* stream : {"stdout", "stderr"}) {
    const std::string suffix = absl::StrCat(".", stream);
    if (!absl::EndsWith(name, suffix)) continue;
    std::string stem = name.substr(0, name.size() - suffix.size());
    out->stream = stream;
    out->generation = 0;
    if (size_t g = stem.rfind(".g");
        g != std::string::npos && absl::SimpleAtoi(stem.substr(g + 2), &out->generation)) {
      stem.resize(g);
    }
    out->member = stem;
    return !stem.empty();
  }
  return false;
}

int64_t FileSize(const std::string& path) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  return ec ? -1 : static_cast<int64_t>(n);
}

}  // namespace

std::vector<LogFile> ListLogFiles(const std::string& dir) {
  std::vector<LogFile> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    LogFile f;
    if (!e.is_regular_file(ec) || !ParseName(e.path().filename().string(), &f)) continue;
    f.path = e.path().string();
    files.push_back(std::move(f));
  }
  std::sort(files.begin(), files.end(), [](const LogFile& a, const LogFile& b) {
    return std::tie(a.member, a.generation, a.stream) < std::tie(b.member, b.generation, b.stream);
  });
  return files;
}

int64_t OffsetSince(const std::string& path, absl::Time since) {
  std::ifstream in(path + ".idx");
  const int64_t since_ms = absl::ToUnixMillis(since);
  int64_t offset = 0, ms = 0, bytes = 0;
  while (in >> ms >> bytes) {
    if (ms > since_ms) break;
    offset = bytes;
  }
  return offset;
}

void LogIndexer::Sample(const std::vector<std::string>& paths, absl::Time now) {
  for (const std::string& p : paths) {
    const int64_t size = FileSize(p);
    if (size < 0) continue;
    auto it = last_size_.find(p);
    if (it != last_size_.end() && it->second == size) continue;
    last_size_[p] = size;
    std::ofstream(p + ".idx", std::ios::app) << absl::ToUnixMillis(now) << " " << size << "\n";
  }
  // Forget files no longer sampled (members gone), so the map does not grow forever.
  std::set<std::string> live(paths.begin(), paths.end());
  for (auto it = last_size_.begin(); it != last_size_.end();) {
    it = live.count(it->first) ? std::next(it) : last_size_.erase(it);
  }
}

void ServeLogs(const httplib::Request& req, httplib::Response& res, const Launcher& launcher,
               const std::atomic<bool>& stop) {
  auto fail = [&](int code, const std::string& msg) {
    res.status = code;
    res.set_content(msg + "\n", "text/plain");
  };
  const std::string ns = req.has_param("namespace") ? req.get_param_value("namespace") : "default";
  const std::string job = req.get_param_value("job");
  const std::string stream = req.has_param("stream") ? req.get_param_value("stream") : "stdout";
  const bool follow = req.get_param_value("follow") == "1";
  if (job.empty() || (stream != "stdout" && stream != "stderr")) {
    return fail(400, "job is required; stream is stdout or stderr");
  }
  std::set<std::string> members;
  for (const char* key : {"member", "members"}) {
    for (absl::string_view m : absl::StrSplit(req.get_param_value(key), ',', absl::SkipEmpty())) {
      members.insert(std::string(m));
    }
  }
  int64_t generation = -1, tail = -1, since_s = -1;
  if (req.has_param("generation") &&
      (!absl::SimpleAtoi(req.get_param_value("generation"), &generation) || generation < 0)) {
    return fail(400, "generation: expected a number >= 0");
  }
  if (req.has_param("tail") &&
      (!absl::SimpleAtoi(req.get_param_value("tail"), &tail) || tail < 0)) {
    return fail(400, "tail: expected a number of lines >= 0");
  }
  if (req.has_param("sinceSeconds") &&
      (!absl::SimpleAtoi(req.get_param_value("sinceSeconds"), &since_s) || since_s < 0)) {
    return fail(400, "sinceSeconds: expected a number of seconds >= 0");
  }
  const std::vector<LogFile> all = ListLogFiles(launcher.LogDir(ns, job));
  if (req.get_param_value("list") == "1") {
    nlohmann::json files = nlohmann::json::array();
    for (const LogFile& f : all) {
      files.push_back({{"member", f.member},
                       {"generation", f.generation},
                       {"stream", f.stream},
                       {"bytes", std::max<int64_t>(0, FileSize(f.path))}});
    }
    res.set_content(nlohmann::json{{"files", files}}.dump(), "application/json");
    return;
  }
  // Per member: the file of the generation asked for, or its newest here.
  std::map<std::string, const LogFile*> chosen;
  for (const LogFile& f : all) {
    if (f.stream != stream || (!members.empty() && !members.count(f.member))) continue;
    if (generation >= 0 && f.generation != generation) continue;
    const LogFile*& c = chosen[f.member];
    if (c == nullptr || f.generation > c->generation) c = &f;
  }
  std::vector<std::string> files, names;
  for (const auto& [member, f] : chosen) {
    files.push_back(f->path);
    names.push_back(member);
  }
  if (files.empty()) return fail(404, "no logs for " + ns + "/" + job + " on this node");
  auto offsets = std::make_shared<std::vector<std::streamoff>>(files.size(), 0);
  if (since_s >= 0) {
    const absl::Time since = absl::Now() - absl::Seconds(since_s);
    for (size_t i = 0; i < files.size(); ++i) (*offsets)[i] = OffsetSince(files[i], since);
  }
  // tail=N: the last N whole lines of what is left.
  for (size_t i = 0; tail >= 0 && i < files.size(); ++i) {
    std::ifstream in(files[i], std::ios::binary);
    in.seekg((*offsets)[i]);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t end = text.rfind('\n');  // a partial last line is not a line yet
    if (end == std::string::npos) continue;
    size_t at = end + 1;
    for (int64_t n = 0; n < tail && at > 0; ++n) {
      const size_t nl = at >= 2 ? text.rfind('\n', at - 2) : std::string::npos;
      at = nl == std::string::npos ? 0 : nl + 1;
    }
    (*offsets)[i] += static_cast<std::streamoff>(at);
  }
  const std::string id_prefix = absl::StrCat(ns, ".", job, ".");
  res.set_chunked_content_provider("text/plain", [files, names, offsets, follow, &launcher, &stop,
                                                  id_prefix](size_t, httplib::DataSink& sink) {
    int idle = 0;
    for (;;) {
      bool wrote = false;
      for (size_t i = 0; i < files.size(); ++i) {
        std::ifstream in(files[i]);
        in.seekg((*offsets)[i]);
        std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        // Whole lines only, prefixed with the member, so interleaved members stay readable.
        size_t end = chunk.rfind('\n');
        if (end == std::string::npos) continue;
        chunk.resize(end + 1);
        (*offsets)[i] += static_cast<std::streamoff>(chunk.size());
        std::string out;
        for (absl::string_view line :
             absl::StrSplit(absl::string_view(chunk).substr(0, end), '\n')) {
          absl::StrAppend(&out, "[", names[i], "] ", line, "\n");
        }
        if (!sink.write(out.data(), out.size())) return false;
        wrote = true;
      }
      if (!follow) break;
      if (!sink.is_writable() || stop.load()) break;
      bool running = false;
      for (const MemberStatus& m : launcher.List()) {
        if (absl::StartsWith(m.spec.Id(), id_prefix) && m.state != MemberState::kExited) {
          running = true;
        }
      }
      idle = wrote ? 0 : idle + 1;
      if (!running && idle > 10) break;
      usleep(200 * 1000);
    }
    sink.done();
    return true;
  });
}

}  // namespace tessera::agent
