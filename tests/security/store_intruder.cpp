// What another user on the machine (or on the cluster) would try against a
// job's store: connect with a token it read or guessed, then join the
// job's first barrier and leave a mark. The security tests run it as a
// second, unprivileged user.
//
//   store_intruder HOST PORT TOKEN [--munge]
//
// Exit 0: it got in (and did its damage); 3: the store refused it (the
// refusal on stderr); 2: usage.
#include <cstdio>
#include <cstring>
#include <string>

#include <cohort/errors.hpp>
#include <cohort/store.hpp>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: store_intruder HOST PORT TOKEN [--munge]\n");
    return 2;
  }
  cohort::StoreClient::Options options;
  options.host = argv[1];
  options.port = std::atoi(argv[2]);
  options.token = argv[3];
  options.munge = argc > 4 && std::strcmp(argv[4], "--munge") == 0;
  options.timeout = std::chrono::seconds(5);
  try {
    cohort::StoreClient store(options);
    store.add("world/barrier/1/arrived", 1);
    store.set("world/barrier/1/open", "");
    store.set("intruder", "was here");
    std::printf("joined\n");
    return 0;
  } catch (const cohort::Error& error) {
    std::fprintf(stderr, "refused: %s\n", error.what());
    return 3;
  }
}
