// servesim cli: the command line (subcommands, options, help) and the dispatch to sim/cli/*_cmd.cpp.
#pragma once

#include <memory>

namespace servesim::cli {

/// The command line's option table, built once and reusable: each call parses one argv (every
/// option back to its default first; the table itself is rebuilt every kParsesPerTable calls, as
/// CLI11 keeps a record of every parsed option) and runs the subcommand. Returns the process exit status:
/// 0 ok, 1 a run failed, 2 bad input (usage errors included; --help returns 0). Exceptions from
/// the subcommands propagate (main.cpp turns a refused user path into status 2).
class CommandLine {
 public:
  CommandLine();
  ~CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;
  /// argv[0] is the program name; argc >= 1.
  int operator()(int argc, char** argv);

 private:
  static constexpr long kParsesPerTable = 4096;
  struct Table;
  std::unique_ptr<Table> t_;
  long parses_ = 0;
};

/// Parses argv and runs the subcommand with a fresh CommandLine (statuses as above).
int main(int argc, char** argv);

}  // namespace servesim::cli
