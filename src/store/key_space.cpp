#include "store/key_space.hpp"

#include <algorithm>

#include "core/strings.hpp"

namespace cohort::detail {

KeyList::KeyList(const std::vector<std::string>& keys) {
  std::size_t total = 0;
  for (const std::string& key : keys)
    total += key.size();
  bytes_.reserve(total);
  ends_.reserve(keys.size());
  for (const std::string& key : keys) {
    bytes_ += key;
    ends_.push_back(static_cast<std::uint32_t>(bytes_.size()));  // frames are far below 4 GiB
  }
}

const std::string* KeySpace::find(std::string_view key) const {
  const auto it = data_.find(key);
  return it == data_.end() ? nullptr : &it->second.bytes;
}

std::optional<std::uint64_t> KeySpace::version(std::string_view key) const {
  const auto it = data_.find(key);
  if (it == data_.end()) return std::nullopt;
  return it->second.version;
}

std::string& KeySpace::changing(const std::string& key) {
  Value& value = data_[key];
  value.version = ++versions_;
  return value.bytes;
}

std::shared_ptr<const std::string> KeySpace::shared(std::string_view key) {
  const std::string* value = find(key);
  if (value == nullptr) return nullptr;
  std::weak_ptr<const std::string>& held = shared_.try_emplace(std::string(key)).first->second;
  std::shared_ptr<const std::string> copy = held.lock();
  if (!copy) {
    copy = std::make_shared<const std::string>(*value);
    held = copy;
  }
  return copy;
}

void KeySpace::set(const std::string& key, std::string value) {
  changing(key) = std::move(value);
  changed(key);
  notify(key);
}

void KeySpace::append(const std::string& key, std::string_view value) {
  changing(key) += value;
  changed(key);
  notify(key);
}

void KeySpace::changed(std::string_view key) {
  if (shared_.empty()) return;
  if (const auto at = shared_.find(key); at != shared_.end()) shared_.erase(at);
}

std::optional<std::int64_t> KeySpace::add(const std::string& key, std::int64_t delta,
                                          std::string* error) {
  std::int64_t current = 0;
  if (auto it = data_.find(key); it != data_.end()) {
    auto number = parse_int(it->second.bytes);
    if (!number) {
      *error = cat("add on key '", key, "', whose value is not an integer");
      return std::nullopt;
    }
    current = *number;
  }
  std::int64_t sum = 0;
  if (__builtin_add_overflow(current, delta, &sum)) {
    *error = cat("add of ", delta, " to key '", key, "' (now ", current,
                 ") would overflow a 64-bit integer; the value is unchanged");
    return std::nullopt;
  }
  set(key, std::to_string(sum));
  return sum;
}

bool KeySpace::erase(const std::string& key) {
  changed(key);
  const bool erased = data_.erase(key) != 0;
  deletions_ += erased ? 1 : 0;
  return erased;
}

bool KeySpace::all_set(const std::vector<std::string>& keys) const {
  return std::all_of(keys.begin(), keys.end(),
                     [this](const std::string& key) { return data_.count(key) != 0; });
}

bool KeySpace::is_set(std::string_view key) const {
  if (data_.find(key) != data_.end()) return true;
  const auto queue = queues_.find(key);
  return queue != queues_.end() && !queue->second.empty();
}

void KeySpace::for_each_key(const std::function<void(const std::string&)>& visit) const {
  for (const auto& entry : data_)
    visit(entry.first);
}

void KeySpace::forget_prefix(std::string_view prefix) {
  const auto under = [prefix](const std::string& key) { return key.rfind(prefix, 0) == 0; };
  for (auto it = data_.begin(); it != data_.end();) {
    if (under(it->first)) {
      it = data_.erase(it);
      ++deletions_;
    } else {
      ++it;
    }
  }
  std::erase_if(queues_, [&under](const auto& entry) { return under(entry.first); });
  std::erase_if(shared_, [&under](const auto& entry) { return under(entry.first); });
}

void KeySpace::push(const std::string& key, std::string value) {
  queues_[key].push_back(std::move(value));
  notify_one(key);  // one item: one waiter pops it
}

std::size_t KeySpace::pop(const std::string& key, std::string* item) {
  auto it = queues_.find(key);
  if (it == queues_.end()) return 0;
  const std::size_t length = it->second.size();
  *item = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) queues_.erase(it);
  return length;
}

std::size_t KeySpace::queue_length(const std::string& key) const {
  const auto it = queues_.find(key);
  return it == queues_.end() ? 0 : it->second.size();
}

bool KeySpace::wait(Id id, Wait& wait, Deadline deadline) {
  Waiting waiting;
  waiting.wait = std::move(wait);
  waiting.deletions = deletions_;
  if (scan_on(id, waiting)) {
    wait = std::move(waiting.wait);
    return true;
  }
  if (deadline != Deadline::max()) waiting.deadline = deadlines_.emplace(deadline, id);
  waits_.insert_or_assign(id, std::move(waiting));
  return false;
}

void KeySpace::cancel(Id id) {
  auto found = waits_.find(id);
  if (found == waits_.end()) return;
  Waiting& waiting = found->second;
  if (waiting.indexed_under) {
    auto it = waiters_.find(*waiting.indexed_under);
    if (it != waiters_.end()) {
      it->second.erase(id);
      if (it->second.empty()) waiters_.erase(it);
    }
  }
  if (waiting.deadline) deadlines_.erase(*waiting.deadline);
  waits_.erase(found);
}

// Scans a wait's keys on from its cursor: true when every one is set (and
// none was deleted since the scan began: they are all set at once), else
// indexes it under the first it misses.
bool KeySpace::scan_on(Id id, Waiting& waiting) {
  const KeyList& keys = waiting.wait.keys;
  for (;;) {
    while (waiting.cursor < keys.size() && ready(waiting, waiting.cursor))
      ++waiting.cursor;
    if (waiting.cursor < keys.size()) {
      const std::string_view key = keys[waiting.cursor];
      auto it = waiters_.find(key);
      if (it == waiters_.end()) it = waiters_.try_emplace(std::string(key)).first;
      it->second.insert(id);
      waiting.indexed_under = it->first;
      return false;
    }
    if (waiting.deletions == deletions_) return true;
    waiting.deletions = deletions_;  // a key seen set may be gone: look again
    waiting.cursor = 0;
  }
}

// Whether key `i` is as the wait wants it: set (or a non-empty queue), or
// for a BARRIER, counted up to its world size.
bool KeySpace::ready(const Waiting& waiting, std::size_t i) const {
  const Wait& wait = waiting.wait;
  if (wait.at_least == 0) {
    return wait.queues_count ? is_set(wait.keys[i]) : data_.count(wait.keys[i]) != 0;
  }
  const auto it = data_.find(wait.keys[i]);
  if (it == data_.end()) return false;
  const auto count = parse_int(it->second.bytes);
  return count && *count >= wait.at_least;
}

void KeySpace::resume_ready(const std::function<void(Id, const Wait&)>& done) {
  std::vector<Id> batch;
  batch.swap(rescan_);
  for (Id id : batch) {
    auto found = waits_.find(id);
    if (found == waits_.end() || found->second.indexed_under) continue;
    if (!scan_on(id, found->second)) continue;
    const Wait wait = std::move(found->second.wait);
    cancel(id);
    done(id, wait);
  }
}

void KeySpace::expire(Deadline now,
                      const std::function<void(Id, const std::vector<std::string>&)>& expired) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const Id id = deadlines_.begin()->second;
    std::vector<std::string> missing;
    const KeyList& keys = waits_.at(id).wait.keys;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (data_.count(keys[i]) == 0) missing.emplace_back(keys[i]);
    }
    cancel(id);
    expired(id, missing);
  }
}

std::optional<Deadline> KeySpace::next_deadline() const {
  if (deadlines_.empty()) return std::nullopt;
  return deadlines_.begin()->first;
}

void KeySpace::notify(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  for (Id id : it->second) {
    auto found = waits_.find(id);
    if (found == waits_.end()) continue;
    found->second.indexed_under.reset();  // no longer indexed
    rescan_.push_back(id);
  }
  waiters_.erase(it);
}

void KeySpace::notify_one(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  const Id id = *it->second.begin();
  it->second.erase(it->second.begin());
  if (it->second.empty()) waiters_.erase(it);
  auto found = waits_.find(id);
  if (found == waits_.end()) return;
  found->second.indexed_under.reset();
  rescan_.push_back(id);
}

}  // namespace cohort::detail
