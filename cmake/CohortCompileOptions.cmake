# Warnings and sanitizers shared by every cohort target.

# cohort_target_defaults(<target>): the project's warning set, kept PRIVATE so
# that it never leaks into the compile flags of users of the installed package.
function(cohort_target_defaults target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Wformat=2
    $<$<BOOL:${COHORT_WERROR}>:-Werror>)
endfunction()

if(COHORT_SANITIZE)
  string(REPLACE "," ";" _cohort_sanitizers "${COHORT_SANITIZE}")
  foreach(_san IN LISTS _cohort_sanitizers)
    if(NOT _san MATCHES "^(address|undefined|leak|thread)$")
      message(FATAL_ERROR "COHORT_SANITIZE: unknown sanitizer '${_san}' "
                          "(use a comma-separated subset of address,undefined,leak,thread)")
    endif()
  endforeach()
  # Global, so that tests and examples are instrumented like the library.
  add_compile_options(-fsanitize=${COHORT_SANITIZE} -fno-omit-frame-pointer
                      -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${COHORT_SANITIZE})
endif()

if(COHORT_BUILD_FUZZERS)
  # Coverage for libFuzzer in every library a harness reaches, and the
  # sanitizers that turn a silent bug into a finding (scripts/fuzz).
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
endif()
