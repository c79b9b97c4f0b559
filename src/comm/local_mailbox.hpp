// Messages a rank sends to itself: buffered until it receives them, as MPI
// allows. Shared by every backend (a transport has no pair from a rank to
// itself).
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <string>

#include <cohort/communicator.hpp>

namespace cohort::detail {

class LocalMailbox {
 public:
  void post(const Buffer& data, int tag);
  /// Fills `data` with the oldest message posted with `tag`. Throws Timeout
  /// when there is none (no one else can ever post one), InvalidArgument when
  /// its type or size differ from `data`'s.
  void take(const Buffer& data, int tag, std::chrono::milliseconds timeout);

 private:
  struct Message {
    DataType type;
    std::string bytes;
  };
  std::map<int, std::deque<Message>> boxes_;
};

}  // namespace cohort::detail
