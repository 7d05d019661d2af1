#include "sim/engine/engine.hpp"

#include <algorithm>

namespace servesim {

void SessionLedger::round_arrived(long long session) {
  auto [it, fresh] = sessions_.try_emplace(session);
  State& s = it->second;
  if (fresh) s.start_s = e_.now(), ++e_.totals.sessions;
  else if (s.last_done_s >= 0) s.idle_s += e_.now() - s.last_done_s;
  ++s.rounds;
}

void SessionLedger::round_completed(long long session, double first_token_s) {
  State& s = sessions_[session];
  s.last_done_s = e_.now();
  if (first_token_s >= 0) s.decode_s += e_.now() - first_token_s;
}

void SessionLedger::gpu_released(long long session, double admit_s) {
  if (session < 0) return;
  auto it = sessions_.find(session);
  if (it != sessions_.end() && admit_s >= 0) it->second.gpu_s += e_.now() - admit_s;
}

void SessionLedger::open_at_horizon(long long session, double admit_s, double first_token_s) {
  auto it = session >= 0 ? sessions_.find(session) : sessions_.end();
  if (it == sessions_.end()) return;
  if (admit_s >= 0) it->second.gpu_s += e_.now() - admit_s;
  if (first_token_s >= 0) it->second.decode_s += e_.now() - first_token_s;
}

SessionRecord SessionLedger::record(long long session, const State& s, RequestStatus status, double end_s) const {
  SessionRecord rec;
  rec.session = session, rec.status = status, rec.rounds = s.rounds, rec.start_s = s.start_s, rec.end_s = end_s;
  rec.gpu_s = s.gpu_s, rec.decode_s = s.decode_s, rec.idle_s = s.idle_s;
  return rec;
}

void SessionLedger::end(long long session, RequestStatus status) {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return;
  const State& s = it->second;
  e_.sink.on_session(record(session, s, status, status == RequestStatus::in_flight ? e_.now() : s.last_done_s));
  sessions_.erase(it);
  if (e_.store && e_.store->holds(session)) {
    e_.store->release(session, e_.now());  // the session will not come back (a demotion in flight is cancelled)
    e_.mover.emit_tiers();
  }
}

void SessionLedger::end_all_in_flight() {
  std::vector<long long> open;
  for (const auto& [id, s] : sessions_) open.push_back(id);
  std::sort(open.begin(), open.end());
  for (long long id : open) e_.sink.on_session(record(id, sessions_.at(id), RequestStatus::in_flight, e_.now()));
  sessions_.clear();
}

}  // namespace servesim
