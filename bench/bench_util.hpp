// SPDX-License-Identifier: Apache-2.0
// Small timing helpers shared by the benchmarks: host clock, medians, a JSON-ish record list.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace bench {

inline double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

/// One figure: what was measured, for which variant and shape, in microseconds.
struct Figure {
  std::string figure;
  std::string variant;
  int n = 0;
  int width = 0;
  int k = 0;
  double us = 0.0;
};

inline std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

inline void write_json(const std::string& path, const std::string& header_fields, const std::vector<Figure>& figures) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return;
  }
  std::fprintf(f, "{\n%s  \"figures\": [\n", header_fields.c_str());
  for (std::size_t i = 0; i < figures.size(); ++i) {
    const Figure& r = figures[i];
    std::fprintf(f,
                 "    {\"figure\": \"%s\", \"variant\": \"%s\", \"n\": %d, \"width\": %d, \"k\": %d, \"us\": %.4f}%s\n",
                 json_escape(r.figure).c_str(), json_escape(r.variant).c_str(), r.n, r.width, r.k, r.us,
                 i + 1 < figures.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

}  // namespace bench
