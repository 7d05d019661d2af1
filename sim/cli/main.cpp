// servesim: simulate LLM serving clusters. `servesim --help` lists the subcommands
// (sim/cli/args.cpp); each lives in its own file (run_cmd, step_cmd, plan_cmd, costmodel_cmd).
#include "sim/cli/args.hpp"

int main(int argc, char** argv) { return servesim::cli::main(argc, argv); }
