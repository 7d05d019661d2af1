// servesim: the one SLO test of a run, read from a deployment's entry of summary.json. Used by
// `servesim capacity` (every simulated run of its search) and by the sweep report's "nodes needed"
// chart, so both say "meets the SLO" of the same runs (review: the report took >= 99% of finished
// requests within the SLO, a weaker test than capacity's p99 with the requests still in flight).
//
// A run meets the SLO when, in its steady-state window: something completed; at most
// `max_rejected` of the arrived requests were rejected; TTFT p99 <= ttft_p99_s, counting the
// requests in flight at the end (latency.ttft_with_in_flight: end - arrival for those without a
// first token, a lower bound, so a backlog cannot hide); TPOT p99 <= tpot_p99_s.
// Header-only: templated on the nlohmann json type (capacity uses json, the report ordered_json).
#pragma once
#include <cmath>
#include <string>

namespace servesim {

struct SloVerdict {
  bool ok = false;
  std::string why;  ///< the first bound missed ("" when ok)
  double ttft_p99_s = NAN, tpot_p99_s = NAN;  ///< infinity when the summary has no p99 (nothing measured)
  long long arrived = 0, rejected = 0, completed = 0;
  long long waiting = 0;  ///< in flight at the end without a first token
};

namespace slo_detail {
template <class Json>
double p99_s(const Json& pct) {
  if (!pct.is_object() || !pct.contains("p99_ms") || !pct["p99_ms"].is_number()) return INFINITY;
  return pct["p99_ms"].template get<double>() / 1e3;
}
template <class Json>
long long count(const Json& j, const char* a, const char* b) {
  if (!j.is_object() || !j.contains(a) || !j[a].is_object() || !j[a].contains(b) || !j[a][b].is_number()) return 0;
  return j[a][b].template get<long long>();
}
}  // namespace slo_detail

/// The test above on `dep`, one element of summary.json's "deployments" (or a run's summary.json).
template <class Json>
SloVerdict judge_slo(const Json& dep, double ttft_p99_s, double tpot_p99_s, double max_rejected) {
  SloVerdict v;
  v.arrived = slo_detail::count(dep, "requests", "arrived");
  v.rejected = slo_detail::count(dep, "requests", "rejected");
  v.completed = slo_detail::count(dep, "requests", "completed");
  const bool has_latency = dep.is_object() && dep.contains("latency") && dep["latency"].is_object();
  static const Json none;
  const Json& lat = has_latency ? dep["latency"] : none;
  const Json& ttft = has_latency && lat.contains("ttft_with_in_flight") ? lat["ttft_with_in_flight"] : none;
  v.ttft_p99_s = slo_detail::p99_s(ttft);
  v.waiting = ttft.is_object() && ttft.contains("in_flight_without_first_token") && ttft["in_flight_without_first_token"].is_number()
                  ? ttft["in_flight_without_first_token"].template get<long long>()
                  : 0;
  v.tpot_p99_s = slo_detail::p99_s(has_latency && lat.contains("tpot") ? lat["tpot"] : none);
  if (v.completed == 0) v.why = "nothing completed in the window";
  else if (static_cast<double>(v.rejected) > max_rejected * static_cast<double>(v.arrived)) v.why = std::to_string(v.rejected) + " rejected";
  else if (!(v.ttft_p99_s <= ttft_p99_s)) v.why = "TTFT";
  else if (!(v.tpot_p99_s <= tpot_p99_s)) v.why = "TPOT";
  else v.ok = true;
  return v;
}

}  // namespace servesim
