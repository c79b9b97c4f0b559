#include "comm/kit/fallbacks.hpp"

#include <cstring>
#include <vector>

#include "comm/reduce.hpp"

namespace cohort::detail {
namespace {

unsigned char* at(const Buffer& buffer, std::size_t slice, std::size_t slice_bytes) {
  return static_cast<unsigned char*>(buffer.data) + slice * slice_bytes;
}

void move_bytes(void* to, const void* from, std::size_t bytes) {
  if (to != from) std::memmove(to, from, bytes);
}

}  // namespace

void ring_reduce_scatter(Channel& channel, Buffer input, Buffer output, ReduceOp op,
                         Channel::Duration timeout) {
  const int n = channel.size(), me = channel.rank();
  const std::size_t slice = output.bytes();
  // Step s: send the running sum of slice (me-s-1) to the next rank, add the
  // previous rank's running sum of slice (me-s-2) to this rank's input. After
  // n-1 steps, slice `me` holds every rank's contribution.
  std::vector<unsigned char> sum(
      at(input, static_cast<std::size_t>(me + n - 1) % n, slice),
      at(input, static_cast<std::size_t>(me + n - 1) % n, slice) + slice);
  std::vector<unsigned char> received(slice);
  const int next = (me + 1) % n, previous = (me + n - 1) % n;
  for (int step = 0; step < n - 1; ++step) {
    channel.exchange(sum.data(), slice, next, received.data(), slice, previous, timeout);
    const auto index = static_cast<std::size_t>(me + 2 * n - step - 2) % n;
    // The slice received is `index`; it becomes this rank's running sum.
    reduce_to(output.type, op, sum.data(), at(input, index, slice), received.data(), output.count);
  }
  std::memcpy(output.data, sum.data(), slice);
  if (op == ReduceOp::avg) finish_average(output.type, output.data, output.count, n);
}

void direct_all_to_all(Channel& channel, Buffer input, Buffer output, Channel::Duration timeout) {
  const int n = channel.size(), me = channel.rank();
  const std::size_t slice = output.bytes() / static_cast<std::size_t>(n);
  std::vector<unsigned char> copy;
  if (input.data == output.data) {  // in place: what is sent must not be overwritten first
    copy.assign(at(input, 0, 0), at(input, 0, 0) + input.bytes());
    input.data = copy.data();
  }
  move_bytes(at(output, static_cast<std::size_t>(me), slice),
             at(input, static_cast<std::size_t>(me), slice), slice);
  for (int step = 1; step < n; ++step) {
    const int to = (me + step) % n, from = (me + n - step) % n;
    channel.exchange(at(input, static_cast<std::size_t>(to), slice), slice, to,
                     at(output, static_cast<std::size_t>(from), slice), slice, from, timeout);
  }
}

void direct_gather(Channel& channel, Buffer input, Buffer output, int root,
                   Channel::Duration timeout) {
  const int n = channel.size(), me = channel.rank();
  const std::size_t slice = input.bytes();
  if (me != root) {
    channel.exchange(input.data, slice, root, nullptr, 0, -1, timeout);
    return;
  }
  move_bytes(at(output, static_cast<std::size_t>(me), slice), input.data, slice);
  for (int r = 0; r < n; ++r) {
    if (r != me) {
      channel.exchange(nullptr, 0, -1, at(output, static_cast<std::size_t>(r), slice), slice, r,
                       timeout);
    }
  }
}

void direct_scatter(Channel& channel, Buffer input, Buffer output, int root,
                    Channel::Duration timeout) {
  const int n = channel.size(), me = channel.rank();
  const std::size_t slice = output.bytes();
  if (me != root) {
    channel.exchange(nullptr, 0, -1, output.data, slice, root, timeout);
    return;
  }
  for (int r = 0; r < n; ++r) {
    if (r != me) {
      channel.exchange(at(input, static_cast<std::size_t>(r), slice), slice, r, nullptr, 0, -1,
                       timeout);
    }
  }
  move_bytes(output.data, at(input, static_cast<std::size_t>(me), slice), slice);
}

}  // namespace cohort::detail
