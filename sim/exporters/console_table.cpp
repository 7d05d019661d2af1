#include "sim/exporters/writers.hpp"

#include <algorithm>

#include "costmodels/fitted.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace servesim {

std::string usd_text(double usd) {
  if (!std::isfinite(usd)) return "n/a";
  if (usd == 0) return "0";
  const int decimals = std::clamp(2 - static_cast<int>(std::floor(std::log10(std::abs(usd)))), 0, 6);
  return fmt::format("{:.{}f}", usd, decimals);
}

std::string summary_table(const std::vector<nlohmann::json>& runs) {
  std::string o;
  auto row = [&](const std::string& label, auto&& get) {
    o += fmt::format("{:<34}", label);
    for (const auto& j : runs) {  // a cell wider than its column keeps two spaces before it (rev27: B300's cost model ran together)
      const std::string c = get(j);
      o += c.size() > 20 ? "  " + c : fmt::format("{:>22}", c);
    }
    o += "\n";
  };
  auto num = [](double x, int p = 1) { return fmt::format("{:.{}f}", x, p); };
  row("deployment", [](const nlohmann::json& j) { return j["deployment"].get<std::string>(); });
  row("model / hardware", [](const nlohmann::json& j) { return j["model"].get<std::string>() + "/" + j["hardware"].get<std::string>(); });
  row("GPUs (P x EP + D x EP)", [](const nlohmann::json& j) {
    return fmt::format("{}x{} + {}x{}", j["prefill_pool"]["instances"].get<int>(), j["prefill_pool"]["ep"].get<int>(),
                       j["decode_pool"]["instances"].get<int>(), j["decode_pool"]["ep"].get<int>());
  });
  row("requests arrived", [](const nlohmann::json& j) { return std::to_string(j["requests"]["arrived"].get<long long>()); });
  row("  completed / rejected / in flight", [](const nlohmann::json& j) {
    return fmt::format("{}/{}/{}", j["requests"]["completed"].get<long long>(), j["requests"]["rejected"].get<long long>(),
                       j["requests"]["in_flight"].get<long long>());
  });
  for (const char* m : {"ttft", "tpot", "e2e"})
    row(fmt::format("{} p50 / p90 / p99 (ms)", m), [&](const nlohmann::json& j) {
      const auto& l = j["latency"][m];
      auto ms = [&](const char* k) { return l[k].is_null() ? std::string("n/a") : num(l[k].get<double>(), 0); };
      return fmt::format("{}/{}/{}", ms("p50_ms"), ms("p90_ms"), ms("p99_ms"));
    });
  row("input tok/s per GPU", [&](const nlohmann::json& j) { return num(j["throughput"]["input_tokens_per_s_per_gpu"].get<double>()); });
  row("output tok/s per GPU", [&](const nlohmann::json& j) { return num(j["throughput"]["output_tokens_per_s_per_gpu"].get<double>()); });
  row("goodput (req/s within SLO)", [&](const nlohmann::json& j) {
    const auto& f = j["goodput"]["fraction_of_finished"];
    return fmt::format("{} ({})", num(j["goodput"]["requests_per_s"].get<double>(), 3), f.is_null() ? std::string("n/a") : num(100 * f.get<double>()) + "%");
  });
  row("  of finished; in flight at horizon", [&](const nlohmann::json& j) { return std::to_string(j["goodput"]["in_flight_at_horizon"].get<long long>()); });
  row("$ per M input / output tokens", [&](const nlohmann::json& j) {
    const auto& c = j["cost"];
    auto usd = [&](const char* k) { return c.contains(k) && c[k].is_number() ? usd_text(c[k].get<double>()) : std::string("n/a"); };
    return fmt::format("{}/{}", usd("usd_per_million_input_tokens"), usd("usd_per_million_output_tokens"));
  });
  row("prefill HBM/GPU peak (GB)", [&](const nlohmann::json& j) { return num(j["memory_per_gpu"]["prefill"]["hbm_peak_gb"].get<double>()); });
  row("decode HBM/GPU peak (GB)", [&](const nlohmann::json& j) { return num(j["memory_per_gpu"]["decode"]["hbm_peak_gb"].get<double>()); });
  row("decode KV/GPU peak / mean (GB)", [&](const nlohmann::json& j) {
    return fmt::format("{}/{}", num(j["memory_per_gpu"]["decode"]["kv_peak_gb"].get<double>()), num(j["memory_per_gpu"]["decode"]["kv_mean_gb"].get<double>()));
  });
  row("prefix cache token hit rate", [&](const nlohmann::json& j) { return num(100 * j["prefix_cache"]["token_hit_rate"].get<double>()) + "%"; });
  row("measured window (s)", [&](const nlohmann::json& j) { return num(j["throughput"]["duration_s"].get<double>()); });
  row("cost model", [](const nlohmann::json& j) { return j["cost_model"]["name"].get<std::string>(); });
  for (const auto& j : runs) {
    // an empty measurement window (warmup_s at or past the run's end, possible with horizon_s 0:
    // run until done) is said as such, naming warmup_s (review: the warning blamed the horizon)
    const auto& w = j.contains("window") ? j["window"] : nlohmann::json();
    if (w.is_object() && w.contains("start_s") && w.contains("end_s") && w["start_s"].is_number() && w["end_s"].is_number() &&
        w["start_s"].get<double>() >= w["end_s"].get<double>())
      // (rev26: with warmup_s 0 and a horizon of 1e-300 s it blamed warmup_s)
      o += fmt::format("warning: {}: the measurement window [{}, {}] s is empty: {}\n", j["deployment"].get<std::string>(),
                       num(w["start_s"].get<double>()), num(w["end_s"].get<double>()),
                       w["start_s"].get<double>() > 0 ? "warmup_s is at or past the run's end; lower warmup_s"
                                                      : "the run ended at its start; raise horizon_s");
    else if (j["requests"]["completed"].get<long long>() == 0)
      o += fmt::format("warning: {}: no request completed (latency percentiles and goodput are n/a); a longer --horizon or a lighter load?\n",
                       j["deployment"].get<std::string>());
  }
  return o;
}

}  // namespace servesim
