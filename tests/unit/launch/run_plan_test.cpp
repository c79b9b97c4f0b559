// The plan a remote agent receives (run_plan.hpp): every option survives
// the trip, and a plan from another cohort is refused with what to do.
#include "launch/run_plan.hpp"

#include <set>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cohort/errors.hpp>

#include "core/fd.hpp"

namespace cohort::detail {
namespace {

// Every field away from its default, with the bytes a careless codec loses.
RunPlan every_field_set() {
  RunPlan plan;
  RunOptions& o = plan.options;
  o.command = {"./train", "a b", "new\nline", "back\\slash", std::string("nul\0x", 5), ""};
  o.nproc_per_node = 7;
  o.master_addr = "10.1.2.3";
  o.master_port = 29511;
  o.agent_store = false;
  o.gpus_per_proc = 2;
  o.cpu_bind = "numa";
  o.max_restarts = 3;
  o.grace = std::chrono::milliseconds(1234);
  o.timeout = std::chrono::milliseconds(3000);
  o.signals = {"USR1", "TERM"};
  o.log_dir = "/tmp/logs dir";
  o.trace = "job trace.json";
  o.prefix = "";
  o.console_ranks = {0, 2, 9};
  o.console_local_ranks = {1};
  o.redirects = {{-1, 3}, {1, 2}};
  o.tee = {{0, 1}};
  o.local_rank_arg = RunOptions::LocalRankArg::dash;
  o.role = "trainer";
  o.run_id = "job-42";
  o.python = "/usr/bin/python3";
  o.module = true;
  o.no_python = true;
  o.run_path = true;
  o.nnodes = 4;
  o.node_rank = 2;
  o.min_nodes = 2;
  o.last_call = std::chrono::milliseconds(777);
  o.rdzv_host = "head";
  o.rdzv_port = 4242;
  o.local_addr = "10.0.0.7";
  plan.role.store_served_elsewhere = true;
  o.job_token = "0123456789abcdef0123";
  o.insecure = true;
  o.rendezvous_timeout = std::chrono::milliseconds(5000);
  o.heartbeat_timeout = std::chrono::milliseconds(2500);
  o.store_relay = false;
  plan.role.node_hosts = {"n1", "n2", "n3", "n4"};
  plan.role.stop_on_stdin_eof = true;
  o.hosts = {{"n1", 2}, {"odd host", 0}};
  o.ssh = "ssh -p 2222";
  o.remote_cohort = "/opt/cohort/bin/cohort";
  o.forward_env = {"BAR"};
  o.forward_env_prefixes = {"NCCL_"};
  return plan;
}

void expect_same(const RunPlan& plan_a, const RunPlan& plan_b) {
  const RunOptions& a = plan_a.options;
  const RunOptions& b = plan_b.options;
  EXPECT_EQ(a.command, b.command);
  EXPECT_EQ(a.nproc_per_node, b.nproc_per_node);
  EXPECT_EQ(a.master_addr, b.master_addr);
  EXPECT_EQ(a.master_port, b.master_port);
  EXPECT_EQ(a.agent_store, b.agent_store);
  EXPECT_EQ(a.gpus_per_proc, b.gpus_per_proc);
  EXPECT_EQ(a.cpu_bind, b.cpu_bind);
  EXPECT_EQ(a.max_restarts, b.max_restarts);
  EXPECT_EQ(a.grace, b.grace);
  EXPECT_EQ(a.timeout, b.timeout);
  EXPECT_EQ(a.signals, b.signals);
  EXPECT_EQ(a.log_dir, b.log_dir);
  EXPECT_EQ(a.trace, b.trace);
  EXPECT_EQ(a.prefix, b.prefix);
  EXPECT_EQ(a.console_ranks, b.console_ranks);
  EXPECT_EQ(a.console_local_ranks, b.console_local_ranks);
  EXPECT_EQ(a.redirects, b.redirects);
  EXPECT_EQ(a.tee, b.tee);
  EXPECT_EQ(a.local_rank_arg, b.local_rank_arg);
  EXPECT_EQ(a.role, b.role);
  EXPECT_EQ(a.run_id, b.run_id);
  EXPECT_EQ(a.python, b.python);
  EXPECT_EQ(a.module, b.module);
  EXPECT_EQ(a.no_python, b.no_python);
  EXPECT_EQ(a.run_path, b.run_path);
  EXPECT_EQ(a.nnodes, b.nnodes);
  EXPECT_EQ(a.node_rank, b.node_rank);
  EXPECT_EQ(a.min_nodes, b.min_nodes);
  EXPECT_EQ(a.last_call, b.last_call);
  EXPECT_EQ(a.rdzv_host, b.rdzv_host);
  EXPECT_EQ(a.rdzv_port, b.rdzv_port);
  EXPECT_EQ(a.local_addr, b.local_addr);
  EXPECT_EQ(a.job_token, b.job_token);
  EXPECT_EQ(a.insecure, b.insecure);
  EXPECT_EQ(a.rendezvous_timeout, b.rendezvous_timeout);
  EXPECT_EQ(a.heartbeat_timeout, b.heartbeat_timeout);
  EXPECT_EQ(a.store_relay, b.store_relay);
  ASSERT_EQ(a.hosts.size(), b.hosts.size());
  for (std::size_t i = 0; i < a.hosts.size(); ++i) {
    EXPECT_EQ(a.hosts[i].name, b.hosts[i].name);
    EXPECT_EQ(a.hosts[i].slots, b.hosts[i].slots);
  }
  EXPECT_EQ(a.ssh, b.ssh);
  EXPECT_EQ(a.remote_cohort, b.remote_cohort);
  EXPECT_EQ(a.forward_env, b.forward_env);
  EXPECT_EQ(a.forward_env_prefixes, b.forward_env_prefixes);
  EXPECT_EQ(plan_a.role.store_served_elsewhere, plan_b.role.store_served_elsewhere);
  EXPECT_EQ(plan_a.role.node_hosts, plan_b.role.node_hosts);
  EXPECT_EQ(plan_a.role.stop_on_stdin_eof, plan_b.role.stop_on_stdin_eof);
}

std::string body_of(const std::string& plan) {
  return plan.substr(plan.find('\n') + 1);
}

TEST(RunPlan, TheTableListsEveryOptionButTheFunction) {
  EXPECT_EQ(run_plan_field_count(), run_options_field_count());
}

TEST(RunPlan, EveryOptionSurvivesTheTrip) {
  const RunPlan sent = every_field_set();
  const std::string plan = encode_run_plan(sent);
  // Every field of the table is in the text (so every_field_set sets each).
  std::set<std::string> names;
  const std::string body = body_of(plan);
  for (std::size_t start = 0; start < body.size();) {
    const std::size_t end = body.find('\n', start);
    names.insert(body.substr(start, body.find(' ', start) - start));
    start = end + 1;
  }
  EXPECT_EQ(names.size(), run_plan_field_count()) << plan;
  expect_same(decode_run_plan(body, "test"), sent);
  // Defaults too: an empty optional and empty lists stay so.
  const RunPlan defaults;
  const RunPlan back = decode_run_plan(body_of(encode_run_plan(defaults)), "test");
  expect_same(back, defaults);
  EXPECT_FALSE(back.options.prefix.has_value());
}

TEST(RunPlan, IsReadFromADescriptorWithoutTakingWhatFollows) {
  int ends[2];
  ASSERT_EQ(pipe2(ends, O_CLOEXEC), 0);
  Fd read_end(ends[0]);
  Fd write_end(ends[1]);
  const RunPlan sent = every_field_set();
  const std::string plan = encode_run_plan(sent) + "after";
  ASSERT_EQ(::write(write_end.get(), plan.data(), plan.size()), static_cast<ssize_t>(plan.size()));
  expect_same(read_run_plan(read_end.get(), "the pipe"), sent);
  char rest[8] = {};
  EXPECT_EQ(::read(read_end.get(), rest, sizeof(rest)), 5);
  EXPECT_EQ(std::string(rest, 5), "after");
}

void expect_refused(const std::string& text, const std::string& says) {
  int ends[2];
  ASSERT_EQ(pipe2(ends, O_CLOEXEC), 0);
  Fd read_end(ends[0]);
  {
    Fd write_end(ends[1]);
    ASSERT_EQ(::write(write_end.get(), text.data(), text.size()),
              static_cast<ssize_t>(text.size()));
  }
  try {
    (void)read_run_plan(read_end.get(), "stdin");
    FAIL() << "accepted: " << text;
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find(says), std::string::npos) << error.what();
  }
}

TEST(RunPlan, APlanFromAnotherCohortOrNoPlanIsRefusedWithWhatToDo) {
  expect_refused("cohort-plan 99 0\n", "install the same cohort on every host");
  expect_refused("cohort-plan 1 12\nshiny_new 1\n",
                 "line 1: the option 'shiny_new' is not one this cohort knows");
  expect_refused("cohort-plan 1 9\nnnodes x\n", "line 1: 'nnodes x' is not a valid nnodes");
  expect_refused("cohort-plan 1 100\nnnodes 2\n", "the plan ended after 9 of 100 bytes");
  expect_refused("hello\n", "started by cohort run over ssh");
  expect_refused("", "started by cohort run over ssh");
  EXPECT_THROW(decode_run_plan("command bad\\q\n", "t"), InvalidArgument);
}

TEST(RunPlan, AForkedWorkerFunctionCannotTravel) {
  RunPlan plan;
  plan.role.entry = [] { return 0; };
  EXPECT_THROW(encode_run_plan(plan), InvalidArgument);
}

}  // namespace
}  // namespace cohort::detail
