#include "core/shared_library.hpp"

#include <dlfcn.h>

#include <cohort/errors.hpp>

#include "core/strings.hpp"

namespace cohort::detail {

SharedLibrary::SharedLibrary(std::string path, const std::string& needed_for,
                             const std::string& package)
    : path_(std::move(path)), handle_(dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL)) {
  if (handle_ == nullptr) {
    const char* error = dlerror();
    throw Error(cat("cannot load ", path_, ", needed for ", needed_for, ": ",
                    error != nullptr ? error : "dlopen failed", " (install Debian's ", package,
                    ", or the library this cohort was built against)"));
  }
}

void* SharedLibrary::address_of(const char* name) const {
  dlerror();
  void* address = dlsym(handle_, name);
  if (address == nullptr) {
    throw Error(cat(path_, " has no ", name,
                    ": it is not the version this cohort was built "
                    "against (rebuild cohort, or install the library it was built with)"));
  }
  return address;
}

}  // namespace cohort::detail
