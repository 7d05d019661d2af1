// Shared by the trace-reader test files (test_workloads.cpp, test_trace_input_rules.cpp): a
// temporary trace file, and the TraceError message a reader gives for one (empty if none).
#pragma once
#include "workloads/request.hpp"

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

inline std::string write_tmp(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / ("servesim_" + name);
  std::ofstream(p) << text;
  return p.string();
}

// The TraceError message of reading every request of Reader(args...), each session's follow-up rounds
// included; "" if none.
template <class Reader, class... A>
std::string error_of(A&&... args) {
  try {
    Reader r(std::forward<A>(args)...);
    while (auto q = r.next()) {
      for (auto f = r.follow_up(*q, q->arrival_s); f; f = r.follow_up(*f, f->arrival_s)) {
      }
    }
  } catch (const servesim::TraceError& e) {
    return e.what();
  }
  return "";
}
