#!/usr/bin/env bash
# Downloads the public traces servesim reads, at pinned commits, and verifies their checksums.
# Usage: traces/fetch.sh DEST   (then point scenarios or --trace at DEST/...)
set -euo pipefail
dest="${1:?usage: fetch.sh DEST}"
mkdir -p "$dest/mooncake" "$dest/azure_llm_2023"
get() {  # url file sha256
  curl -fsSL "$1" -o "$2"
  echo "$3  $2" | sha256sum -c -
}
mc=https://raw.githubusercontent.com/kvcache-ai/Mooncake/3cca71daccf2a7afb8fe3f0295358f70e3a69fdb/FAST25-release/traces
get "$mc/conversation_trace.jsonl" "$dest/mooncake/conversation_trace.jsonl" b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df
get "$mc/synthetic_trace.jsonl" "$dest/mooncake/synthetic_trace.jsonl" bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131
get https://raw.githubusercontent.com/Azure/AzurePublicDataset/790921015d50dd6aae7f7e47f39ba0e235ad6b08/data/AzureLLMInferenceTrace_code.csv \
  "$dest/azure_llm_2023/AzureLLMInferenceTrace_code.csv" 54e9a6d2a4bd06ba1e060304b900abbc74cbea53de96506e60fe5bb4f2277fb6
mkdir -p "$dest/tracelab"
tl=https://raw.githubusercontent.com/uw-syfi/TraceLab/c67bed2f5e42a3f5c6ef3f317dc2167c2f2037fc
get "$tl/example_sessions/sanitized/round_trace.jsonl" "$dest/tracelab/example_round_trace.sanitized.jsonl" 314c49483148fe68e230a683f739e3e6e68d478948ecf342739596f30af36b57
get "$tl/replay/examples/multi_session_large.csv" "$dest/tracelab/replay_multi_session_large.csv" 8afdf8d3ae742aa73a17ab93a4f11edafa6076fdfb47d0fb96d2c3defc6de8ab
