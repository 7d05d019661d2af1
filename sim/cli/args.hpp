// servesim cli: the command line (subcommands, options, help) and the dispatch to sim/cli/*_cmd.cpp.
#pragma once

namespace servesim::cli {

/// Parses argv and runs the subcommand. Returns the process exit status: 0 ok, 1 a run failed,
/// 2 bad input (usage errors included; --help returns 0).
int main(int argc, char** argv);

}  // namespace servesim::cli
