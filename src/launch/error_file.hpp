// TORCHELASTIC_ERROR_FILE: a PyTorch script whose entry point is decorated
// with torch.distributed.elastic.multiprocessing.errors.record writes its
// uncaught exception there as JSON; the failure report quotes it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::detail {

/// What a worker recorded before it died.
struct RecordedError {
  std::string message;              ///< "RuntimeError: rank 1 cannot go on"
  std::vector<std::string> frames;  ///< the traceback's last frames, a line each
  int frame_count = 0;              ///< frames in the whole traceback
};

/// PyTorch's format, {"message": {"message": "...", "extraInfo":
/// {"py_callstack": "Traceback ...", "timestamp": "..."}}} (or "message" as a
/// plain string); keeps the last `max_frames` frames. nullopt when `json` is
/// not that.
std::optional<RecordedError> parse_error_file(std::string_view json, int max_frames);

/// The same, read from `path`; nullopt when there is no such file (the
/// worker did not use @record, or died before writing it).
std::optional<RecordedError> read_error_file(const std::string& path, int max_frames);

}  // namespace cohort::detail
