// servesim report: the data behind the charts against hand-computed values (CDF by nearest rank,
// timeline resampling, HBM stacks, nodes needed), missing data listed instead of failing, and the
// command's exit status on a folder that is no run's or sweep's output.
#include "cli_run.hpp"
#include "sim/exporters/report/report.hpp"
#include "sim/exporters/report/slo.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using servesim::report::ojson;
namespace rp = servesim::report;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("servesim-report-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

const rp::Chart* chart(const rp::Report& r, const std::string& id) {
  for (const auto& c : r.charts)
    if (c.id == id) return &c;
  return nullptr;
}

bool omitted(const rp::Report& r, const std::string& title_start) {
  for (const auto& [t, why] : r.omitted)
    if (t.rfind(title_start, 0) == 0 && !why.empty()) return true;
  return false;
}

}  // namespace

TEST(Report, CdfIsNearestRank) {
  // 4 values: F = 1/4 .. 4/4 at the 1st .. 4th smallest
  const ojson p = rp::cdf_points({40, 10, 30, 20});
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0]["x"], 10.0);
  EXPECT_EQ(p[0]["y"], 0.25);
  EXPECT_EQ(p[3]["x"], 40.0);
  EXPECT_EQ(p[3]["y"], 1.0);
  // 1..1000 at 200 points: F = k/200, nearest rank ceil(1000 k / 200) = 5k, value 5k
  std::vector<double> v;
  for (int i = 1; i <= 1000; ++i) v.push_back(i);
  const ojson q = rp::cdf_points(v, 200);
  ASSERT_EQ(q.size(), 200u);
  EXPECT_EQ(q[0]["x"], 5.0);
  EXPECT_EQ(q[99]["x"], 500.0);
  EXPECT_EQ(q[199]["x"], 1000.0);
  EXPECT_EQ(q[99]["y"], 0.5);
}

TEST(Report, TimelineResampledToInstanceMeans) {
  const fs::path d = scratch("timeline");
  // decode instance 0 at 2 GB from t=0 and 6 GB from t=2 s; instance 1 at 4 GB from t=1 s; L2 7 GB
  // and L3 1 GB from t=3 s; KV transfers of 100 B over the NIC (tid 0) and 50 B over NVLink (tid 1);
  // one decode all-to-all slice of 2 s, 0.5 s exposed; the run ends at 4 s
  write(d / "timeline.json",
        "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n"
        "{\"ph\":\"C\",\"name\":\"decode instance 0 KV GB per GPU\",\"pid\":2,\"tid\":0,\"ts\":0.000,\"args\":{\"mean\":2.0,\"busiest\":3.0}},\n"
        "{\"ph\":\"C\",\"name\":\"decode instance 1 KV GB per GPU\",\"pid\":2,\"tid\":1,\"ts\":1000000.000,\"args\":{\"mean\":4.0,\"busiest\":4.0}},\n"
        "{\"ph\":\"b\",\"cat\":\"kv\",\"name\":\"KV P0→D0\",\"id\":1,\"pid\":4,\"tid\":0,\"ts\":1000.000,\"args\":{\"bytes\":100}},\n"
        "{\"ph\":\"b\",\"cat\":\"kv\",\"name\":\"KV P0→D1\",\"id\":2,\"pid\":4,\"tid\":1,\"ts\":2000.000,\"args\":{\"bytes\":50}},\n"
        "{\"ph\":\"X\",\"name\":\"decode all-to-all\",\"pid\":3,\"tid\":1000,\"ts\":0.000,\"dur\":2000000.000,\"args\":{\"exposed_ms\":500.0}},\n"
        "{\"ph\":\"C\",\"name\":\"decode instance 0 KV GB per GPU\",\"pid\":2,\"tid\":0,\"ts\":2000000.000,\"args\":{\"mean\":6.0,\"busiest\":6.0}},\n"
        "{\"ph\":\"C\",\"name\":\"KV GB\",\"pid\":5,\"tid\":0,\"ts\":3000000.000,\"args\":{\"L2 host DRAM\":7.0,\"L3 storage\":1.0}}\n"
        "],\"metadata\":{\"end_s\":4.000000,\"step_slices_written\":0,\"step_slices_dropped\":0}}\n");
  const auto t = rp::read_timeline((d / "timeline.json").string(), 5);
  ASSERT_EQ(t.t_s, (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(t.decode_kv_gb, (std::vector<double>{2, 3, 5, 5, 5}));  // mean of the instances reported so far
  EXPECT_EQ(t.l2_gb, (std::vector<double>{0, 0, 0, 7, 7}));
  EXPECT_EQ(t.l3_gb, (std::vector<double>{0, 0, 0, 1, 1}));
  EXPECT_TRUE(t.has_decode);
  EXPECT_FALSE(t.has_prefill);
  EXPECT_EQ(t.kv_bytes_nic, 100.0);
  EXPECT_EQ(t.kv_bytes_nvlink, 50.0);
  EXPECT_DOUBLE_EQ(t.a2a_s_decode, 2.0);
  EXPECT_DOUBLE_EQ(t.a2a_exposed_s_decode, 0.5);

  // the same events laid out differently (one line, other key order, blanks, metadata first, a
  // step slice and a metadata event between them) are read as JSON, not by their bytes: same series
  write(d / "relaid.json",
        R"({ "metadata" : { "end_s" : 4.0 }, "traceEvents" : [ {"ph":"M","name":"process_name","pid":3,"tid":0,"args":{"name":"x"}},)"
        R"({ "args" : { "busiest" : 3.0, "mean" : 2.0 }, "ts" : 0, "tid" : 0, "pid" : 2, "name" : "decode instance 0 KV GB per GPU", "ph" : "C" },)"
        R"({"tid":1,"ph":"C","pid":2,"ts":1e6,"name":"decode instance 1 KV GB per GPU","args":{"mean":4}}, {"name":"decode step","ph":"X","pid":2,"tid":0,"ts":0,"dur":5},)"
        R"({"args":{"bytes":100},"cat":"kv","ph":"b","name":"KV P0→D0","id":1,"pid":4,"tid":0,"ts":1000}, {"ph":"b","cat":"kv","tid":1,"pid":4,"ts":2000,"args":{"bytes":50}},)"
        R"({"pid":3,"tid":1000,"ph":"X","dur":2e6,"ts":0,"name":"decode all-to-all","args":{"exposed_ms":500}}, {"ph":"C","pid":2,"tid":0,"name":"decode instance 0 KV GB per GPU","ts":2e6,"args":{"mean":6}},)"
        R"( {"ph":"C","name":"KV GB","pid":5,"tid":0,"ts":3e6,"args":{"L3 storage":1,"L2 host DRAM":7}} ] })");
  const auto u = rp::read_timeline((d / "relaid.json").string(), 5);
  EXPECT_EQ(u.t_s, t.t_s);
  EXPECT_EQ(u.decode_kv_gb, t.decode_kv_gb);
  EXPECT_EQ(u.l2_gb, t.l2_gb);
  EXPECT_EQ(u.l3_gb, t.l3_gb);
  EXPECT_EQ(u.kv_bytes_nic, 100.0);
  EXPECT_EQ(u.kv_bytes_nvlink, 50.0);
  EXPECT_DOUBLE_EQ(u.a2a_s_decode, 2.0);
  EXPECT_DOUBLE_EQ(u.a2a_exposed_s_decode, 0.5);
  // a truncated file is an error naming it (the line-by-line reader skipped what it could not read)
  write(d / "cut.json", "{\"traceEvents\":[\n{\"ph\":\"C\",\"name\":\"KV GB\",\"pid\":5,\"ts\":0,\"args\":{\"L2 host DRAM\":7}},\n{\"ph\":\"C\",\"na");
  try {
    (void)rp::read_timeline((d / "cut.json").string(), 5);
    ADD_FAILURE() << "a truncated timeline was read";
  } catch (const rp::ReportError& e) {
    EXPECT_NE(std::string(e.what()).find("cut.json: not valid JSON"), std::string::npos) << e.what();
  }
  fs::remove_all(d);
}

TEST(Report, RunChartsFromHandMadeFilesAndMissingOnesListed) {
  const fs::path d = scratch("run");
  write(d / "summary.json", R"({"scenario": "hand", "deployments": [{"deployment": "a", "model": "kimi-k3", "hardware": "h200",
    "memory_per_gpu": {"decode": {"hbm_gb": 150, "usable_gb": 135, "routed_expert_weights_gb": 45, "other_weights_gb": 14,
      "activation_workspace_gb": 1, "reserved_gb": 2, "kv_budget_gb": 73, "kv_peak_gb": 30}},
    "kv_transfer": {"bytes": 2e9}}]})");
  // 4 completed requests (TTFT 10..40 ms), a rejected one (TTFT cell empty) and a completed one-token answer (no TPOT)
  write(d / "a" / "requests.csv",
        "id,status,reason,arrival_s,ttft_ms,tpot_ms,e2e_ms\n1,completed,,0.5,40,5,100\n2,completed,,1,10,6,200\n3,rejected,\"no, room\",1,,,\n"
        "4,completed,,2,30,7,300\n5,completed,,3,20,,400\n");
  const auto r = rp::build_report(d.string());
  EXPECT_EQ(r.kind, "run");
  const auto* ttft = chart(r, "cdf-ttft");
  ASSERT_NE(ttft, nullptr);
  const ojson& pts = ttft->config["data"]["datasets"][0]["data"];
  ASSERT_EQ(pts.size(), 4u);
  EXPECT_EQ(pts[0], (ojson{{"x", 10.0}, {"y", 0.25}}));
  EXPECT_EQ(pts[3], (ojson{{"x", 40.0}, {"y", 1.0}}));
  EXPECT_EQ(chart(r, "cdf-tpot")->config["data"]["datasets"][0]["data"].size(), 3u);  // the one-token answer has no TPOT
  // HBM stack of the decode GPU: 45 + 14 + 1 + 2 + 30 (KV peak) + 43 (budget left) + 15 (held back) = 150 = hbm_gb
  const auto* hbm = chart(r, "hbm");
  ASSERT_NE(hbm, nullptr);
  EXPECT_EQ(hbm->config["data"]["labels"], (ojson{"a decode"}));
  double sum = 0;
  std::vector<double> parts;
  for (const auto& ds : hbm->config["data"]["datasets"]) parts.push_back(ds["data"][0].get<double>()), sum += parts.back();
  EXPECT_EQ(parts, (std::vector<double>{45, 14, 1, 2, 30, 43, 15}));
  EXPECT_DOUBLE_EQ(sum, 150.0);
  // P→D bytes without a timeline: one bar of 2 GB, link not recorded
  const auto* tv = chart(r, "transfer-volume");
  ASSERT_NE(tv, nullptr);
  ASSERT_EQ(tv->config["data"]["datasets"].size(), 1u);
  EXPECT_EQ(tv->config["data"]["datasets"][0]["data"][0], 2.0);
  // absent: timeline (KV over time, all-to-all) and cost
  EXPECT_TRUE(omitted(r, "KV occupancy over time: a"));
  EXPECT_TRUE(omitted(r, "EP all-to-all time"));
  EXPECT_TRUE(omitted(r, "Unit cost"));
  EXPECT_EQ(chart(r, "unit-cost"), nullptr);
  // the command writes the page with the same data embedded and exits 0
  const auto o = test::sh("report " + d.string() + " --out " + (d / "r.html").string());
  EXPECT_EQ(o.status, 0) << o.text;
  const std::string html = test::slurp(d / "r.html");
  EXPECT_NE(html.find("Chart.js v4.5.1"), std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  EXPECT_NE(html.find("\"cdf-ttft\""), std::string::npos);
  // with a --timeline-window timeline (rev25: its slices' bytes were shown as the run's P->D bytes and
  // its KV counters plotted from 0 s): summary.json's 2 GB split 3:1 as the slices are (NIC 3 GB, NVLink
  // 1 GB), the samples span the window, the all-to-all caption names it
  write(d / "a" / "timeline.json", R"({"traceEvents": [
    {"ph": "b", "cat": "kv", "name": "KV P0→D0", "id": 1, "pid": 4, "tid": 0, "ts": 51000000, "args": {"bytes": 3e9}},
    {"ph": "e", "cat": "kv", "name": "KV P0→D0", "id": 1, "pid": 4, "tid": 0, "ts": 51100000},
    {"ph": "b", "cat": "kv", "name": "KV P0→D1", "id": 2, "pid": 4, "tid": 1, "ts": 52000000, "args": {"bytes": 1e9}},
    {"ph": "e", "cat": "kv", "name": "KV P0→D1", "id": 2, "pid": 4, "tid": 1, "ts": 52100000},
    {"ph": "b", "cat": "kv-tier", "name": "GPU→L2 session 3", "id": 0, "pid": 4, "tid": 4, "ts": 53000000, "args": {"bytes": 9e9}},
    {"ph": "e", "cat": "kv-tier", "name": "GPU→L2 session 3", "id": 0, "pid": 4, "tid": 4, "ts": 53100000},
    {"ph": "X", "name": "decode all-to-all", "pid": 3, "tid": 1000, "ts": 55000000, "dur": 2000, "args": {"exposed_ms": 1.0}},
    {"ph": "C", "name": "decode instance 0 KV GB per GPU", "pid": 2, "tid": 0, "ts": 54000000, "args": {"mean": 7.0, "busiest": 8.0}}],
    "metadata": {"end_s": 120.0, "step_slices_written": 0, "step_slices_dropped": 0, "window_start_s": 50.0, "window_end_s": 60.0}})");
  const auto rw = rp::build_report(d.string());
  const auto* tvw = chart(rw, "transfer-volume");
  ASSERT_NE(tvw, nullptr);
  ASSERT_GE(tvw->config["data"]["datasets"].size(), 2u);
  EXPECT_DOUBLE_EQ(tvw->config["data"]["datasets"][0]["data"][0].get<double>(), 1.5);  // NIC: 2 GB x 3/4 (the kv-tier slice is not P->D)
  EXPECT_DOUBLE_EQ(tvw->config["data"]["datasets"][1]["data"][0].get<double>(), 0.5);  // NVLink
  const auto* kv = chart(rw, "kv-time-0");
  ASSERT_NE(kv, nullptr);
  EXPECT_EQ(kv->config["data"]["datasets"][0]["data"].front()["x"], 50.0);
  EXPECT_EQ(kv->config["data"]["datasets"][0]["data"].back()["x"], 60.0);
  const auto* a2a = chart(rw, "a2a-time");
  ASSERT_NE(a2a, nullptr);
  EXPECT_NE(a2a->caption.find("--timeline-window [50, 60] s only"), std::string::npos) << a2a->caption;
  EXPECT_EQ(a2a->caption.find("dropped"), std::string::npos) << a2a->caption;
  // a timeline that dropped step slices past max_step_events says its sums are a lower bound (rev26:
  // "over the whole run" over 10 of 2,194 steps)
  std::string t = test::slurp(d / "a" / "timeline.json");
  const std::string none = "\"step_slices_written\": 0, \"step_slices_dropped\": 0";
  ASSERT_NE(t.find(none), std::string::npos);
  t.replace(t.find(none), none.size(), "\"step_slices_written\": 10, \"step_slices_dropped\": 2184");
  write(d / "a" / "timeline.json", t);
  const auto* a2a_cut = chart(rp::build_report(d.string()), "a2a-time");
  ASSERT_NE(a2a_cut, nullptr);
  EXPECT_NE(a2a_cut->caption.find("but of its 10 steps written only: 2184 more were dropped past timeline.max_step_events, so its sums are a lower bound"),
            std::string::npos)
      << a2a_cut->caption;
  fs::remove_all(d);
}

TEST(Report, SweepNodesNeededAndThroughputAgainstLoad) {
  const fs::path d = scratch("sweep");
  // 2 loads x 2 GPUs; h200 (6 nodes) meets the SLO only at 100 sessions, b300 (4 nodes) at both
  write(d / "results.json", R"({"grid": "g.json", "scenario": "s.json", "points": 4,
    "parameters": [{"path": "deployments.0.hardware", "values": ["h200", "b300"]}, {"path": "workload.concurrency", "values": [100, 200]}],
    "rows": [
     {"point": "p0000", "deployments.0.hardware": "h200", "workload.concurrency": 100, "status": "ok", "deployment": "x", "output_tokens_per_s_per_gpu": 10.5, "goodput_fraction_of_finished": 1.0},
     {"point": "p0001", "deployments.0.hardware": "h200", "workload.concurrency": 200, "status": "ok", "deployment": "x", "output_tokens_per_s_per_gpu": 19.0, "goodput_fraction_of_finished": 0.5},
     {"point": "p0002", "deployments.0.hardware": "b300", "workload.concurrency": 100, "status": "ok", "deployment": "x", "output_tokens_per_s_per_gpu": 12.0, "goodput_fraction_of_finished": 1.0},
     {"point": "p0003", "deployments.0.hardware": "b300", "workload.concurrency": 200, "status": "failed", "deployment": null}]})");
  // nodes needed takes capacity's SLO test (sim/exporters/report/slo.hpp) with each point's bounds
  // (goodput.slo_ttft_s 2 s, slo_tpot_s 50 ms): h200 at 200 sessions has 99.5% of its finished
  // requests within the SLO (the old >= 99% test took it) but a backlog: TTFT p99 counting the
  // requests in flight is 30 s; so h200 needs its 6 nodes at 100 sessions only
  auto summary = [](const char* hw, int nodes, double good, double ttft_p99_ms, double tpot_p99_ms) {
    return std::string(R"({"deployments": [{"deployment": "x", "model": "kimi-k3", "hardware": ")") + hw + R"(", "cluster": {"nodes": )" +
           std::to_string(nodes) + R"(}, "goodput": {"fraction_of_finished": )" + std::to_string(good) +
           R"(, "slo_ttft_s": 2.0, "slo_tpot_s": 0.05}, "requests": {"arrived": 1000, "completed": 900, "rejected": 0},
           "latency": {"ttft_with_in_flight": {"p99_ms": )" + std::to_string(ttft_p99_ms) + R"(}, "tpot": {"p99_ms": )" +
           std::to_string(tpot_p99_ms) + "}}}]}";
  };
  write(d / "points/p0000/summary.json", summary("h200", 6, 1.0, 1500, 40));
  write(d / "points/p0001/summary.json", summary("h200", 6, 0.995, 30000, 40));
  write(d / "points/p0002/summary.json", summary("b300", 4, 1.0, 1999, 49.9));
  const auto r = rp::build_report(d.string());
  EXPECT_EQ(r.kind, "sweep");
  const auto* tp = chart(r, "throughput-output");
  ASSERT_NE(tp, nullptr);
  const ojson& ds = tp->config["data"]["datasets"];
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds[0]["label"], "hardware=h200");
  EXPECT_EQ(ds[0]["data"], (ojson::array({{{"x", 100.0}, {"y", 10.5}}, {{"x", 200.0}, {"y", 19.0}}})));
  EXPECT_EQ(ds[1]["data"].size(), 1u);  // the failed point has no value
  EXPECT_EQ(chart(r, "goodput")->config["data"]["datasets"][0]["data"][1]["y"], 50.0);  // percent
  const auto* nn = chart(r, "nodes-needed");
  ASSERT_NE(nn, nullptr);
  EXPECT_EQ(nn->config["data"]["datasets"][0]["label"], "kimi-k3 on h200");
  EXPECT_EQ(nn->config["data"]["datasets"][0]["data"], (ojson::array({{{"x", 100.0}, {"y", 6.0}}})));
  EXPECT_EQ(nn->config["data"]["datasets"][1]["data"], (ojson::array({{{"x", 100.0}, {"y", 4.0}}})));
  EXPECT_TRUE(omitted(r, "HBM per GPU"));  // the summaries have no memory_per_gpu
  // a point results.json lists as ok whose summary is cut or gone: exit 2 naming the file (rev25: it
  // was skipped, and nodes needed changed silently); the failed point p0003 needs none
  write(d / "points/p0001/summary.json", "{\"deployments\": [{\"deployment\": \"x\", ");
  const auto o = test::sh("report " + d.string());
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find((d / "points/p0001/summary.json").string() + ": not valid JSON"), std::string::npos) << o.text;
  fs::remove(d / "points/p0001/summary.json");
  const auto o2 = test::sh("report " + d.string());
  EXPECT_EQ(o2.status, 2) << o2.text;
  EXPECT_NE(o2.text.find((d / "points/p0001/summary.json").string() + ": missing, but results.json lists point p0001 as ok"), std::string::npos)
      << o2.text;
  fs::remove_all(d);
}

// Legend labels tell apart axes whose last segments are equal (rev25: a prefill/decode instances
// sweep read "instances=1, instances=2"): the shortest unique tail of each path.
TEST(Report, SweepLegendsTellAxesWithTheSameLastSegmentApart) {
  const fs::path d = scratch("legend");
  write(d / "results.json", R"({"parameters": [{"path": "deployments.1.prefill.instances", "values": [1, 2]},
      {"path": "deployments.1.decode.instances", "values": [1, 2]}, {"path": "workload.concurrency", "values": [10, 20]}],
    "rows": [{"point": "p0000", "deployments.1.prefill.instances": 1, "deployments.1.decode.instances": 2, "workload.concurrency": 10,
              "status": "ok", "deployment": "x", "output_tokens_per_s_per_gpu": 1.0}]})");
  write(d / "points/p0000/summary.json", R"({"deployments": [{"deployment": "x"}]})");
  const auto r = rp::build_report(d.string());
  const auto* tp = chart(r, "throughput-output");
  ASSERT_NE(tp, nullptr);
  EXPECT_EQ(tp->config["data"]["datasets"][0]["label"], "prefill.instances=1, decode.instances=2");
  fs::remove_all(d);
}

TEST(Report, NotAnOutputFolderExits2) {
  const fs::path d = scratch("bad");
  const auto o = test::sh("report " + d.string());
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("neither a run's output (summary.json), a sweep's (results.json) nor a capacity search's (capacity.json)"), std::string::npos) << o.text;
  write(d / "summary.json", "{\"deployments\": [");
  const auto o2 = test::sh("report " + d.string());
  EXPECT_EQ(o2.status, 2) << o2.text;
  EXPECT_NE(o2.text.find((d / "summary.json").string() + ": not valid JSON"), std::string::npos) << o2.text;
  // a deployment name that would leave the folder is refused as the scenario reader refuses it
  // (review: "../default/k3-h200" read another run's files and exited 0)
  write(d / "summary.json", R"({"deployments": [{"deployment": "../default/k3-h200"}]})");
  const auto o3 = test::sh("report " + d.string());
  EXPECT_EQ(o3.status, 2) << o3.text;
  EXPECT_NE(o3.text.find("deployment \"../default/k3-h200\": use letters, digits"), std::string::npos) << o3.text;
  // two commands' outputs in one folder (rev25: reported as a sweep without a word)
  write(d / "results.json", R"({"parameters": [], "rows": []})");
  const auto o4 = test::sh("report " + d.string());
  EXPECT_EQ(o4.status, 2) << o4.text;
  EXPECT_NE(o4.text.find("holds results.json and summary.json, the outputs of two commands"), std::string::npos) << o4.text;
  fs::remove(d / "results.json");
  fs::remove(d / "summary.json");
  // a capacity run with figures that are not numbers (rev25: "abc" and -5 nodes were taken silently)
  write(d / "capacity.json", R"({"found": false, "runs": [{"nodes": 4, "meets_slo": false, "ttft_p99_s": null, "tpot_p99_s": 0.05},
    {"nodes": -5, "meets_slo": false, "ttft_p99_s": 1}]})");
  const auto o5 = test::sh("report " + d.string());
  EXPECT_EQ(o5.status, 2) << o5.text;
  EXPECT_NE(o5.text.find("capacity.json: runs[1].nodes: must be a whole number of nodes, at least 1 (got -5)"), std::string::npos) << o5.text;
  write(d / "capacity.json", R"({"found": false, "runs": [{"nodes": 4, "meets_slo": false, "ttft_p99_s": "abc", "tpot_p99_s": 0.05}]})");
  const auto o6 = test::sh("report " + d.string());
  EXPECT_EQ(o6.status, 2) << o6.text;
  EXPECT_NE(o6.text.find("capacity.json: runs[0].ttft_p99_s: must be seconds (a number >= 0) or null (got \"abc\")"), std::string::npos) << o6.text;
  // a verdict that is not a boolean, and "found" likewise (rev25b: the library's bare type error, no file or field)
  write(d / "capacity.json", R"({"found": false, "runs": [{"nodes": 4, "meets_slo": "yes", "ttft_p99_s": 1, "tpot_p99_s": 0.05}]})");
  const auto o7 = test::sh("report " + d.string());
  EXPECT_EQ(o7.status, 2) << o7.text;
  EXPECT_NE(o7.text.find("capacity.json: runs[0].meets_slo: must be true or false (got \"yes\")"), std::string::npos) << o7.text;
  write(d / "capacity.json", R"({"found": "no", "runs": []})");
  const auto o8 = test::sh("report " + d.string());
  EXPECT_EQ(o8.status, 2) << o8.text;
  EXPECT_NE(o8.text.find("capacity.json: found: must be true or false (got \"no\")"), std::string::npos) << o8.text;
  fs::remove_all(d);
}

// A capacity search's folder (review, twenty-third session: `report` refused it): the answer,
// every run (with its factors) and each run's p99s against its nodes, the runs that met the SLO
// apart from those that missed, and the SLO's bound across the nodes tried.
TEST(Report, CapacityFolderTablesAndP99AgainstNodes) {
  const fs::path d = scratch("capacity");
  write(d / "capacity.json", R"({"found": true, "deployment": "k3", "asked": {"slo": {"ttft_p99_s": 2.0, "tpot_p99_s": 0.05}},
    "answer": {"nodes": 12, "prefill_instances": 1, "decode_instances": 2, "attn_tp": 8, "max_running": 64, "ttft_p99_s": 1.5,
               "tpot_p99_s": 0.0421, "arrived": 1234, "meets_slo": true},
    "band": {"nodes_p10": 12, "nodes_p90": 16},
    "nodes_at_serving_error": {"least": {"step_factors": {"prefill": 1.02, "decode_large": 0.93, "decode_small": 1.13}, "nodes": 12, "text": "meets"},
                               "largest": {"step_factors": {"prefill": 1.2, "decode_large": 1.21, "decode_small": 1.33}, "nodes": null,
                                           "candidates_missed_up_to": 20, "text": "none"}},
    "runs": [{"prefill_instances": 1, "decode_instances": 1, "nodes": 8, "seed": 42, "meets_slo": false, "missed": "TTFT", "ttft_p99_s": 9.0,
              "tpot_p99_s": 0.04, "arrived": 1000, "kernel_factor": 1.0, "step_factors": {"prefill": 1.0, "decode_large": 1.0, "decode_small": 1.0}},
             {"prefill_instances": 1, "decode_instances": 2, "nodes": 12, "seed": 42, "meets_slo": true, "missed": "", "ttft_p99_s": 1.5,
              "tpot_p99_s": 0.0421, "arrived": 1234, "kernel_factor": 1.048, "step_factors": {"prefill": 1.0, "decode_large": 1.0, "decode_small": 1.0}}]})");
  const rp::Report r = rp::build_report(d.string());
  EXPECT_EQ(r.kind, "capacity");
  ASSERT_EQ(r.tables.size(), 3u);
  EXPECT_EQ(r.tables[0].rows[1][1], "12");
  EXPECT_EQ(r.tables[0].rows[1][2], "1 x 2");
  EXPECT_EQ(r.tables[0].rows[1][6], "42.1");  // TPOT p99 in ms
  EXPECT_EQ(r.tables[0].rows[1][8], "12 - 16");
  EXPECT_EQ(r.tables[1].rows[2][2], "none met up to 20");
  EXPECT_EQ(r.tables[2].rows.size(), 3u);  // header + 2 runs
  EXPECT_EQ(r.tables[2].rows[1][9], "misses: TTFT");
  EXPECT_EQ(r.tables[2].rows[2][5], "kernels x1.048");
  const rp::Chart* t = chart(r, "capacity-ttft");
  ASSERT_NE(t, nullptr);
  const auto& ds = t->config["data"]["datasets"];
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds[0]["data"], (ojson::array({{{"x", 12.0}, {"y", 1.5}}})));  // met
  EXPECT_EQ(ds[1]["data"], (ojson::array({{{"x", 8.0}, {"y", 9.0}}})));   // missed
  EXPECT_EQ(ds[2]["data"], (ojson::array({{{"x", 8.0}, {"y", 2.0}}, {{"x", 12.0}, {"y", 2.0}}})));  // the bound
  const rp::Chart* p = chart(r, "capacity-tpot");
  ASSERT_NE(p, nullptr);
  EXPECT_DOUBLE_EQ(p->config["data"]["datasets"][2]["data"][0]["y"].get<double>(), 50.0);  // ms
  const auto o = test::sh("report " + d.string() + " --out " + (d / "r.html").string());
  EXPECT_EQ(o.status, 0) << o.text;
  EXPECT_TRUE(fs::exists(d / "r.html"));
  // nothing found: the answer row says why per configuration (rev25: "within the node bound" for a
  // search that stopped as latency-bound at 256 nodes)
  write(d / "capacity.json", R"({"found": false, "deployment": "k3", "configurations": [
    {"attn_tp": 8, "max_running": 64, "found": false, "why": "attn TP 8: TTFT p99 12.000 s stayed put: bound by one request's latency"},
    {"attn_tp": 4, "max_running": 64, "found": false, "runs": 9}], "runs": []})");
  const rp::Report rn = rp::build_report(d.string());
  EXPECT_EQ(rn.tables[0].rows[1][0],
            "no: no configuration met the SLO: attn TP 8: TTFT p99 12.000 s stayed put: bound by one request's latency; attn TP 4, decode batch limit 64: "
            "not within the node bound");
  fs::remove_all(d);
}

// A deployment whose requests.csv cannot be read loses its CDF lines: that is listed among the
// charts left out (review: "9 charts, 0 left out" while K3's lines were missing).
TEST(Report, AnUnreadableRequestsFileIsListedAsLeftOut) {
  const fs::path d = scratch("cut");
  write(d / "summary.json", R"({"deployments": [{"deployment": "a"}, {"deployment": "b"}]})");
  write(d / "a" / "requests.csv", "id,status,arrival_s,ttft_ms,tpot_ms,e2e_ms\n0,completed,1.0,900,20,3000\n");
  write(d / "b" / "requests.csv", "id,status,arrival_s,ttft_ms,tpot_ms,e2e_ms\n0,completed,1.0\n");  // cut short
  const auto r = rp::build_report(d.string());
  ASSERT_NE(chart(r, "cdf-ttft"), nullptr);
  EXPECT_EQ(chart(r, "cdf-ttft")->config["data"]["datasets"].size(), 1u);
  EXPECT_TRUE(omitted(r, "TTFT / TPOT / end-to-end CDF lines of b"));
  EXPECT_FALSE(omitted(r, "TTFT / TPOT / end-to-end CDF lines of a"));
  EXPECT_EQ(chart(r, "cdf-ttft")->caption.find("no requests.csv for b"), std::string::npos);  // it exists: cut, not absent (rev25)
  // no requests.csv at all (a run with --requests none): listed as left out too, not only in a caption (rev25)
  fs::remove(d / "b" / "requests.csv");
  const auto r2 = rp::build_report(d.string());
  EXPECT_TRUE(omitted(r2, "TTFT / TPOT / end-to-end CDF lines of b"));
  EXPECT_NE(chart(r2, "cdf-ttft")->caption.find("no lines for b (no requests.csv)"), std::string::npos) << chart(r2, "cdf-ttft")->caption;
  fs::remove_all(d);
}

// The report's latency CDFs cover the requests summary.json's latency figures cover: completed and
// arrived at or after the run's warm-up (the review found warm-up rows in the CDFs: 38 points
// against the summary's 5). A cell that is not a number is an error naming its line and column.
TEST(Report, LatencyCdfsLeaveOutTheWarmUpAndRefuseBadCells) {
  const fs::path d = fs::temp_directory_path() / ("servesim_report_lat_" + std::to_string(getpid()));
  fs::create_directories(d);
  const std::string head = "id,status,arrival_s,ttft_ms,tpot_ms,e2e_ms\n";
  write(d / "requests.csv", head + "0,completed,1.0,900,20,3000\n1,completed,12.0,100,10,500\n2,in_flight,13.0,,,\n3,completed,10.0,200,,700\n");
  const rp::Latencies all = rp::read_latencies((d / "requests.csv").string());
  EXPECT_EQ(all.ttft_ms, (std::vector<double>{900, 100, 200}));
  const rp::Latencies win = rp::read_latencies((d / "requests.csv").string(), 10.0);
  EXPECT_EQ(win.ttft_ms, (std::vector<double>{100, 200}));  // arrival 1.0 is in the warm-up; 10.0 is the window's start
  EXPECT_EQ(win.tpot_ms, (std::vector<double>{10}));       // an empty cell is no sample
  EXPECT_EQ(win.e2e_ms, (std::vector<double>{500, 700}));
  write(d / "bad.csv", head + "0,completed,1.0,900,20,3000\n1,completed,12.0,abc,10,500\n");
  try {
    rp::read_latencies((d / "bad.csv").string());
    ADD_FAILURE() << "a non-numeric cell was accepted";
  } catch (const rp::ReportError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.csv:3: column ttft_ms: \"abc\""), std::string::npos) << e.what();
  }
  write(d / "short.csv", head + "0,completed,1.0\n");
  EXPECT_THROW(rp::read_latencies((d / "short.csv").string()), rp::ReportError);
  // more fields than the header, and a NUL byte (review, twenty-third session: the reader's C-string
  // lines ended at a NUL and glued the next row on, exit 0 with a 30,001 ms point and a row gone)
  auto error = [&](const std::string& name, const std::string& text) {
    write(d / name, text);
    try {
      rp::read_latencies((d / name).string());
    } catch (const rp::ReportError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error("long.csv", head + "0,completed,1.0,900,20,3000,7\n").find("long.csv:2: 7 fields, the header has 6"), std::string::npos);
  EXPECT_NE(error("nul.csv", head + std::string("0,completed,1.0,900,20,3000\0\n1,completed,12.0,100,10,500\n", 57)).find("nul.csv:2: a NUL byte (U+0000) at column 28"),
            std::string::npos)
      << error("nul.csv", head + std::string("0,completed,1.0,900,20,3000\0\n1,completed,12.0,100,10,500\n", 57));
  // the JSON files `report` reads refuse one too (json_unique.hpp): summary.json
  write(d / "summary.json", std::string("{\"deployments\": []}\0garbage", 27));
  const auto o = test::sh("report " + d.string());
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("summary.json: not valid JSON: a NUL byte (U+0000) at column 20"), std::string::npos) << o.text;
  fs::remove_all(d);
}

// The SLO test capacity and the sweep report share (slo.hpp), bound by bound on a hand-made entry:
// 1,000 arrived, 10 rejected (1.0%: allowed, 11 is not), TTFT p99 with in-flight 2,000 ms, TPOT p99 50 ms.
TEST(Report, SloTestIsCapacitysTest) {
  auto dep = [](long long completed, long long rejected, double ttft_ms, double tpot_ms) {
    return ojson{{"requests", {{"arrived", 1000}, {"completed", completed}, {"rejected", rejected}}},
                 {"latency", {{"ttft_with_in_flight", {{"p99_ms", ttft_ms}, {"in_flight_without_first_token", 3}}}, {"tpot", {{"p99_ms", tpot_ms}}}}}};
  };
  auto v = servesim::judge_slo(dep(900, 10, 2000, 50), 2.0, 0.05, 0.01);
  EXPECT_TRUE(v.ok) << v.why;  // on every bound exactly
  EXPECT_DOUBLE_EQ(v.ttft_p99_s, 2.0);
  EXPECT_EQ(v.waiting, 3);
  EXPECT_EQ(servesim::judge_slo(dep(900, 11, 2000, 50), 2.0, 0.05, 0.01).why, "11 rejected");
  EXPECT_EQ(servesim::judge_slo(dep(900, 0, 2001, 50), 2.0, 0.05, 0.01).why, "TTFT");
  EXPECT_EQ(servesim::judge_slo(dep(900, 0, 2000, 50.1), 2.0, 0.05, 0.01).why, "TPOT");
  EXPECT_EQ(servesim::judge_slo(dep(0, 0, 1, 1), 2.0, 0.05, 0.01).why, "nothing completed in the window");
  // no TPOT figure (null p99): a miss, not a pass
  ojson no_tpot = dep(900, 0, 1000, 10);
  no_tpot["latency"]["tpot"]["p99_ms"] = nullptr;
  EXPECT_EQ(servesim::judge_slo(no_tpot, 2.0, 0.05, 0.01).why, "TPOT");
}
