#include "launch/error_file.hpp"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace cohort::detail {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    lines.push_back(line);
  return lines;
}

// A traceback's frames: each "  File ..." line with the source line under it.
std::vector<std::vector<std::string>> frames_of(const std::string& callstack) {
  std::vector<std::vector<std::string>> frames;
  bool skipping = false;  // the frame of @record's own wrapper says nothing about the error
  for (const std::string& line : lines_of(callstack)) {
    if (line.rfind("  File ", 0) == 0) {
      skipping =
          line.find("/torch/distributed/elastic/multiprocessing/errors/") != std::string::npos;
      if (!skipping) frames.push_back({line.substr(2)});
    } else if (skipping) {
      continue;
    } else if (line.rfind("    ", 0) == 0 && !frames.empty() && frames.back().size() == 1) {
      frames.back().push_back(line.substr(2));
    }
  }
  return frames;
}

}  // namespace

std::optional<RecordedError> parse_error_file(std::string_view json, int max_frames) {
  const nlohmann::json data = nlohmann::json::parse(json, nullptr, false);
  if (data.is_discarded() || !data.is_object() || !data.contains("message")) return std::nullopt;
  RecordedError error;
  const nlohmann::json& message = data["message"];
  std::string callstack;
  if (message.is_string()) {
    error.message = message.get<std::string>();
  } else if (message.is_object() && message.contains("message") && message["message"].is_string()) {
    error.message = message["message"].get<std::string>();
    const auto extra = message.find("extraInfo");
    if (extra != message.end() && extra->is_object() && extra->contains("py_callstack") &&
        (*extra)["py_callstack"].is_string()) {
      callstack = (*extra)["py_callstack"].get<std::string>();
    }
  } else {
    return std::nullopt;
  }
  const auto frames = frames_of(callstack);
  error.frame_count = static_cast<int>(frames.size());
  const std::size_t first =
      frames.size() > static_cast<std::size_t>(max_frames) ? frames.size() - max_frames : 0;
  for (std::size_t i = first; i < frames.size(); ++i)
    error.frames.insert(error.frames.end(), frames[i].begin(), frames[i].end());
  return error;
}

std::optional<RecordedError> read_error_file(const std::string& path, int max_frames) {
  std::ifstream file(path);
  if (!file) return std::nullopt;
  std::stringstream text;
  text << file.rdbuf();
  return parse_error_file(text.str(), max_frames);
}

}  // namespace cohort::detail
