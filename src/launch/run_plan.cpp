#include "launch/run_plan.hpp"

#include <map>

#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/fd.hpp"
#include "core/strings.hpp"

namespace cohort::detail {
namespace {

// RunOptions' fields, then the role's, each once: the plan's whole
// vocabulary. The role's `entry` (a function) cannot travel and is checked
// apart.
template <class Plan, class Visit>
void for_each_field(Plan& plan, Visit&& field) {
  auto& o = plan.options;
  field("command", o.command);
  field("nproc_per_node", o.nproc_per_node);
  field("master_addr", o.master_addr);
  field("master_port", o.master_port);
  field("agent_store", o.agent_store);
  field("gpus_per_proc", o.gpus_per_proc);
  field("cpu_bind", o.cpu_bind);
  field("max_restarts", o.max_restarts);
  field("grace", o.grace);
  field("timeout", o.timeout);
  field("signals", o.signals);
  field("log_dir", o.log_dir);
  field("trace", o.trace);
  field("prefix", o.prefix);
  field("console_ranks", o.console_ranks);
  field("console_local_ranks", o.console_local_ranks);
  field("redirects", o.redirects);
  field("tee", o.tee);
  field("local_rank_arg", o.local_rank_arg);
  field("role", o.role);
  field("run_id", o.run_id);
  field("python", o.python);
  field("module", o.module);
  field("no_python", o.no_python);
  field("run_path", o.run_path);
  field("nnodes", o.nnodes);
  field("node_rank", o.node_rank);
  field("min_nodes", o.min_nodes);
  field("last_call", o.last_call);
  field("rdzv_host", o.rdzv_host);
  field("rdzv_port", o.rdzv_port);
  field("local_addr", o.local_addr);
  field("job_token", o.job_token);
  field("insecure", o.insecure);
  field("rendezvous_timeout", o.rendezvous_timeout);
  field("heartbeat_timeout", o.heartbeat_timeout);
  field("store_relay", o.store_relay);
  field("torch_store_relay", o.torch_store_relay);
  field("tree_width", o.tree_width);
  field("hosts", o.hosts);
  field("ssh", o.ssh);
  field("remote_cohort", o.remote_cohort);
  field("forward_env", o.forward_env);
  field("forward_env_prefixes", o.forward_env_prefixes);
  auto& role = plan.role;
  field("store_served_elsewhere", role.store_served_elsewhere);
  field("node_hosts", role.node_hosts);
  field("stop_on_stdin_eof", role.stop_on_stdin_eof);
}
constexpr std::size_t kOptionsCarried = 44;
constexpr std::size_t kRoleCarried = 3;
constexpr std::size_t kRoleNotCarried = 1;  // entry

// The number of fields of an aggregate: how many values brace-initialize it.
struct AnyField {
  template <class T>
  operator T&() const&&;  // never defined: only asked about at compile time
};
template <class T, class... Fields>
constexpr std::size_t aggregate_field_count() {
  if constexpr (requires { T{Fields{}..., AnyField{}}; }) {
    return aggregate_field_count<T, Fields..., AnyField>();
  } else {
    return sizeof...(Fields);
  }
}

std::size_t table_size() {
  RunPlan plan;
  std::size_t count = 0;
  for_each_field(plan, [&count](const char*, const auto&) { ++count; });
  return count;
}

std::string escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\0':
        out += "\\0";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::optional<std::string> unescape(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      out += text[i];
      continue;
    }
    if (++i == text.size()) return std::nullopt;
    switch (text[i]) {
      case '\\':
        out += '\\';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case '0':
        out += '\0';
        break;
      default:
        return std::nullopt;
    }
  }
  return out;
}

constexpr const char* kLocalRankArgNames[] = {"none", "underscore", "dash"};

// One field's lines, appended to `out`.
class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}

  void operator()(const char* name, const std::vector<std::string>& items) {
    for (const std::string& item : items)
      line(name, escape(item));
  }
  void operator()(const char* name, const std::string& value) { line(name, escape(value)); }
  void operator()(const char* name, int value) { line(name, cat(value)); }
  void operator()(const char* name, bool value) { line(name, value ? "1" : "0"); }
  void operator()(const char* name, std::chrono::milliseconds value) {
    line(name, cat(value.count()));
  }
  void operator()(const char* name, const std::optional<std::string>& value) {
    if (value) line(name, escape(*value));
  }
  void operator()(const char* name, const std::set<int>& ranks) {
    for (int rank : ranks)
      line(name, cat(rank));
  }
  void operator()(const char* name, const std::map<int, int>& spec) {
    for (const auto& [rank, streams] : spec)
      line(name, cat(rank, " ", streams));
  }
  void operator()(const char* name, RunOptions::LocalRankArg value) {
    line(name, kLocalRankArgNames[static_cast<int>(value)]);
  }
  void operator()(const char* name, const std::vector<RunOptions::Host>& hosts) {
    for (const RunOptions::Host& host : hosts)
      line(name, cat(host.slots, " ", escape(host.name)));
  }

 private:
  void line(const char* name, const std::string& value) { out_ += cat(name, " ", value, "\n"); }
  std::string& out_;
};

// Sets the field `name` names from one line's value; false when the value
// is malformed.
class Reader {
 public:
  Reader(std::string_view name, std::string_view value) : name_(name), value_(value) {}

  bool matched() const { return matched_; }
  bool valid() const { return valid_; }

  template <class T>
  void operator()(const char* name, T& field) {
    if (matched_ || name_ != name) return;
    matched_ = true;
    valid_ = read(field);
  }

 private:
  bool read(std::vector<std::string>& items) {
    auto item = unescape(value_);
    if (item) items.push_back(std::move(*item));
    return item.has_value();
  }
  bool read(std::string& field) {
    auto value = unescape(value_);
    if (value) field = std::move(*value);
    return value.has_value();
  }
  bool read(std::optional<std::string>& field) {
    auto value = unescape(value_);
    if (value) field = std::move(*value);
    return value.has_value();
  }
  bool read(int& field) { return integer(value_, field); }
  bool read(bool& field) {
    field = value_ == "1";
    return value_ == "1" || value_ == "0";
  }
  bool read(std::chrono::milliseconds& field) {
    auto count = parse_int(value_);
    if (count) field = std::chrono::milliseconds(*count);
    return count.has_value();
  }
  bool read(std::set<int>& ranks) {
    int rank = 0;
    if (!integer(value_, rank)) return false;
    ranks.insert(rank);
    return true;
  }
  bool read(std::map<int, int>& spec) {
    const std::size_t space = value_.find(' ');
    int rank = 0;
    int streams = 0;
    if (space == std::string_view::npos || !integer(value_.substr(0, space), rank) ||
        !integer(value_.substr(space + 1), streams)) {
      return false;
    }
    spec[rank] = streams;
    return true;
  }
  bool read(RunOptions::LocalRankArg& field) {
    for (int i = 0; i < 3; ++i) {
      if (value_ == kLocalRankArgNames[i]) {
        field = static_cast<RunOptions::LocalRankArg>(i);
        return true;
      }
    }
    return false;
  }
  bool read(std::vector<RunOptions::Host>& hosts) {
    const std::size_t space = value_.find(' ');
    RunOptions::Host host;
    if (space == std::string_view::npos || !integer(value_.substr(0, space), host.slots)) {
      return false;
    }
    auto name = unescape(value_.substr(space + 1));
    if (!name) return false;
    host.name = std::move(*name);
    hosts.push_back(std::move(host));
    return true;
  }
  static bool integer(std::string_view text, int& out) {
    auto number = parse_int(text);
    if (!number || *number < INT32_MIN || *number > INT32_MAX) return false;
    out = static_cast<int>(*number);
    return true;
  }

  std::string_view name_;
  std::string_view value_;
  bool matched_ = false;
  bool valid_ = false;
};

constexpr std::string_view kMagic = "cohort-plan";
constexpr std::size_t kMaxPlanBytes = 16 << 20;

}  // namespace

// A field added to RunOptions or AgentRole stops the build here until the
// table lists it (and a test checks that the table holds them all).
static_assert(aggregate_field_count<RunOptions>() == kOptionsCarried,
              "RunOptions gained or lost a field: list it in for_each_field (run_plan.cpp) "
              "and count it in kOptionsCarried");
static_assert(aggregate_field_count<AgentRole>() == kRoleCarried + kRoleNotCarried,
              "AgentRole gained or lost a field: list it in for_each_field (run_plan.cpp) "
              "and count it in kRoleCarried");

std::size_t run_plan_field_count() {
  return table_size();
}

std::size_t run_options_field_count() {
  return aggregate_field_count<RunOptions>() + aggregate_field_count<AgentRole>() - kRoleNotCarried;
}

std::string encode_run_plan(const RunPlan& plan) {
  if (plan.role.entry) {
    throw InvalidArgument(
        "cohort run: a job whose workers are forks of this process (cohort::spawn) cannot "
        "start agents on other hosts: run a PROGRAM with --hostfile or --hosts");
  }
  std::string body;
  for_each_field(plan, Writer(body));
  return cat(kMagic, " ", kRunPlanVersion, " ", body.size(), "\n", body);
}

RunPlan decode_run_plan(std::string_view text, std::string_view source) {
  RunPlan plan;
  int number = 0;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++number;
    const std::size_t space = line.find(' ');
    const std::string_view name = line.substr(0, space);
    const std::string_view value =
        space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
    Reader reader(name, value);
    for_each_field(plan, reader);
    if (!reader.matched()) {
      throw InvalidArgument(cat(source, " line ", number, ": the option '", name,
                                "' is not one this cohort knows: the launcher's host runs a "
                                "newer cohort; install the same version on every host"));
    }
    if (!reader.valid()) {
      throw InvalidArgument(cat(source, " line ", number, ": '", line, "' is not a valid ", name));
    }
  }
  return plan;
}

RunPlan read_run_plan(int fd, std::string_view source) {
  // The header, byte by byte: what follows the plan must stay unread.
  std::string header;
  for (;;) {
    char c = 0;
    const ssize_t n = retry_eintr([&] { return ::read(fd, &c, 1); });
    if (n < 0) throw Error(cat(source, ": ", errno_text(errno)));
    if (n == 0 || c == '\n') break;
    if (header.size() > 100) break;
    header.push_back(c);
  }
  const std::vector<std::string> words = split_at(header, ' ');
  if (words.size() != 3 || words[0] != kMagic) {
    throw InvalidArgument(cat(source, ": expected a plan from cohort run --hostfile ('", kMagic,
                              " ", kRunPlanVersion, " BYTES'), got '", header,
                              "'; this command is started by cohort run over ssh"));
  }
  if (words[1] != cat(kRunPlanVersion)) {
    throw InvalidArgument(cat(source, ": the plan is version ", words[1],
                              ", this cohort reads version ", kRunPlanVersion,
                              ": install the same cohort on every host"));
  }
  const auto bytes = parse_int(words[2]);
  if (!bytes || *bytes < 0 || static_cast<std::size_t>(*bytes) > kMaxPlanBytes) {
    throw InvalidArgument(cat(source, ": '", words[2], "' is not a plan size"));
  }
  std::string body(static_cast<std::size_t>(*bytes), '\0');
  std::size_t got = 0;
  while (got < body.size()) {
    const ssize_t n = retry_eintr([&] { return ::read(fd, body.data() + got, body.size() - got); });
    if (n < 0) throw Error(cat(source, ": ", errno_text(errno)));
    if (n == 0) {
      throw InvalidArgument(cat(source, ": the plan ended after ", got, " of ", body.size(),
                                " bytes (did the launcher stop?)"));
    }
    got += static_cast<std::size_t>(n);
  }
  return decode_run_plan(body, source);
}

}  // namespace cohort::detail
