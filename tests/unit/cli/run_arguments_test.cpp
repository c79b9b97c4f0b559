// `cohort run`'s options as torchrun's users write them: every spelling,
// PET_<NAME> fallbacks, and errors that name what the user wrote.
#include "cli/run_arguments.hpp"

#include <gtest/gtest.h>

#include <cohort/errors.hpp>

namespace cohort::cli {
namespace {

using Variables = std::map<std::string, std::string>;

// Parses `words` as the option part of a `cohort run` command line, the way
// CLI11 hands values over, with `variables` as the environment.
RunOptions parse(const std::vector<std::pair<std::string, std::string>>& words,
                 const Variables& variables = {}) {
  RunArguments arguments;
  for (const auto& [option, value] : words)
    arguments.set(option, value, option);
  const auto getenv = [&variables](const char* name) -> const char* {
    auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  };
  arguments.take_environment(getenv);
  return to_run_options(arguments, {"train.py"}, HostCounts::fixed(8, 0), getenv);
}

std::string error_of(const std::vector<std::pair<std::string, std::string>>& words,
                     const Variables& variables = {}) {
  try {
    parse(words, variables);
  } catch (const InvalidArgument& error) {
    return error.what();
  }
  return "accepted";
}

TEST(RunArguments, EveryOptionHasBothSpellingsAndAPetVariable) {
  for (const OptionSpec& spec : run_option_table()) {
    const std::string names(spec.names);
    const std::string canonical(spec.canonical);
    if (canonical.find('-', 2) != std::string::npos) {
      std::string underscore = canonical;
      for (std::size_t i = 2; i < underscore.size(); ++i)
        if (underscore[i] == '-') underscore[i] = '_';
      EXPECT_NE(names.find(underscore), std::string::npos) << names;
    }
    if (spec.help.empty()) continue;  // cohort's own, for the agents it starts
    std::string variable = "PET_" + canonical.substr(2);
    for (char& c : variable)
      c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(spec.variable, variable) << names;
  }
}

// pytorch/examples' run_example.sh and the DDP tutorial's lines.
TEST(RunArguments, TorchrunsOwnCommandLines) {
  RunOptions options = parse({{"--nnodes", "1"},
                              {"--nproc-per-node", "2"},
                              {"--rdzv-id", "101"},
                              {"--rdzv-endpoint", "localhost:5972"}});
  EXPECT_EQ(options.nnodes, 1);
  EXPECT_EQ(options.nproc_per_node, 2);
  EXPECT_EQ(options.run_id, "101");
  EXPECT_EQ(options.node_rank, -1);
  options = parse({{"--nnodes", "2"},
                   {"--nproc-per-node", "4"},
                   {"--rdzv-backend", "c10d"},
                   {"--rdzv-endpoint", "n1"},
                   {"--rdzv-conf", "join_timeout=30,read_timeout=7,last_call_timeout=1"},
                   {"--max-restarts", "0"},
                   {"--monitor-interval", "1"},
                   {"--start-method", "spawn"},
                   {"--role", "trainer"},
                   {"--local-addr", "n2"}});
  EXPECT_EQ(options.nnodes, 2);
  EXPECT_EQ(options.node_rank, -1);  // given at the rendezvous
  EXPECT_EQ(options.rdzv_host, "n1");
  EXPECT_EQ(options.rdzv_port, 29400);  // torchrun's c10d default
  EXPECT_EQ(options.rendezvous_timeout, std::chrono::seconds(30));
  EXPECT_EQ(options.heartbeat_timeout, std::chrono::seconds(7));
  EXPECT_EQ(options.role, "trainer");
  EXPECT_EQ(options.local_addr, "n2");
  // The static form: --master-addr/--master-port is where the agents meet.
  options = parse({{"--nnodes", "2"},
                   {"--node-rank", "1"},
                   {"--master-addr", "n1"},
                   {"--master-port", "1234"}});
  EXPECT_EQ(options.node_rank, 1);
  EXPECT_EQ(options.rdzv_port, 1234);
  EXPECT_EQ(options.master_port, 0);
  // On one node an endpoint changes nothing: the store stays on loopback.
  options = parse({{"--rdzv-endpoint", "somehost:5972"}});
  EXPECT_EQ(options.master_addr, "127.0.0.1");
}

TEST(RunArguments, ScriptFormsOutputAndLocalRank) {
  RunOptions options = parse({{"--module", "1"},
                              {"--redirects", "3"},
                              {"--tee", "0:1,1:2"},
                              {"--local-ranks-filter", "0,2"},
                              {"--local-rank-arg", "dash"}});
  EXPECT_TRUE(options.module);
  EXPECT_EQ(options.redirects, (std::map<int, int>{{-1, 3}}));
  EXPECT_EQ(options.tee, (std::map<int, int>{{0, 1}, {1, 2}}));
  EXPECT_EQ(options.console_local_ranks, (std::set<int>{0, 2}));
  EXPECT_EQ(options.local_rank_arg, RunOptions::LocalRankArg::dash);
  EXPECT_EQ(parse({{"--local-rank-arg", "underscore"}}).local_rank_arg,
            RunOptions::LocalRankArg::underscore);
  EXPECT_FALSE(parse({{"--no-agent-store", "1"}}).agent_store);
  EXPECT_TRUE(parse({{"--use-env", "1"}}).agent_store);
}

TEST(RunArguments, RankListsAreBounded) {
  EXPECT_EQ(parse({{"--ranks", "0-65535"}}).console_ranks.size(), 65536u);
  EXPECT_NE(error_of({{"--ranks", "0-65535,70000"}}).find("names more than 65536 ranks"),
            std::string::npos);
  // Repeating a range counts each time: the work is bounded, not just the result.
  EXPECT_NE(error_of({{"--ranks", "0-40000,0-40000"}}).find("names more than"), std::string::npos);
  EXPECT_NE(error_of({{"--local-ranks-filter", "4294967296"}}).find("is not a rank"),
            std::string::npos);
  EXPECT_NE(error_of({{"--ranks", "3-1"}}).find("'3-1' is not a rank or range"), std::string::npos);
}

TEST(RunArguments, PetVariablesFillWhatTheCommandLineDidNotGive) {
  RunOptions options = parse({{"--nproc-per-node", "3"}}, {{"PET_NPROC_PER_NODE", "5"},
                                                           {"PET_MAX_RESTARTS", "2"},
                                                           {"PET_RDZV_ENDPOINT", "head:29603"},
                                                           {"PET_NNODES", "2"},
                                                           {"PET_STANDALONE", "0"},
                                                           {"PET_NO_PYTHON", "true"}});
  EXPECT_EQ(options.nproc_per_node, 3);  // the command line wins
  EXPECT_EQ(options.max_restarts, 2);
  EXPECT_EQ(options.rdzv_host, "head");
  EXPECT_EQ(options.rdzv_port, 29603);
  EXPECT_TRUE(options.no_python);
}

// COHORT_STORE_RELAY (and COHORT_TORCH_STORE_RELAY, COHORT_TREE_WIDTH) is
// read where the options are made, so that a plan sent to remote agents
// (--hosts) carries it.
TEST(RunArguments, TheStoreRelayIsAnOptionOfTheRun) {
  EXPECT_TRUE(parse({}).store_relay);
  EXPECT_FALSE(parse({}, {{"COHORT_STORE_RELAY", "0"}}).store_relay);
  EXPECT_TRUE(parse({}, {{"COHORT_STORE_RELAY", "yes"}}).store_relay);
  EXPECT_EQ(error_of({}, {{"COHORT_STORE_RELAY", "maybe"}}),
            "COHORT_STORE_RELAY 'maybe': expected 1 or 0 (true or false)");
  EXPECT_TRUE(parse({}).torch_store_relay);
  EXPECT_FALSE(parse({}, {{"COHORT_TORCH_STORE_RELAY", "0"}}).torch_store_relay);
  EXPECT_TRUE(parse({}, {{"COHORT_TORCH_STORE_RELAY", "0"}}).store_relay);
  EXPECT_EQ(parse({}).tree_width, 32);
  EXPECT_EQ(parse({}, {{"COHORT_TREE_WIDTH", "2"}}).tree_width, 2);
  EXPECT_EQ(error_of({}, {{"COHORT_TREE_WIDTH", "1"}}),
            "COHORT_TREE_WIDTH '1': expected a whole number of 2 or more: the relays of other "
            "nodes that connect to one (docs/rendezvous.md)");
}

// torchrun's elastic spelling: --nnodes MIN:MAX (and PET_NNODES), with the
// first rendezvous' last call from --rdzv-conf.
TEST(RunArguments, ElasticMembership) {
  RunOptions options = parse({{"--nnodes", "2:4"},
                              {"--rdzv-endpoint", "n1:29400"},
                              {"--rdzv-conf", "last_call_timeout=2.5"}});
  EXPECT_EQ(options.nnodes, 4);
  EXPECT_EQ(options.min_nodes, 2);
  EXPECT_EQ(options.last_call, std::chrono::milliseconds(2500));
  options = parse({}, {{"PET_NNODES", "1:3"}});
  EXPECT_EQ(options.nnodes, 3);
  EXPECT_EQ(options.min_nodes, 1);
  options = parse({{"--hosts", "n1,n2,n3"}, {"--nnodes", "2:3"}});  // MAX: the hosts
  EXPECT_EQ(options.min_nodes, 2);
  EXPECT_EQ(options.hosts.size(), 3u);
  options = parse({{"--nnodes", "3:3"}});  // MIN == MAX: not elastic
  EXPECT_EQ(options.nnodes, 3);
  EXPECT_EQ(options.min_nodes, 0);
}

TEST(RunArguments, ErrorsNameTheOptionOrTheVariable) {
  EXPECT_EQ(error_of({{"--nproc-per-node", "lots"}}),
            "--nproc-per-node 'lots': expected a number from 1 to 4096, auto, cpu or gpu");
  EXPECT_EQ(error_of({}, {{"PET_NPROC_PER_NODE", "lots"}}),
            "PET_NPROC_PER_NODE 'lots': expected a number from 1 to 4096, auto, cpu or gpu");
  EXPECT_NE(error_of({{"--rdzv-backend", "etcd-v2"}}).find("no etcd server is needed"),
            std::string::npos);
  EXPECT_NE(error_of({{"--rdzv-conf", "timeout=5,colour=blue"}}).find("unknown key 'colour'"),
            std::string::npos);
  EXPECT_NE(error_of({{"--rdzv-conf", "timeout=never"}}).find("--rdzv-conf timeout 'never'"),
            std::string::npos);
  EXPECT_NE(error_of({{"--redirects", "5"}}).find("--redirects '5': expected 0-3"),
            std::string::npos);
  EXPECT_NE(error_of({{"--rdzv-endpoint", "host:99999"}}).find("port from 1 to 65535"),
            std::string::npos);
  EXPECT_NE(error_of({{"--nnodes", "4:2"}}).find("1 <= MIN <= MAX"), std::string::npos);
  EXPECT_NE(error_of({{"--hosts", "n1,n2"}, {"--nnodes", "1:3"}}).find("give --nnodes MIN:2"),
            std::string::npos);
  EXPECT_NE(error_of({}, {{"PET_STANDALONE", "maybe"}}).find("PET_STANDALONE 'maybe'"),
            std::string::npos);
  EXPECT_NE(error_of({{"--standalone", "1"}, {"--nnodes", "2"}}).find("drop one of them"),
            std::string::npos);
  EXPECT_NE(error_of({{"--run-id", "a"}, {"--rdzv-id", "b"}}).find("disagree"), std::string::npos);
  EXPECT_NE(error_of({{"--start-method", "thread"}}).find("spawn, fork or forkserver"),
            std::string::npos);
  EXPECT_NE(error_of({{"--logs-specs", "mine"}}).find("no log plugins"), std::string::npos);
  // torchrun's options newer than 2.6: refused with what to do instead.
  EXPECT_NE(error_of({{"--event-log-handler", "mine"}}).find("null or console"), std::string::npos);
  EXPECT_NE(error_of({{"--duplicate-stderr-filters", "x"}}).find("--log-dir DIR"),
            std::string::npos);
  EXPECT_NE(error_of({{"--numa-binding", "node"}}).find("numactl"), std::string::npos);
  EXPECT_NE(error_of({}, {{"PET_VIRTUAL_LOCAL_RANK", "1"}}).find("torch.cuda.set_device"),
            std::string::npos);
}

// A job token that can be guessed is refused, in the variable as in a file
// (cohort run --token-file); a strong one is taken as given.
TEST(RunArguments, AGuessableJobTokenIsRefused) {
  for (const char* weak : {"a", "TopSecretJobToken0123", "0123456789abcdef0123456789abcde",
                           "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}) {
    const std::string error = error_of({}, {{"COHORT_JOB_TOKEN", weak}});
    EXPECT_NE(error.find("COHORT_JOB_TOKEN can be guessed"), std::string::npos) << weak;
    EXPECT_NE(error.find("/dev/urandom"), std::string::npos) << error;
    if (std::string_view(weak).size() > 8) {
      EXPECT_EQ(error.find(weak), std::string::npos) << "the secret is in the message: " << error;
    }
  }
  EXPECT_EQ(parse({}, {{"COHORT_JOB_TOKEN", "0123456789abcdef0123456789abcdef"}}).job_token,
            "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(parse({}, {{"COHORT_JOB_TOKEN", "q3V+8zL0xWm/2Rk9tYb4nA"}}).job_token,
            "q3V+8zL0xWm/2Rk9tYb4nA");  // 22 characters of base64: 132 bits
}

TEST(RunArguments, StreamSpecs) {
  EXPECT_EQ(parse_stream_spec("0", "-r"), (std::map<int, int>{{-1, 0}}));
  EXPECT_EQ(parse_stream_spec("9:0", "-r"), (std::map<int, int>{{9, 0}}));
  EXPECT_THROW(parse_stream_spec("1:4", "-r"), InvalidArgument);
  EXPECT_THROW(parse_stream_spec("x", "-r"), InvalidArgument);
}

}  // namespace
}  // namespace cohort::cli
