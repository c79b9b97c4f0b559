#include "store/handshake_slots.hpp"

#include <algorithm>

namespace cohort::detail {
namespace {

// Addresses whose failures are remembered; past this the oldest count is
// forgotten all at once (a flood of addresses must not grow the map).
constexpr std::size_t kRememberedAddresses = 4096;

}  // namespace

std::optional<HandshakeSlots::Id> HandshakeSlots::take(Id id, const std::string& address,
                                                       Deadline now) {
  std::optional<Id> evict;
  if (capacity_ > 0 && slots_.size() >= capacity_) evict = oldest_of_the_largest_holder();
  const auto deadline = deadlines_.emplace(now + timeout_, id);
  slots_[id] = Slot{address, now, deadline};
  ++held_by_address_[address];
  return evict;
}

void HandshakeSlots::release(Id id) {
  const auto it = slots_.find(id);
  if (it == slots_.end()) return;
  deadlines_.erase(it->second.deadline);
  if (--held_by_address_[it->second.address] == 0) held_by_address_.erase(it->second.address);
  slots_.erase(it);
}

std::chrono::milliseconds HandshakeSlots::judged(Id id, bool proven, Deadline now) {
  const auto it = slots_.find(id);
  if (it == slots_.end()) return std::chrono::milliseconds(0);
  const auto known = failures_.find(it->second.address);
  if (proven && known == failures_.end()) return std::chrono::milliseconds(0);
  if (failures_.size() >= kRememberedAddresses && known == failures_.end()) failures_.clear();
  std::uint64_t& failed = failures_[it->second.address];
  const std::uint64_t count = proven ? failed : ++failed;
  if (count <= static_cast<std::uint64_t>(kFreeFailures)) return std::chrono::milliseconds(0);
  const std::uint64_t doublings = std::min<std::uint64_t>(count - kFreeFailures - 1, 16);
  const auto hold = std::min(std::chrono::milliseconds(100) * (std::int64_t{1} << doublings),
                             std::chrono::duration_cast<std::chrono::milliseconds>(kLongestHold));
  deadlines_.erase(it->second.deadline);
  it->second.deadline = deadlines_.emplace(now + hold, id);
  return hold;
}

std::uint64_t HandshakeSlots::failures_of(Id id) const {
  const auto it = slots_.find(id);
  if (it == slots_.end()) return 0;
  const auto count = failures_.find(it->second.address);
  return count == failures_.end() ? 0 : count->second;
}

std::optional<Deadline> HandshakeSlots::next_deadline() const {
  if (deadlines_.empty()) return std::nullopt;
  return deadlines_.begin()->first;
}

std::vector<HandshakeSlots::Id> HandshakeSlots::expired(Deadline now) const {
  std::vector<Id> out;
  for (auto it = deadlines_.begin(); it != deadlines_.end() && it->first <= now; ++it)
    out.push_back(it->second);
  return out;
}

HandshakeSlots::Id HandshakeSlots::oldest_of_the_largest_holder() const {
  const auto largest =
      std::max_element(held_by_address_.begin(), held_by_address_.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  std::optional<std::pair<Deadline, Id>> oldest;
  for (const auto& [id, slot] : slots_) {
    if (slot.address != largest->first) continue;
    if (!oldest || slot.taken < oldest->first) oldest = std::make_pair(slot.taken, id);
  }
  return oldest->second;
}

}  // namespace cohort::detail
