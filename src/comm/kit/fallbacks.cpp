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

void ring_all_reduce(Channel& channel, Buffer data, ReduceOp op, Channel::Duration timeout) {
  const int n = channel.size(), me = channel.rank();
  if (data.count == 0) return;  // on every rank: the counts agree
  const std::size_t element = size_of(data.type);
  // Part p: elements [first(p), first(p + 1)).
  const auto first = [&](int part) {
    return data.count * static_cast<std::size_t>(part) / static_cast<std::size_t>(n);
  };
  const auto bytes_of_part = [&](int part) { return (first(part + 1) - first(part)) * element; };
  const auto part_at = [&](int part) { return at(data, first(part), element); };
  const int next = (me + 1) % n, previous = (me + n - 1) % n;
  std::vector<unsigned char> received(bytes_of_part(0) + element);  // the largest part
  // Reduce-scatter: at step s, pass on the running sum of part (me-s) and add
  // the previous rank's of part (me-s-1) into this rank's own; after n-1
  // steps this rank's part (me+1) holds every rank's contribution.
  for (int step = 0; step < n - 1; ++step) {
    const int out = (me + n - step) % n, in = (me + 2 * n - step - 1) % n;
    channel.exchange(part_at(out), bytes_of_part(out), next, received.data(), bytes_of_part(in),
                     previous, timeout);
    reduce_into(data.type, op, part_at(in), received.data(), bytes_of_part(in) / element);
  }
  // All-gather: at step s, pass on part (me+1-s), finished, and take part (me-s).
  for (int step = 0; step < n - 1; ++step) {
    const int out = (me + 1 + n - step) % n, in = (me + n - step) % n;
    channel.exchange(part_at(out), bytes_of_part(out), next, part_at(in), bytes_of_part(in),
                     previous, timeout);
  }
  if (op == ReduceOp::avg) finish_average(data.type, data.data, data.count, n);
}

void ring_all_gather(Channel& channel, Buffer input, Buffer output, Channel::Duration timeout) {
  const int n = channel.size(), me = channel.rank();
  const std::size_t slice = input.bytes();
  move_bytes(at(output, static_cast<std::size_t>(me), slice), input.data, slice);
  // Step s: pass on slice (me-s), this rank's own at first and then the one
  // that came at the step before, and take slice (me-s-1) from the previous rank.
  const int next = (me + 1) % n, previous = (me + n - 1) % n;
  for (int step = 0; step < n - 1; ++step) {
    const auto out = static_cast<std::size_t>(me + n - step) % n;
    const auto in = static_cast<std::size_t>(me + 2 * n - step - 1) % n;
    channel.exchange(at(output, out, slice), slice, next, at(output, in, slice), slice, previous,
                     timeout);
  }
}

void tree_broadcast(Channel& channel, Buffer data, int root, Channel::Duration timeout) {
  const int n = channel.size();
  const int me = (channel.rank() - root + n) % n;  // counted from the root
  for (int reach = 1; reach < n; reach *= 2) {
    if (me < reach && me + reach < n) {
      channel.exchange(data.data, data.bytes(), (me + reach + root) % n, nullptr, 0, -1, timeout);
    } else if (me >= reach && me < 2 * reach) {
      channel.exchange(nullptr, 0, -1, data.data, data.bytes(), (me - reach + root) % n, timeout);
    }
  }
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
