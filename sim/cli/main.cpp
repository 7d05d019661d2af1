// servesim: simulate LLM serving clusters. `servesim --help` lists the subcommands
// (sim/cli/args.cpp); each lives in its own file (run_cmd, step_cmd, plan_cmd, costmodel_cmd).
#include "sim/cli/args.hpp"

#include <cstdio>
#include <filesystem>
#include <new>

// A path the user gave that the file system refuses (a name too long for it, a file where a folder
// is needed, no permission) is bad input: the message names the path, exit status 2. So is a size
// within the input bounds (README "Input rules") that still needs more memory than the machine
// has: exit 2 with a message instead of std::terminate's abort (review: 2^31 decode instances
// aborted with exit 134 before the bounds existed). Any other exception stays a crash (a bug to
// fix, not an input to refuse).
int main(int argc, char** argv) {
  try {
    return servesim::cli::main(argc, argv);
  } catch (const std::filesystem::filesystem_error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory: the input asks for more than this machine holds (cluster size, sessions, trace or grid size)\n");
    return 2;
  }
}
