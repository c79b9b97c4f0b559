#include "launch/timeline.hpp"

#include <algorithm>
#include <cerrno>
#include <limits>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/fd.hpp"
#include "core/own_files.hpp"
#include "core/strings.hpp"
#include "launch/console.hpp"

namespace cohort::detail {
namespace {

using Json = nlohmann::json;

Json args_of(const Timeline::Args& args) {
  Json out = Json::object();
  for (const auto& [key, value] : args)
    out[key] = value;
  return out;
}

long long ts_of(const Json& event) {
  const auto ts = event.find("ts");
  return ts != event.end() && ts->is_number_integer() ? ts->get<long long>() : -1;
}

// Text from outside (a command line, a worker's output, a host name) may be
// no valid UTF-8, which JSON requires: such bytes become U+FFFD.
std::string dump(const Json& json, int indent = -1) {
  return json.dump(indent, ' ', false, Json::error_handler_t::replace);
}

// A metadata event: a track's name or place.
std::string metadata(int pid, int tid, const char* name, Json args) {
  return dump(
      Json{{"ph", "M"}, {"name", name}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}});
}

int tid_of(int rank) {
  return rank == Timeline::kAgentTrack ? 0 : rank + 1;
}

}  // namespace

std::string missing_node_events(int node, const std::string& host, const std::string& why) {
  Timeline track(node, host);
  track.instant("no events", Timeline::kAgentTrack, {{"why", why}});
  return track.events();
}

void write_job_trace(const std::string& path, const std::vector<std::string>& node_events,
                     const std::string& run_id, const std::vector<std::string>& command,
                     int exit_code) {
  const std::string trace = Timeline::merge(
      node_events,
      {{"run_id", run_id}, {"command", join(command, " ")}, {"exit_status", cat(exit_code)}});
  std::string why;
  try {
    const Fd file = create_own_file(path, "--trace");
    for (std::string_view left = trace; !left.empty() && why.empty();) {
      const ssize_t n = ::write(file.get(), left.data(), left.size());
      if (n > 0) {
        left.remove_prefix(static_cast<std::size_t>(n));
      } else if (n < 0 && errno != EINTR) {
        why = errno_text(errno);
      }
    }
  } catch (const Error& error) {
    why = error.what();
  }
  if (!why.empty()) {
    console_write(STDERR_FILENO,
                  cat("cohort run: cannot write the trace to ", path, ": ", why, "\n"));
  }
}

long long trace_microseconds(Timeline::Clock::time_point when) {
  return std::chrono::duration_cast<std::chrono::microseconds>(when.time_since_epoch()).count();
}

Timeline::Timeline(int node, std::string host) : node_(node), host_(std::move(host)) {
  // Perfetto and chrome://tracing show these names on the tracks.
  events_.push_back(metadata(pid(), 0, "process_name",
                             {{"name", node_ < 0 ? cat("cohort run --hostfile (", host_, ")")
                                                 : cat("node ", node_, " (", host_, ")")}}));
  events_.push_back(metadata(pid(), 0, "process_sort_index", {{"sort_index", pid()}}));
  name_track(kAgentTrack);
}

void Timeline::name_track(int rank) {
  if (std::find(named_.begin(), named_.end(), rank) != named_.end()) return;
  named_.push_back(rank);
  const int tid = tid_of(rank);
  events_.push_back(
      metadata(pid(), tid, "thread_name",
               {{"name", rank == kAgentTrack ? std::string("cohort run") : cat("rank ", rank)}}));
  events_.push_back(metadata(pid(), tid, "thread_sort_index", {{"sort_index", tid}}));
}

void Timeline::span(const std::string& name, int rank, Clock::time_point begin,
                    Clock::time_point end, const Args& args) {
  name_track(rank);
  const long long start = trace_microseconds(begin);
  events_.push_back(dump(Json{{"ph", "X"},
                              {"name", name},
                              {"cat", "cohort"},
                              {"pid", pid()},
                              {"tid", tid_of(rank)},
                              {"ts", start},
                              {"dur", std::max(0LL, trace_microseconds(end) - start)},
                              {"args", args_of(args)}}));
}

void Timeline::instant(const std::string& name, int rank, const Args& args,
                       Clock::time_point when) {
  name_track(rank);
  events_.push_back(dump(Json{{"ph", "i"},
                              {"s", "t"},
                              {"name", name},
                              {"cat", "cohort"},
                              {"pid", pid()},
                              {"tid", tid_of(rank)},
                              {"ts", trace_microseconds(when)},
                              {"args", args_of(args)}}));
}

std::string Timeline::events() const {
  return cat("[", join(events_, ","), "]");
}

std::string Timeline::merge(const std::vector<std::string>& node_events, const Args& about) {
  Json events = Json::array();
  for (const std::string& text : node_events) {
    Json part = Json::parse(text, nullptr, false);
    if (!part.is_array()) continue;  // a node's part that did not arrive whole
    for (Json& event : part) {
      if (event.is_object()) events.push_back(std::move(event));
    }
  }
  long long first = std::numeric_limits<long long>::max();
  for (const Json& event : events) {
    if (ts_of(event) >= 0) first = std::min(first, ts_of(event));
  }
  for (Json& event : events) {
    if (ts_of(event) >= 0) event["ts"] = ts_of(event) - first;
  }
  // In time order (metadata first), as a reader of the raw file expects.
  std::stable_sort(events.begin(), events.end(),
                   [](const Json& a, const Json& b) { return ts_of(a) < ts_of(b); });
  Json trace{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  trace["otherData"] = args_of(about);
  if (first != std::numeric_limits<long long>::max()) {
    trace["otherData"]["start_unix_us"] = std::to_string(first);
  }
  return dump(trace, 1) + "\n";
}

}  // namespace cohort::detail
