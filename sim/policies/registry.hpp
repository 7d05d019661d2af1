// servesim sim/policies: the registry behind every extension point. Each policy kind keeps one
// table of name → factory in its own .cpp; a new policy is one file plus one line in that table.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

namespace servesim {

template <class Policy>
class Registry {
 public:
  using Factory = std::function<std::unique_ptr<Policy>()>;
  /// `what` names the kind in errors ("router", "eviction policy").
  Registry(std::string what, std::map<std::string, Factory> table) : what_(std::move(what)), table_(std::move(table)) {}
  /// A new policy object. Throws std::invalid_argument naming the unknown name and the known ones.
  std::unique_ptr<Policy> make(const std::string& name) const {
    const auto it = table_.find(name);
    if (it != table_.end()) return it->second();
    std::string known;
    for (const auto& [n, f] : table_) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown " + what_ + " \"" + name + "\" (known: " + known + ")");
  }

 private:
  std::string what_;
  std::map<std::string, Factory> table_;
};

}  // namespace servesim
