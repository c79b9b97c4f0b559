// One fuzz target per parser of outside input. A target is a function over
// bytes that must never crash, hang or throw anything but the parser's own
// refusal. Built two ways: with -DCOHORT_BUILD_FUZZERS=ON and clang, each
// file is a libFuzzer binary (LLVMFuzzerTestOneInput); always, the same
// functions run in fuzz_replay_test over seeds and a fixed stream of
// mutations, so every build exercises them (under sanitizers too).
#pragma once

#include <cstddef>
#include <cstdint>

#ifdef COHORT_LIBFUZZER
#define COHORT_FUZZ_TARGET(name) \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
#else
#define COHORT_FUZZ_TARGET(name) int name(const std::uint8_t* data, std::size_t size)
#endif

namespace cohort::fuzz {
int torch_wire(const std::uint8_t* data, std::size_t size);
int error_file(const std::uint8_t* data, std::size_t size);
int run_arguments(const std::uint8_t* data, std::size_t size);
int run_words(const std::uint8_t* data, std::size_t size);
int hostlist(const std::uint8_t* data, std::size_t size);
int hostfile(const std::uint8_t* data, std::size_t size);
int run_plan(const std::uint8_t* data, std::size_t size);
int timeline(const std::uint8_t* data, std::size_t size);
int gpu_lists(const std::uint8_t* data, std::size_t size);
int launch_env(const std::uint8_t* data, std::size_t size);
int pmi_reply(const std::uint8_t* data, std::size_t size);
int store_server(const std::uint8_t* data, std::size_t size);
int store_protocols(const std::uint8_t* data, std::size_t size);
int exchange_table(const std::uint8_t* data, std::size_t size);
int round_table(const std::uint8_t* data, std::size_t size);
int output_lines(const std::uint8_t* data, std::size_t size);
int stop_record(const std::uint8_t* data, std::size_t size);
int master_address(const std::uint8_t* data, std::size_t size);
int secret_line(const std::uint8_t* data, std::size_t size);
int cgroup_quota(const std::uint8_t* data, std::size_t size);
int peer_entries(const std::uint8_t* data, std::size_t size);
int gloo_messages(const std::uint8_t* data, std::size_t size);
int loadavg(const std::uint8_t* data, std::size_t size);
int relay_request(const std::uint8_t* data, std::size_t size);
int file_answer(const std::uint8_t* data, std::size_t size);
int torch_relay(const std::uint8_t* data, std::size_t size);
int relay_upstream(const std::uint8_t* data, std::size_t size);
int tree_place(const std::uint8_t* data, std::size_t size);
}  // namespace cohort::fuzz
