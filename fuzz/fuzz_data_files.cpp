// Model files (SERVESIM_FUZZ_MODEL) or hardware files: the bytes as a file, read by load_model /
// load_hardware (what a scenario's "model": "<file>" reaches). Contract: ScenarioError, or a spec.
#include "fuzz/fuzz_common.hpp"
#include "scenarios/scenario.hpp"

using namespace servesim;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::as_file(data, size, ".json");
  try {
#ifdef SERVESIM_FUZZ_MODEL
    (void)load_model(path);
#else
    (void)load_hardware(path);
#endif
  } catch (const ScenarioError&) {
  }
  return 0;
}
