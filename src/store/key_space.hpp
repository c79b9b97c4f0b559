// The store's keys and the requests waiting for them, apart from any wire
// protocol: values, PyTorch's queues, and the wait index. A waiting request
// (a GET or WAIT of keys not yet set, a BARRIER) is indexed under one key
// it misses, the first in its list; when that key is set, it scans on from
// there (once per batch of requests handled, so a burst of sets costs one
// scan), and is indexed under the next key it misses. N waiters on N keys
// cost O(N) index entries and O(N^2) key lookups in all, which is the size
// of the question. Used by the server's one thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/socket.hpp"

namespace cohort::detail {

// Transparent: the maps below are searched with a waiting request's
// string_views, not copies.
struct StringHash {
  using is_transparent = void;  // NOLINT(readability-identifier-naming): the standard names it
  // Not noexcept: libstdc++ then keeps each key's hash in its node, as it does
  // for std::hash<std::string>, and a lookup does not hash the keys it passes.
  std::size_t operator()(std::string_view text) const {
    return std::hash<std::string_view>{}(text);
  }
};
template <class T>
using StringMap = std::unordered_map<std::string, T, StringHash, std::equal_to<>>;

// A waiting request's keys, packed in one buffer: a WAIT of 4,096 keys by
// each of 4,096 ranks holds 16.7 million of them, which as std::strings
// alone cost 0.5 GB.
class KeyList {
 public:
  KeyList() = default;
  explicit KeyList(const std::vector<std::string>& keys);
  std::size_t size() const noexcept { return ends_.size(); }
  std::string_view operator[](std::size_t i) const noexcept {
    const std::uint32_t begin = i == 0 ? 0 : ends_[i - 1];
    return std::string_view(bytes_).substr(begin, ends_[i] - begin);
  }

 private:
  std::string bytes_;
  std::vector<std::uint32_t> ends_;
};

/// What a request waits for.
struct Wait {
  KeyList keys;
  bool get = false;      ///< cohort's GET: the answer carries keys[0]'s value
  bool get_all = false;  ///< cohort's MULTI_GET: the answer carries every key's value
  /// A relay's GET (GET_VERSIONED): the answer carries the value's version,
  /// or only that it is still `known_version`.
  bool versioned = false;
  std::uint64_t known_version = 0;
  std::int64_t at_least = 0;  ///< a BARRIER: the count at each key reaches this
  bool queues_count = false;  ///< a PyTorch WAIT: a non-empty queue counts as a set key
};

class KeySpace {
 public:
  /// Waiters are named by the caller's ids (the server's connections).
  using Id = std::uint64_t;

  // --- values ---------------------------------------------------------
  const std::string* find(std::string_view key) const;
  /// The value at `key` as one read-only copy for every answer that holds
  /// it at once (many connections GET one large table): the same copy
  /// while any answer still holds it and the key has not changed; null when
  /// the key is not set.
  std::shared_ptr<const std::string> shared(std::string_view key);
  /// The value's version: a number that changes whenever the key is set,
  /// appended to, added to, or erased and set again (never 0); nullopt when
  /// the key is not set.
  std::optional<std::uint64_t> version(std::string_view key) const;
  void set(const std::string& key, std::string value);
  void append(const std::string& key, std::string_view value);
  /// The integer at `key` (absent: 0) plus `delta`; nullopt and `*error`
  /// when the value is no integer or the sum would not fit in 64 bits (the
  /// value is then left as it was).
  std::optional<std::int64_t> add(const std::string& key, std::int64_t delta, std::string* error);
  bool erase(const std::string& key);
  bool all_set(const std::vector<std::string>& keys) const;
  /// Set, or a queue that holds an item.
  bool is_set(std::string_view key) const;
  std::size_t size() const noexcept { return data_.size(); }
  /// Calls `visit(key)` for every key set.
  void for_each_key(const std::function<void(const std::string&)>& visit) const;
  /// Forgets every key and queue under `prefix`.
  void forget_prefix(std::string_view prefix);

  // --- queues (PyTorch's QUEUE_PUSH/POP/LEN), apart from the values -----
  void push(const std::string& key, std::string value);
  /// The queue's length before the pop, and its first item when there was one.
  std::size_t pop(const std::string& key, std::string* item);
  std::size_t queue_length(const std::string& key) const;

  // --- waits -------------------------------------------------------------
  /// True when what `wait` asks holds now (nothing is kept, `wait` is left
  /// as it was); else `id` waits, with `wait` moved in, until it holds or
  /// `deadline` passes (Deadline::max(): never).
  bool wait(Id id, Wait& wait, Deadline deadline);
  bool waiting(Id id) const { return waits_.count(id) != 0; }
  std::size_t waiting_count() const noexcept { return waits_.size(); }
  /// Forgets `id`'s wait, if any.
  void cancel(Id id);
  /// Whether sets since the last resume_ready() may have completed waits.
  bool may_resume() const noexcept { return !rescan_.empty(); }
  /// Calls `done(id, wait)` for every wait that now holds, then forgets it.
  void resume_ready(const std::function<void(Id, const Wait&)>& done);
  /// Calls `expired(id, missing keys)` for every wait past its deadline,
  /// then forgets it.
  void expire(Deadline now,
              const std::function<void(Id, const std::vector<std::string>&)>& expired);
  std::optional<Deadline> next_deadline() const;

 private:
  using DeadlineIndex = std::multimap<Deadline, Id>;
  struct Waiting {
    Wait wait;
    std::size_t cursor = 0;                    // keys before it were set when last scanned
    std::uint64_t deletions = 0;               // deletions when the scan began
    std::optional<std::string> indexed_under;  // the key whose waiter set holds it
    std::optional<DeadlineIndex::iterator> deadline;
  };
  bool scan_on(Id id, Waiting& waiting);
  bool ready(const Waiting& waiting, std::size_t i) const;
  void notify(const std::string& key);
  void changed(std::string_view key);  // forgets its shared() copy
  void notify_one(const std::string& key);

  struct Value {
    std::string bytes;
    std::uint64_t version = 0;
  };
  std::string& changing(const std::string& key);  // the value, versioned anew

  StringMap<Value> data_;
  std::uint64_t versions_ = 0;                          // the last version given
  StringMap<std::weak_ptr<const std::string>> shared_;  // shared(): dropped when a key changes
  StringMap<std::deque<std::string>> queues_;
  std::unordered_map<Id, Waiting> waits_;
  StringMap<std::unordered_set<Id>> waiters_;  // key -> ids indexed under it
  DeadlineIndex deadlines_;
  std::vector<Id> rescan_;       // waits whose indexed key was set
  std::uint64_t deletions_ = 0;  // keys deleted so far
};

}  // namespace cohort::detail
