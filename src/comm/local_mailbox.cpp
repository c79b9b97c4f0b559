#include "comm/local_mailbox.hpp"

#include <cstring>

#include <cohort/errors.hpp>

#include "core/strings.hpp"

namespace cohort::detail {

void LocalMailbox::post(const Buffer& data, int tag) {
  const char* bytes = static_cast<const char*>(data.data);
  boxes_[tag].push_back({data.type, std::string(bytes, bytes + data.bytes())});
}

void LocalMailbox::take(const Buffer& data, int tag, std::chrono::milliseconds timeout) {
  auto box = boxes_.find(tag);
  if (box == boxes_.end() || box->second.empty()) {
    // Only this rank could send it, and it is busy receiving: waiting would
    // only delay the same answer.
    throw Timeout(cat("recv from this rank itself with tag ", tag,
                      ": no such message was sent before (timeout ", timeout.count(), " ms)"));
  }
  Message message = std::move(box->second.front());
  box->second.pop_front();
  if (message.type != data.type || message.bytes.size() != data.bytes()) {
    throw InvalidArgument(cat("recv with tag ", tag, ": expected ", data.count, " ",
                              to_string(data.type), " elements, the message holds ",
                              message.bytes.size() / size_of(message.type), " ",
                              to_string(message.type)));
  }
  if (!message.bytes.empty()) std::memcpy(data.data, message.bytes.data(), message.bytes.size());
}

}  // namespace cohort::detail
