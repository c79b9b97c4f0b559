// Built against the installed package: the public headers and libraries.
#include <cstdio>
#include <string>

#include <cohort/cohort.hpp>

int main() {
  cohort::World world = cohort::init();  // alone: a world of one with its own store
  world.store().set("greeting/" + std::to_string(world.rank()), "hi");
  world.barrier();
  std::printf("consumer %s: rank %d of %d (launcher %s), %zu hosts\n", COHORT_VERSION, world.rank(),
              world.size(), cohort::to_string(world.info().launcher.value).data(),
              cohort::hostlist::expand("n[1-3]").size());
  return 0;
}
