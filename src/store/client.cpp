// StoreClient: one blocking connection with deadlines. GET and WAIT carry
// their timeout to the server, which answers "timeout" itself, so the
// connection stays usable; the client waits a little longer than that to
// tell a slow server from a dead one.

#include <optional>

#include <sys/socket.h>
#include <unistd.h>

#include <cohort/errors.hpp>
#include <cohort/store.hpp>

#include "core/socket.hpp"
#include "core/strings.hpp"
#include "store/client_handshake.hpp"
#include "store/file_answer.hpp"
#include "store/protocol.hpp"

namespace cohort {

using detail::cat;
namespace wire = detail::store_protocol;

namespace {

// The largest answer taken: a MULTI_GET of every rank's entry may exceed
// the server's request limit; 4 GiB is what a frame's length can say.
constexpr std::size_t kMaxAnswerBytes = 0xffffffffu;

std::string quoted_list(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& key : keys)
    out += (out.empty() ? "'" : ", '") + key + "'";
  return out;
}

// SET and SET_ON_CLOSE: a key and a value.
std::string key_value_request(wire::Op op, std::string_view key, std::string_view value) {
  return wire::Writer().u8(static_cast<std::uint8_t>(op)).bytes(key).bytes(value).frame();
}

std::string add_request(std::string_view key, std::int64_t delta) {
  return wire::Writer().u8(static_cast<std::uint8_t>(wire::Op::add)).bytes(key).i64(delta).frame();
}

}  // namespace

StoreValue::StoreValue(std::string bytes) {
  auto owned = std::make_shared<const std::string>(std::move(bytes));
  view_ = *owned;
  owner_ = std::move(owned);
}

StoreClient::StoreClient(Options options)
    : options_(std::move(options)), address_(cat(options_.host, ":", options_.port)) {
  fd_ = detail::connect_to_store(options_.host, options_.port,
                                 {options_.token, options_.munge, options_.server_process},
                                 options_.timeout)
            .release();
}

StoreClient::StoreClient(Options options, int connected_fd)
    : options_(std::move(options)),
      address_(cat(options_.host, ":", options_.port)),
      fd_(connected_fd) {}

std::unique_ptr<StoreClient> StoreClient::over_trusted_socket(Options options, int connected_fd) {
  std::unique_ptr<StoreClient> client(new StoreClient(std::move(options), connected_fd));
  // A socket pair carries files: a large answer that the ranks of a node
  // all read comes as their node's one copy (store/file_answer.hpp).
  client->call(wire::Writer().u8(static_cast<std::uint8_t>(wire::Op::accept_files)).frame(), {});
  client->takes_files_ = true;
  return client;
}

void StoreClient::set_timeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  options_.timeout = timeout;
}

void StoreClient::set_server_grace(std::chrono::milliseconds grace) {
  std::lock_guard<std::mutex> lock(mutex_);
  options_.server_grace = grace;
}

StoreClient::~StoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

StoreValue StoreClient::call(std::string request, std::chrono::milliseconds server_timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!broken_.empty()) throw StoreError(broken_);
  const auto patience =
      std::max(options_.timeout, detail::saturating_sum(server_timeout, options_.server_grace));
  const auto deadline = detail::deadline_after(patience);
  std::string error;
  if (!detail::send_all(fd_, request.data(), request.size(), deadline, &error)) {
    break_connection(error, patience);
  }
  return fields_of(receive(deadline, patience), server_timeout);
}

std::vector<std::int64_t> StoreClient::run(const Batch& batch) {
  if (batch.requests_.empty()) return {};
  std::lock_guard<std::mutex> lock(mutex_);
  if (!broken_.empty()) throw StoreError(broken_);
  const auto deadline = detail::deadline_after(options_.timeout);
  std::string requests;
  for (const std::string& request : batch.requests_)
    requests += request;
  std::string error;
  if (!detail::send_all(fd_, requests.data(), requests.size(), deadline, &error)) {
    break_connection(error, options_.timeout);
  }
  // Every answer is read before any is judged: the stream stays in step.
  std::vector<StoreValue> answers;
  answers.reserve(batch.requests_.size());
  std::optional<StoreError> unreadable;  // an answer whose file could not be read
  for (std::size_t i = 0; i < batch.requests_.size(); ++i) {
    try {
      answers.push_back(receive(deadline, options_.timeout));
    } catch (const StoreError& failure) {
      if (!broken_.empty()) throw;  // the connection is lost
      if (!unreadable) unreadable = failure;
      answers.emplace_back();
    }
  }
  if (unreadable) throw *unreadable;
  std::vector<std::int64_t> sums;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    const StoreValue fields = fields_of(answers[i], {});
    if (batch.adds_[i]) sums.push_back(wire::Reader(fields.view()).i64());
  }
  return sums;
}

void StoreClient::shut_down() noexcept {
  // The descriptor stays open (closed by the destructor): a call under way
  // in another thread reads the end of the stream, never a reused number.
  ::shutdown(fd_, SHUT_RDWR);
}

StoreValue StoreClient::receive(detail::Deadline deadline, std::chrono::milliseconds patience) {
  std::string error;
  std::string payload;
  std::vector<detail::Fd> files;
  bool ok = detail::recv_frame(fd_, &payload, kMaxAnswerBytes, deadline, &error,
                               takes_files_ ? &files : nullptr);
  if (ok && payload.empty()) {
    ok = false;
    error = "sent an empty answer";
  }
  if (!ok) break_connection(error, patience);
  if (static_cast<wire::Status>(payload[0]) != wire::Status::in_file) {
    return StoreValue(std::move(payload));
  }
  auto mapped = detail::map_answer_file(std::string_view(payload).substr(1), &files, &error);
  if (!mapped) throw StoreError(cat("store at ", address_, ": it ", error));
  return std::move(*mapped);
}

void StoreClient::break_connection(const std::string& error, std::chrono::milliseconds patience) {
  // The stream is out of step now: every later call fails the same way.
  broken_ = error == "timed out" ? cat("lost the store at ", address_, ": it gave no answer in ",
                                       detail::duration_text(patience))
                                 : cat("lost the store at ", address_, ": it ", error,
                                       " (has the process that hosts it exited?)");
  throw StoreError(broken_);
}

StoreValue StoreClient::fields_of(const StoreValue& answer,
                                  std::chrono::milliseconds server_timeout) const {
  const auto status = static_cast<wire::Status>(answer.view()[0]);
  const std::string_view fields = answer.view().substr(1);
  if (status == wire::Status::error) {
    wire::Reader reader(fields);
    throw StoreError(cat("store at ", address_, ": ", reader.bytes()));
  }
  if (status == wire::Status::timeout) {
    wire::Reader reader(fields);
    throw Timeout(cat("store at ", address_, ": still missing ", quoted_list(reader.strings()),
                      " after ", server_timeout.count(), " ms"));
  }
  return answer.part(fields);
}

StoreClient::Batch& StoreClient::Batch::set(std::string_view key, std::string_view value) {
  requests_.push_back(key_value_request(wire::Op::set, key, value));
  adds_.push_back(false);
  return *this;
}

StoreClient::Batch& StoreClient::Batch::add(std::string_view key, std::int64_t delta) {
  requests_.push_back(add_request(key, delta));
  adds_.push_back(true);
  return *this;
}

StoreClient::Batch& StoreClient::Batch::set_on_close(std::string_view key, std::string_view value) {
  requests_.push_back(key_value_request(wire::Op::set_on_close, key, value));
  adds_.push_back(false);
  return *this;
}

void StoreClient::set(std::string_view key, std::string_view value) {
  call(key_value_request(wire::Op::set, key, value), {});
}

std::string StoreClient::get(std::string_view key, std::chrono::milliseconds timeout) {
  return std::string(get_shared(key, timeout).view());
}

StoreValue StoreClient::get_shared(std::string_view key, std::chrono::milliseconds timeout) {
  const StoreValue answer = call(wire::Writer()
                                     .u8(static_cast<std::uint8_t>(wire::Op::get))
                                     .bytes(key)
                                     .i64(timeout.count())
                                     .frame(),
                                 timeout);
  return answer.part(wire::Reader(answer.view()).bytes());
}

std::int64_t StoreClient::add(std::string_view key, std::int64_t delta) {
  const StoreValue answer = call(add_request(key, delta), {});
  return wire::Reader(answer.view()).i64();
}

std::string StoreClient::compare_set(std::string_view key, std::string_view expected,
                                     std::string_view desired) {
  const StoreValue answer = call(wire::Writer()
                                     .u8(static_cast<std::uint8_t>(wire::Op::compare_set))
                                     .bytes(key)
                                     .bytes(expected)
                                     .bytes(desired)
                                     .frame(),
                                 {});
  return std::string(wire::Reader(answer.view()).bytes());
}

void StoreClient::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  call(wire::Writer()
           .u8(static_cast<std::uint8_t>(wire::Op::wait))
           .strings(keys)
           .i64(timeout.count())
           .frame(),
       timeout);
}

std::vector<std::string> StoreClient::multi_get(const std::vector<std::string>& keys,
                                                std::chrono::milliseconds timeout) {
  const StoreValue answer = call(wire::Writer()
                                     .u8(static_cast<std::uint8_t>(wire::Op::multi_get))
                                     .strings(keys)
                                     .i64(timeout.count())
                                     .frame(),
                                 timeout);
  wire::Reader reader(answer.view());
  std::vector<std::string> values = reader.strings();
  reader.expect_end();
  if (values.size() != keys.size()) {
    throw StoreError(cat("store at ", address_, ": MULTI_GET of ", keys.size(), " keys answered ",
                         values.size(), " values"));
  }
  return values;
}

bool StoreClient::check(const std::vector<std::string>& keys) {
  const StoreValue answer =
      call(wire::Writer().u8(static_cast<std::uint8_t>(wire::Op::check)).strings(keys).frame(), {});
  return wire::Reader(answer.view()).u8() != 0;
}

bool StoreClient::delete_key(std::string_view key) {
  const StoreValue answer = call(
      wire::Writer().u8(static_cast<std::uint8_t>(wire::Op::delete_key)).bytes(key).frame(), {});
  return wire::Reader(answer.view()).u8() != 0;
}

void StoreClient::set_on_close(std::string_view key, std::string_view value) {
  call(key_value_request(wire::Op::set_on_close, key, value), {});
}

void StoreClient::clear_on_close() {
  call(wire::Writer().u8(static_cast<std::uint8_t>(wire::Op::clear_on_close)).frame(), {});
}

std::int64_t StoreClient::num_keys() {
  const StoreValue answer =
      call(wire::Writer().u8(static_cast<std::uint8_t>(wire::Op::num_keys)).frame(), {});
  return wire::Reader(answer.view()).i64();
}

std::int64_t StoreClient::set_then_add(std::string_view key, std::string_view value,
                                       std::string_view counter, std::int64_t delta) {
  return run(Batch().set(key, value).add(counter, delta)).front();
}

// ---------------------------------------------------------------- Store

std::int64_t Store::set_then_add(std::string_view key, std::string_view value,
                                 std::string_view counter, std::int64_t delta) {
  set(key, value);
  return add(counter, delta);
}

std::vector<std::string> Store::multi_get(const std::vector<std::string>& keys,
                                          std::chrono::milliseconds timeout) {
  wait(keys, timeout);
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (const std::string& key : keys)
    values.push_back(get(key, timeout));
  return values;
}

// ---------------------------------------------------------------- PrefixStore

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> base)
    : prefix_(std::move(prefix)), base_(std::move(base)) {}

std::string PrefixStore::full(std::string_view key) const {
  return cat(prefix_, "/", key);
}

std::vector<std::string> PrefixStore::full(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const std::string& key : keys)
    out.push_back(full(key));
  return out;
}

void PrefixStore::set(std::string_view key, std::string_view value) {
  base_->set(full(key), value);
}
std::string PrefixStore::get(std::string_view key, std::chrono::milliseconds timeout) {
  return base_->get(full(key), timeout);
}
StoreValue PrefixStore::get_shared(std::string_view key, std::chrono::milliseconds timeout) {
  return base_->get_shared(full(key), timeout);
}
std::int64_t PrefixStore::add(std::string_view key, std::int64_t delta) {
  return base_->add(full(key), delta);
}
std::int64_t PrefixStore::set_then_add(std::string_view key, std::string_view value,
                                       std::string_view counter, std::int64_t delta) {
  return base_->set_then_add(full(key), value, full(counter), delta);
}
std::string PrefixStore::compare_set(std::string_view key, std::string_view expected,
                                     std::string_view desired) {
  return base_->compare_set(full(key), expected, desired);
}
void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  base_->wait(full(keys), timeout);
}
std::vector<std::string> PrefixStore::multi_get(const std::vector<std::string>& keys,
                                                std::chrono::milliseconds timeout) {
  return base_->multi_get(full(keys), timeout);
}
bool PrefixStore::check(const std::vector<std::string>& keys) {
  return base_->check(full(keys));
}
bool PrefixStore::delete_key(std::string_view key) {
  return base_->delete_key(full(key));
}
std::int64_t PrefixStore::num_keys() {
  return base_->num_keys();
}

}  // namespace cohort
