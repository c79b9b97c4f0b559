#include "core/thread_name.hpp"

#include <algorithm>
#include <cstring>

#include <pthread.h>

namespace cohort::detail {

void name_this_thread(std::string_view name) noexcept {
  char text[16] = {};
  std::memcpy(text, name.data(), std::min(name.size(), sizeof(text) - 1));
  (void)pthread_setname_np(pthread_self(), text);
}

}  // namespace cohort::detail
