#include "core/shared_library.hpp"

#include <functional>

#include <gtest/gtest.h>

#include <cohort/errors.hpp>

namespace cohort::detail {
namespace {

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(SharedLibrary, GivesTheFunctionsOfALibraryLoadedWhenAsked) {
  const SharedLibrary libm("libm.so.6", "a test", "libc6");
  EXPECT_EQ(libm.function<double(double)>("cos")(0.0), 1.0);
}

TEST(SharedLibrary, AMissingLibraryOrFunctionIsNamedWithWhatToInstall) {
  const std::string missing = error_of([] {
    SharedLibrary("/nonexistent/libnothing.so.1", "finding rank 0 through PMIx", "libpmix2");
  });
  EXPECT_NE(missing.find("cannot load /nonexistent/libnothing.so.1, needed for finding rank 0 "
                         "through PMIx"),
            std::string::npos)
      << missing;
  EXPECT_NE(missing.find("install Debian's libpmix2"), std::string::npos) << missing;

  const SharedLibrary libm("libm.so.6", "a test", "libc6");
  const std::string no_function = error_of([&] { libm.function<void()>("no_such_function"); });
  EXPECT_NE(no_function.find("libm.so.6 has no no_such_function"), std::string::npos)
      << no_function;
}

}  // namespace
}  // namespace cohort::detail
