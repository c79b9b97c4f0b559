// Hostlist expressions and their expansions, shared by hostlist_test.cpp
// (our expansion) and hostlist_scontrol_test.cpp (scontrol's, when installed).
// Expected lists were taken from `scontrol show hostnames` (Slurm 22.05) on
// this kind of machine; `scontrol_accepts` false marks the forms users write
// that scontrol rejects and cohort accepts (docs/hostlist.md).
#pragma once

#include <string>
#include <vector>

namespace cohort::test {

struct HostlistCase {
  std::string expression;
  std::vector<std::string> hosts;
  bool scontrol_accepts = true;
};

inline const std::vector<HostlistCase>& hostlist_cases() {
  static const std::vector<HostlistCase> cases = {
      {"", {}},
      {"host", {"host"}},
      {"a,b,c", {"a", "b", "c"}},
      {"a b", {"a", "b"}},
      {"a,,b", {"a", "b"}},
      {",a", {"a"}},
      {"a[1]", {"a1"}},
      {"n[0-0]", {"n0"}},
      {"n[1-3]", {"n1", "n2", "n3"}},
      {"n[1-10]", {"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10"}},
      {"n[01-10]", {"n01", "n02", "n03", "n04", "n05", "n06", "n07", "n08", "n09", "n10"}},
      {"n[001-3]", {"n001", "n002", "n003"}},
      {"n[9-011]", {"n9", "n10", "n11"}},
      {"n[01-1]", {"n01"}},
      {"n[1,01]", {"n1", "n01"}},
      {"n[010-012]", {"n010", "n011", "n012"}},
      {"n[3,1,2]", {"n3", "n1", "n2"}},
      {"n[1-3],n2", {"n1", "n2", "n3", "n2"}},
      {"node[001-003,010],login", {"node001", "node002", "node003", "node010", "login"}},
      {"a[1-2],b[3-4]", {"a1", "a2", "b3", "b4"}},
      {"rack[1-2]-n[01-02]", {"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"}},
      {"rack[1-2]-n[01-02],login", {"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02", "login"}},
      {"n[1-2][3-4]", {"n13", "n14", "n23", "n24"}},
      {"n[1-2]-[3-4]", {"n1-3", "n1-4", "n2-3", "n2-4"}},
      {"a-[1-2]", {"a-1", "a-2"}},
      {"[1-2]", {"1", "2"}},
      {"n[1-3,5-6]", {"n1", "n2", "n3", "n5", "n6"}},
      {"gpu[0-1],cpu[0-2]", {"gpu0", "gpu1", "cpu0", "cpu1", "cpu2"}},
      {"x1.example.org,x2.example.org", {"x1.example.org", "x2.example.org"}},
      {"n[8-12],m[098-101]", {"n8", "n9", "n10", "n11", "n12", "m098", "m099", "m100", "m101"}},
      {"x[1-3][1-2]", {"x11", "x12", "x21", "x22", "x31", "x32"}},
      // Three or more groups: the last varies fastest, then the first, second...
      {"c[1-2]-g[1-3]-p[1-2]",
       {"c1-g1-p1", "c1-g1-p2", "c2-g1-p1", "c2-g1-p2", "c1-g2-p1", "c1-g2-p2", "c2-g2-p1",
        "c2-g2-p2", "c1-g3-p1", "c1-g3-p2", "c2-g3-p1", "c2-g3-p2"}},
      {"a[1-2]b[1-2]c[1-2]d[1-2]",
       {"a1b1c1d1", "a1b1c1d2", "a2b1c1d1", "a2b1c1d2", "a1b2c1d1", "a1b2c1d2", "a2b2c1d1",
        "a2b2c1d2", "a1b1c2d1", "a1b1c2d2", "a2b1c2d1", "a2b1c2d2", "a1b2c2d1", "a1b2c2d2",
        "a2b2c2d1", "a2b2c2d2"}},
      {"n[0-9]", {"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"}},
      {"login1 login2", {"login1", "login2"}},
      {"n[99-101]", {"n99", "n100", "n101"}},
      {"n[1-2],n[4-5]", {"n1", "n2", "n4", "n5"}},
      {"node-[1-3]", {"node-1", "node-2", "node-3"}},
      {"a1,a[2-3],a4", {"a1", "a2", "a3", "a4"}},
      {"N[005-007]", {"N005", "N006", "N007"}},
      // Accepted by cohort, rejected by scontrol 22.05 ("Invalid hostlist").
      {"ib[1-2].cluster", {"ib1.cluster", "ib2.cluster"}, false},
      {"gpu-a[1-2]-ib", {"gpu-a1-ib", "gpu-a2-ib"}, false},
      {"n[1-3]-ib", {"n1-ib", "n2-ib", "n3-ib"}, false},
      {"a[1-2]b", {"a1b", "a2b"}, false},
      {"x[1-2]y[3-4]z", {"x1y3z", "x1y4z", "x2y3z", "x2y4z"}, false},
      {"n[1-3,5-6]x", {"n1x", "n2x", "n3x", "n5x", "n6x"}, false},
      {"n[1-2],m[1-2]-x", {"n1", "n2", "m1-x", "m2-x"}, false},
  };
  return cases;
}

/// Expressions both cohort and scontrol reject.
inline const std::vector<std::string>& invalid_hostlists() {
  static const std::vector<std::string> cases = {
      "n[3-1]", "n[]", "n[a-b]", "n[1-3,]", "n[,1]", "n[-1]", "n[0-70000][0-70000]",
  };
  return cases;
}

}  // namespace cohort::test
