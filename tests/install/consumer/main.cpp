// Built against the installed package: the public headers and libraries.
#include <iostream>

#include <cohort/cohort.hpp>

int main() {
  const cohort::LaunchInfo me = cohort::detect_launch();
  std::cout << "consumer " << COHORT_VERSION << ": rank " << me.rank.value << " of "
            << me.world_size.value << ", " << cohort::hostlist::expand("n[1-3]").size()
            << " hosts\n";
  return 0;
}
