// Runs every fuzz target (fuzz_target.hpp) over its seeds and 20000 inputs
// mutated from them with a fixed seed: a regression test in every build, and
// the check that the libFuzzer harnesses still compile and hold.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fuzz/fuzz_target.hpp"
#include "store/exchange.hpp"
#include "store/protocol.hpp"

namespace cohort::fuzz {
namespace {

using Target = int (*)(const std::uint8_t*, std::size_t);

std::string u64(std::uint64_t value) {
  std::string out;
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  return out;
}

// `count` mutated inputs: fewer for a harness whose every input is a
// connection of live servers' threads.
void replay(Target target, const std::vector<std::string>& seeds, int count = 20000) {
  std::mt19937 random(20261123);
  for (const std::string& seed : seeds)
    target(reinterpret_cast<const std::uint8_t*>(seed.data()), seed.size());
  for (int i = 0; i < count; ++i) {
    std::string input = seeds[random() % seeds.size()];
    const int edits = 1 + static_cast<int>(random() % 8);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = input.empty() ? 0 : random() % input.size();
      switch (random() % 4) {
        case 0:
          if (!input.empty()) input[at] = static_cast<char>(random());
          break;
        case 1:
          input.insert(at, 1, static_cast<char>(random()));
          break;
        case 2:
          if (!input.empty()) input.erase(at, 1 + random() % 4);
          break;
        default:
          input += seeds[random() % seeds.size()];
      }
    }
    target(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
  }
}

TEST(FuzzReplay, TorchWire) {
  replay(torch_wire, {std::string(1, '\0') + u64(3) + "/ab" + u64(3) + "xyz",
                      std::string(1, '\5') + u64(2) + u64(2) + "/a" + u64(3) + "/bb",
                      std::string(1, '\3') + u64(2) + "/k" + u64(5), std::string(1, '\6'),
                      std::string("\x00\xCE\xF7\x85\x3C", 5)});
}

TEST(FuzzReplay, ErrorFile) {
  replay(
      error_file,
      {R"({"message": {"message": "RuntimeError: x", "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n    f()\nRuntimeError: x\n", "timestamp": "1"}}})",
       R"({"message": "plain"})", "[1, 2, {\"message\": null}]"});
}

TEST(FuzzReplay, RunArguments) {
  std::vector<std::string> seeds;
  for (const char* value : {"4", "auto", "localhost:29400", "[::1]:5", "3", "0:1,1:2",
                            "join_timeout=5,read_timeout=2", "c10d", "1:2", "0,2-3", "dash"}) {
    for (char option = 0; option < 48; ++option)
      seeds.push_back(std::string(1, option) + value);
  }
  replay(run_arguments, seeds);
}

TEST(FuzzReplay, RunWords) {
  replay(run_words,
         {"-n\n4\n./train\n--lr\n3", "--nproc_per_node=2\n--standalone\ntrain.py",
          "--env\nA\n--env=B\n--nnodes\n1:2\n--nnodes\n2\nx", "-m\n--local-rank-arg\npkg.mod",
          "--local_rank_arg=dash\n-n4\n--\n-weird\n--", "-t\n3\n-r0:1\n--max-restarts\n2\ny",
          "--rdzv-endpoint\nn1:29400\n--rdzv_backend\nc10d\n--help\nz", "--no-python\n-\n-n",
          "++"});  // once a finding: CLI11 ends the words at "++"
}

TEST(FuzzReplay, Hostlist) {
  std::string plain_names;  // a finding: more plain names than the bound got through
  for (int i = 0; i < 300; ++i)
    plain_names += "c1,";
  replay(hostlist, {"node[001-003,010],login", "rack[1-2]-n[01-02]", "[1-3]", "a,b,c", "n[9-11]",
                    "x[0-0]y[5]", "n[01-3]", "h[1-2],h3", plain_names});
}

TEST(FuzzReplay, Hostfile) {
  replay(hostfile, {"n1 slots=2\nn2 slots=2\n", "# comment\n\nn1\n", "n1 slots=4 # four\n",
                    "n1:2\nn2\n", "h slots=x\n"});
}

TEST(FuzzReplay, RunPlan) {
  replay(run_plan, {"command ./train\ncommand a\\nb\nnproc_per_node 2\ntimeout 3000\n",
                    "hosts 2 n1\nhosts 0 n\\0x\nprefix \nconsole_ranks 3\nredirects -1 3\n",
                    "local_rank_arg dash\ngrace 1\nagent_store 0\njob_token t\n", "x y\n"});
}

TEST(FuzzReplay, Timeline) {
  replay(timeline, {"[{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"tid\":2,\"ts\":17,\"dur\":5}]",
                    "[{\"ph\":\"i\",\"ts\":\"x\"},3,null]", "{\"traceEvents\":[]}", "[[]]"});
}

TEST(FuzzReplay, GpuLists) {
  replay(gpu_lists,
         {"0-55,112-167\n2,3,6,7", "0,2-3\nGPU-5,1,9", "\n0-7", "65535\n1,1", "3-1\n-1"});
}

TEST(FuzzReplay, ExchangeTable) {
  // A count byte, then the table: 2 values "ab" and ""; 7 of two hosts, 3
  // each, then the first again; a length past the end; a count that does
  // not match.
  const auto counted = [](char count, const std::vector<std::string>& values) {
    return std::string(1, count) + detail::encode_table(values);
  };
  replay(exchange_table,
         {counted(2, {"ab", ""}),
          counted(7, {"n1 boot-a", "n1 boot-a", "n1 boot-a", "n2 boot-b", "n2 boot-b", "n2 boot-b",
                      "n1 boot-a"}),
          std::string("\x01\x01\x00\x00\x00\xff\x00\x00\x00\x78\x00\x00\x00\x00", 14),
          counted(3, {"a"})});
}

TEST(FuzzReplay, RoundTable) {
  replay(round_table, {"0\t29500\tjob1\n0\t2\tn1\t100\tnode 0\n1\t2\tn2\t200\tnode 1",
                       "1\t0\tx\n3\t1\tn4\t9\tagent 3", "0\t1\t\n1\ta\n1\tb", "0\t0\t",
                       "33331333333331\t14\t"});  // once a finding: restarts past int
}

TEST(FuzzReplay, TreePlace) {
  replay(tree_place, {"10.0.0.7\t41234\trelay 4242-3735928559", "", "fe80::1\t65535\t", "h\t0\tx",
                      "h\t+1\t\t"});
}

TEST(FuzzReplay, LaunchEnv) {
  replay(
      launch_env,
      {"RANK=1\nWORLD_SIZE=4\nLOCAL_RANK=1\nMASTER_ADDR=h\nMASTER_PORT=29500\n",
       "SLURM_PROCID=3\nSLURM_NTASKS=4\nSLURM_LOCALID=1\nSLURM_NODEID=1\nSLURM_JOB_NODELIST=n[1-2]"
       "\nSLURM_JOB_ID=77\nSLURM_TASKS_PER_NODE=2(x2)\nSLURM_STEP_NODELIST=n[1-2]\n",
       "OMPI_COMM_WORLD_RANK=0\nOMPI_COMM_WORLD_SIZE=2\nOMPI_COMM_WORLD_LOCAL_RANK=0\n"
       "OMPI_COMM_WORLD_LOCAL_SIZE=2\n",
       "PMI_RANK=1\nPMI_SIZE=2\nMPI_LOCALRANKID=1\nMPI_LOCALNRANKS=2\n",
       "PMIX_RANK=0\nPMIX_NAMESPACE=slurm.pmix.1.0\nSLURM_NTASKS=1\n"});
}

TEST(FuzzReplay, PmiReply) {
  const std::string good =
      "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"
      "cmd=my_kvsname kvsname=kvs_1\ncmd=put_result rc=0\ncmd=barrier_out\n"
      "cmd=get_result rc=0 value=10.0.0.1:4242/tok\ncmd=finalize_ack\n";
  replay(pmi_reply, {std::string(1, '\0') + good, std::string(1, '\1') + good,
                     std::string(1, '\1') + "cmd=response_to_init rc=1 msg=no\n"});
}

TEST(FuzzReplay, StoreServer) {
  namespace wire = detail::store_protocol;
  const auto request = [](wire::Op op) { return wire::Writer().u8(static_cast<std::uint8_t>(op)); };
  replay(
      store_server,
      {std::string(1, '\0') + request(wire::Op::set).bytes("k").bytes("v").frame(),
       std::string(1, '\0') + request(wire::Op::add).bytes("n").i64(3).frame() +
           request(wire::Op::get).bytes("n").i64(10).frame(),
       std::string(1, '\0') + request(wire::Op::wait).strings({"a", "b"}).i64(1).frame(),
       std::string(1, '\0') +
           request(wire::Op::compare_set).bytes("k").bytes("").bytes("x").frame() +
           request(wire::Op::check).strings({"k"}).frame() + request(wire::Op::num_keys).frame(),
       // A hello, then a proof that cannot hold (the server's nonce is fresh).
       std::string(1, '\1') + wire::hello(std::string(32, 'n')) +
           wire::proof(std::string(32, 'p'), "credential") +
           request(wire::Op::delete_key).bytes("k").frame(),
       std::string(1, '\1') + "COHS\x02", std::string(1, '\1') + wire::hello("a nonce too short"),
       std::string(1, '\0') + request(wire::Op::set).bytes("k").bytes("v").frame() +
           request(wire::Op::multi_get).strings({"k", "k", "missing"}).i64(1).frame() +
           request(wire::Op::multi_get).strings({"k"}).i64(1).frame(),
       // Last words: set when the connection ends, cleared, over the limit.
       std::string(1, '\0') + request(wire::Op::set_on_close).bytes("gone").bytes("1").frame() +
           request(wire::Op::clear_on_close).frame() +
           request(wire::Op::set_on_close).bytes("gone").bytes("2").frame(),
       // MULTIPLEX naming a relay this server is not, then one with trailing bytes.
       std::string(1, '\0') + request(wire::Op::multiplex).bytes("node 7").frame(),
       std::string(1, '\0') + request(wire::Op::multiplex).bytes("").u8(1).frame(), [&request] {
         std::string many(1, '\0');
         for (std::size_t i = 0; i <= wire::kMaxOnCloseSets; ++i)
           many += request(wire::Op::set_on_close).bytes("k").bytes("v").frame();
         return many;
       }()});
}

// Records of store_protocols_fuzz.cpp: which connection, then its bytes.
std::string records(char flags, const std::vector<std::pair<int, std::string>>& received) {
  std::string out(1, flags);
  for (const auto& [which, bytes] : received) {
    std::size_t at = 0;
    do {
      const std::size_t length = std::min<std::size_t>(bytes.size() - at, 0x7f);
      out += static_cast<char>((which << 7) | static_cast<int>(length));
      out += bytes.substr(at, length);
      at += length;
    } while (at < bytes.size());
  }
  return out;
}

TEST(FuzzReplay, StoreProtocols) {
  namespace wire = detail::store_protocol;
  const auto request = [](wire::Op op) { return wire::Writer().u8(static_cast<std::uint8_t>(op)); };
  const char authenticated = 2;
  const char torch = 1;
  replay(
      store_protocols,
      {// A waits for keys that B sets, then B's last words wake A's second wait.
       records(authenticated,
               {{0, request(wire::Op::wait).strings({"a", "b"}).i64(60000).frame()},
                {1, request(wire::Op::set).bytes("a").bytes("1").frame() +
                        request(wire::Op::set_on_close).bytes("gone").bytes("1").frame() +
                        request(wire::Op::set).bytes("b").bytes(std::string(300, 'v')).frame()},
                {0, request(wire::Op::get).bytes("gone").i64(60000).frame()},
                {1, ""}}),
       // A wait that only its deadline ends; an ADD; a hello that cannot hold.
       records(authenticated, {{0, request(wire::Op::add).bytes("n").i64(3).frame() +
                                       request(wire::Op::wait).strings({"never"}).i64(5).frame() +
                                       request(wire::Op::num_keys).frame()}}),
       // Versioned GETs: answered, unchanged, and one that waits for B's SET.
       records(authenticated,
               {{0, request(wire::Op::set).bytes("k").bytes("v").frame() +
                        request(wire::Op::get_versioned).bytes("k").i64(1000).i64(0).frame() +
                        request(wire::Op::get_versioned).bytes("k").i64(1000).i64(1).frame() +
                        request(wire::Op::get_versioned).bytes("w").i64(1000).i64(0).frame()},
                {1, request(wire::Op::set).bytes("w").bytes(std::string(200, 'w')).frame()}}),
       records(0, {{0, wire::hello(std::string(32, 'n')) +
                           wire::proof(std::string(32, 'p'), "credential")},
                   {1, "COHS\x02"}}),
       records(torch, {{0, std::string("\x00\xCE\xF7\x85\x3C", 5)},
                       {0, u64(3) + "/ab" + u64(3) + "xyz"},
                       {1, u64(2) + u64(2) + "/a" + u64(3) + "/bb"}})});
}

TEST(FuzzReplay, OutputLines) {
  replay(output_lines, {std::string(1, '\3') + "one\ntwo\nthree",
                        std::string(1, '\0') + "\r\x1b[31mred\x1b[0m\x1b]0;t\x07\n\t\x7f",
                        std::string(1, '\x3f') + std::string(300, 'x') + "\n\n"});
}

TEST(FuzzReplay, StopRecord) {
  replay(stop_record, {"2\tn3\t5\t137\t0\trank 5 failed: killed by SIGKILL",
                       "-1\t\t-1\t1\t1\tnode 2 (n3) stopped answering", "0\th\t0\t0\t2\t"});
}

TEST(FuzzReplay, MasterAddress) {
  replay(master_address, {"10.0.0.1:4242/0123456789abcdef", "[::1]:1/", "n1:65535/a/b:c"});
}

TEST(FuzzReplay, GlooMessages) {
  const auto header = [](std::uint64_t bytes) {
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i)
      out[static_cast<std::size_t>(i)] = static_cast<char>(bytes >> (8 * i));
    return out;
  };
  replay(gloo_messages, {header(0), header(12), header(256 << 10), header((256 << 10) + 1),
                         header(~std::uint64_t{0}), "short"});
}

TEST(FuzzReplay, Loadavg) {
  replay(loadavg,
         {"0.31 1.27 2.06 2/108 30844\n", "12.00 9.50 3.10 17/1302 1", "1 2 3 -4/5", "1 2 3 4"});
}

TEST(FuzzReplay, SecretLine) {
  replay(secret_line, {"0123456789abcdef0123456789abcdef\n", "q3V+8zL0xWm/2Rk9tYb4nA \r\nrest",
                       std::string(5000, 'a')});
}

TEST(FuzzReplay, CgroupQuota) {
  replay(cgroup_quota, {"max 100000", "200000 100000\n", "-1\n100000", "150000\n100000\n"});
}

TEST(FuzzReplay, PeerEntries) {
  replay(peer_entries, {"n1 1234\nn2 99", "host\n 7\nh -5\nh 99999999999999999999", "\n\n"});
}

TEST(FuzzReplay, RelayRequest) {
  namespace wire = detail::store_protocol;
  const auto payload = [](wire::Writer writer) {
    return writer.frame().substr(wire::kFrameHeaderBytes);
  };
  const auto request = [](wire::Op op) { return wire::Writer().u8(static_cast<std::uint8_t>(op)); };
  replay(relay_request, {payload(request(wire::Op::add).bytes("n").i64(-3)),
                         payload(request(wire::Op::multi_get).strings({"a", "b"}).i64(1000)),
                         payload(request(wire::Op::compare_set).bytes("k").bytes("").bytes("v")),
                         payload(request(wire::Op::get).bytes("k")),
                         payload(request(wire::Op::get_versioned).bytes("k").i64(1000).i64(7)),
                         std::string(1, '\x63'), ""});
}

TEST(FuzzReplay, TorchRelay) {
  namespace wire = detail::store_protocol;
  const auto u64 = [](std::uint64_t value) {
    return wire::Writer().i64(static_cast<std::int64_t>(value)).fields();
  };
  const auto text = [&](const std::string& bytes) { return u64(bytes.size()) + bytes; };
  const auto client = [](const std::string& bytes) {
    return std::string(1, static_cast<char>(bytes.size())) + bytes;
  };
  const auto store = [](wire::Writer answer) {
    const std::string payload = answer.fields();
    return std::string(1, static_cast<char>(0x80 | payload.size())) + payload;
  };
  const auto status = [](wire::Status value) {
    return wire::Writer().u8(static_cast<std::uint8_t>(value));
  };
  const std::string v2 = client(std::string("\x00\xCE\xF7\x85\x3C", 5));
  const std::string ok = store(status(wire::Status::ok));
  // SET, ADD, GET answered; a WAIT canceled, then its late answer; a
  // BARRIER's ADD and wait; 1.13's GET of a missing key; an error.
  replay(torch_relay,
         {v2 + client("\x01" + text("/k") + text("v")) + client("\x04" + text("/n") + u64(2)) + ok +
              store(status(wire::Status::ok).i64(2)) + client("\x03" + text("/k")) +
              store(status(wire::Status::ok).bytes("v").i64(9)),
          v2 + client("\x06" + u64(1) + text("/w")) + client("\x0c") +
              client("\x04" + text("/n") + u64(1)) + ok + store(status(wire::Status::ok).i64(1)),
          v2 + client("\x12" + text("/b") + u64(3)) + store(status(wire::Status::ok).i64(1)) +
              store(status(wire::Status::timeout).strings({"torch:/b"})) + ok,
          client("\x02" + text("/missing")) + store(status(wire::Status::timeout).strings({"x"})),
          v2 + client("\x0b" + u64(2) + text("/a") + text("1") + text("/b") + text("2")) + ok +
              store(status(wire::Status::error).bytes("lost the job's store")),
          v2 + client("\x11") + store(status(wire::Status::ok).strings({"torch:/a", "torch:/b"})),
          std::string(1, '\x80')});
}

TEST(FuzzReplay, FileAnswer) {
  namespace wire = detail::store_protocol;
  const auto length = [](std::int64_t bytes) {
    return wire::Writer().i64(bytes).frame().substr(wire::kFrameHeaderBytes);
  };
  // Flags, then the fields: taken (sealed, 8 bytes as announced), unsealed,
  // no file, a length that is not the file's, a malformed field.
  replay(file_answer, {"\x03" + length(8), "\x01" + length(8), "\x00" + length(8),
                       "\x03" + length(9), std::string("\x03\x01", 2)});
}

TEST(FuzzReplay, RelayUpstream) {
  namespace wire = detail::store_protocol;
  const auto answer = [](wire::Status status) {
    return wire::Writer().u8(static_cast<std::uint8_t>(status));
  };
  std::string every_tag_ok;
  for (std::uint32_t tag = 1; tag <= 8; ++tag)
    every_tag_ok += wire::tagged(tag, answer(wire::Status::ok).i64(1).frame());
  std::string versioned;
  for (std::uint32_t tag = 1; tag <= 8; ++tag)
    versioned += wire::tagged(tag, answer(wire::Status::ok).bytes("value").i64(7).frame());
  std::string unchanged;
  for (std::uint32_t tag = 1; tag <= 8; ++tag)
    unchanged += wire::tagged(tag, answer(wire::Status::unchanged).frame());
  replay(relay_upstream,
         {"", every_tag_ok, versioned, unchanged,
          wire::tagged(0, answer(wire::Status::moving).frame()) + every_tag_ok,
          wire::tagged(3, answer(wire::Status::timeout).strings({"never"}).frame()),
          wire::tagged(2, answer(wire::Status::ok).bytes(std::string(70000, 'v')).i64(9).frame()),
          std::string("\xff\xff\xff\xff\x01\x00\x00\x00\x00", 9)},
         1000);
}

}  // namespace
}  // namespace cohort::fuzz
