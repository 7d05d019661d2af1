// What tests that read files or run the servesim binary share: a whole file as a string, and a
// command line's exit status and output (stdout + stderr together).
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace servesim::test {

/// The whole file at `p` ("" when it cannot be opened).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The comma-separated cells of one requests.csv line (no quoted cells there), padded with empty
/// cells to `width` (a row's trailing empty cells).
inline std::vector<std::string> csv_row(const std::string& line, size_t width) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  for (std::string c; std::getline(ss, c, ',');) f.push_back(c);
  if (f.size() < width) f.resize(width);
  return f;
}

#ifdef SERVESIM_BINARY
struct Out {
  int status = 0;
  std::string text;  // stdout + stderr
};

/// Runs `servesim <args>` (the binary this test target was built with); status −1 if it did not exit normally.
inline Out sh(const std::string& args) {
  Out o;
  const std::string cmd = std::string(SERVESIM_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) o.text.append(buf, n);
  const int st = pclose(p);
  o.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}
#endif

}  // namespace servesim::test

/// The same namespace as the engine tests' helpers (helpers.hpp): `test::` names one namespace
/// whether or not the file says `using namespace servesim`.
namespace test = servesim::test;
