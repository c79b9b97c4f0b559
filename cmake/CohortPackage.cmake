# `make package`: a Debian package of what `make install` installs, through
# CPack's DEB generator (no debian/ directory: the package is the install
# rules, kept in one place; Depends: computed by dpkg-shlibdeps from what
# the binaries link; Recommends: what they load when a job needs it).
# Prefix /usr, libraries in lib/<triplet>.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME cohort)
set(CPACK_PACKAGE_VENDOR "cohort developers")
set(CPACK_PACKAGE_CONTACT "cohort developers <dev@cohort.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "run one program as many cooperating processes (launcher, library, collectives)")
set(CPACK_PACKAGE_DESCRIPTION
    "cohort starts a program as many cooperating processes, on one machine, across machines,
under Slurm and under mpirun: `cohort run` is a drop-in for torchrun; libcohort finds
out who each process is from whatever started it and offers collectives (shared
memory on a host, Gloo across hosts, MPI); cohort::torch is data-parallel training
for LibTorch. This package holds the cohort command, the shared libraries and their
headers, a CMake package (find_package(cohort)), cohort.pc, cohort(1) and bash
completion.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # cohort_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# cohort's own libraries are in the package: dpkg-shlibdeps resolves them there.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${COHORT_BUILD_LIBDIR})
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# Libraries cohort loads only when a job needs them (PMIx, MUNGE:
# cohort_load_at_run_time), which dpkg-shlibdeps cannot see: recommended.
get_property(_cohort_packages GLOBAL PROPERTY COHORT_RUN_TIME_RECOMMENDS)
list(REMOVE_DUPLICATES _cohort_packages)
list(JOIN _cohort_packages ", " CPACK_DEBIAN_PACKAGE_RECOMMENDS)
set(CPACK_STRIP_FILES ON)
set(CPACK_SOURCE_IGNORE_FILES "/build.*/" "/\\\\.git/")
include(CPack)
