#include "recipes/op_profile.h"

#include <algorithm>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>

#include "base/file_util.h"
#include "tests/scratch_dir.h"

namespace tmx::recipes {
namespace {

const OpStats* Find(const std::vector<OpStats>& ops, const std::string& name) {
  for (const OpStats& op : ops) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

TEST(OpProfileTest, OperationsFallIntoMatmulAttentionAndOther) {
  for (const char* m : {"aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm", "aten::baddbmm"}) {
    EXPECT_EQ(CategoryOf(m), OpCategory::kMatmul) << m;
  }
  for (const char* a : {"aten::_scaled_dot_product_flash_attention_for_cpu",
                        "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
                        "aten::_scaled_dot_product_efficient_attention_backward", "aten::_flash_attention_forward"}) {
    EXPECT_EQ(CategoryOf(a), OpCategory::kAttention) << a;
  }
  // The composite only dispatches; the products' callers and everything elementwise are other.
  for (const char* o : {"aten::scaled_dot_product_attention", "aten::matmul", "aten::linear", "aten::mul",
                        "aten::copy_", "MmBackward0", "aten::mmx"}) {
    EXPECT_EQ(CategoryOf(o), OpCategory::kOther) << o;
  }
}

TEST(OpProfileTest, CountsCallsAndSplitsSelfFromCalleeTime) {
  torch::NoGradGuard no_grad;
  const torch::Tensor a = torch::randn({256, 256}), b = torch::randn({256, 256});
  OpProfiler profiler(/*record_shapes=*/true);
  at::mm(a, b);  // before Start: not seen
  ASSERT_TRUE(profiler.Start().ok());
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) at::mm(a, b);
  at::matmul(a, b);  // 2-D matmul calls aten::mm
  at::add(a, b);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  profiler.Stop();
  at::mul(a, b);  // after Stop: not seen

  const std::vector<OpStats> ops = profiler.Ops();
  const OpStats* mm = Find(ops, "aten::mm");
  const OpStats* matmul = Find(ops, "aten::matmul");
  const OpStats* add = Find(ops, "aten::add");
  ASSERT_NE(mm, nullptr);
  ASSERT_NE(matmul, nullptr);
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(Find(ops, "aten::mul"), nullptr);
  EXPECT_EQ(mm->calls, 4);
  EXPECT_EQ(mm->shapes, "f32[256, 256], f32[256, 256]");
  EXPECT_EQ(matmul->calls, 1);
  EXPECT_EQ(add->calls, 1);
  // matmul's own time excludes its mm; the total includes it.
  EXPECT_GT(matmul->total_s, matmul->self_s);
  double self = 0;
  for (const OpStats& op : ops) {
    EXPECT_GE(op.self_s, 0) << op.name;
    EXPECT_LE(op.self_s, op.total_s + 1e-12) << op.name;
    self += op.self_s;
  }
  EXPECT_LE(self, wall);
  for (size_t i = 1; i < ops.size(); ++i) EXPECT_GE(ops[i - 1].self_s, ops[i].self_s);  // largest self time first
}

// A list of tensors (a fused optimizer takes hundreds) shows its first 8 shapes and the count.
TEST(OpProfileTest, ALongListOfInputsShowsItsFirstShapesAndItsCount) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> parts;
  for (int64_t i = 1; i <= 10; ++i) parts.push_back(torch::zeros({i}));
  OpProfiler profiler(/*record_shapes=*/true);
  ASSERT_TRUE(profiler.Start().ok());
  at::cat(parts);
  at::cat({parts[0], parts[1]});
  profiler.Stop();
  std::vector<std::string> shapes;
  for (const OpStats& op : profiler.Ops()) {
    if (op.name == "aten::cat") shapes.push_back(op.shapes);
  }
  std::sort(shapes.begin(), shapes.end());
  EXPECT_EQ(shapes, (std::vector<std::string>{
                        "f32[1], f32[2]",
                        "f32[1], f32[2], f32[3], f32[4], f32[5], f32[6], f32[7], f32[8], ... (10 tensors)"}));
}

TEST(OpProfileTest, WithoutShapesOneRowPerOperationAndOneProfilerAtATime) {
  torch::NoGradGuard no_grad;
  OpProfiler first(/*record_shapes=*/false);
  ASSERT_TRUE(first.Start().ok());
  at::mm(torch::ones({2, 3}), torch::ones({3, 4}));
  at::mm(torch::ones({5, 3}), torch::ones({3, 4}));
  OpProfiler second(/*record_shapes=*/false);
  Status busy = second.Start();
  EXPECT_EQ(busy.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(busy.message().find("another operation profiler"), std::string::npos);
  first.Stop();
  const OpStats* mm = Find(first.Ops(), "aten::mm");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->calls, 2);
  EXPECT_EQ(mm->shapes, "");
  EXPECT_TRUE(second.Start().ok());  // free again
}

TEST(OpProfileTest, BackwardIsRecordedAsAutogradNodesAndTheirOperations) {
  const torch::Tensor w = torch::randn({64, 64}, torch::requires_grad());
  const torch::Tensor x = torch::randn({32, 64});
  OpProfiler profiler(/*record_shapes=*/false);
  ASSERT_TRUE(profiler.Start().ok());
  torch::mm(x, w).sum().backward();
  profiler.Stop();
  const std::vector<OpStats> ops = profiler.Ops();
  const OpStats* mm = Find(ops, "aten::mm");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->calls, 2);  // forward, and the weight's gradient (x needs none)
  bool node = false;
  for (const OpStats& op : ops) node |= op.name.find("MmBackward") != std::string::npos;
  EXPECT_TRUE(node);
}

// An enabled profiler with this schedule.
ProfilerSettings Schedule(int64_t wait, int64_t warmup, int64_t active, int64_t cycles) {
  ProfilerSettings s;
  s.enabled = true;
  s.wait_steps = wait;
  s.warmup_steps = warmup;
  s.active_steps = active;
  s.num_cycles = cycles;
  return s;
}

TEST(OpProfileTest, TheScheduleWaitsWarmsUpAndRecordsPerCycle) {
  ProfilerSettings s = Schedule(/*wait=*/1, /*warmup=*/1, /*active=*/2, /*cycles=*/2);
  std::vector<int64_t> active, ends;
  for (int64_t step = 0; step < 12; ++step) {
    if (s.Active(step)) active.push_back(step);
    if (s.EndsCycle(step)) ends.push_back(step);
  }
  EXPECT_EQ(active, (std::vector<int64_t>{2, 3, 6, 7}));
  EXPECT_EQ(ends, (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(s.DescribeSteps(), "steps 3-4 and 7-8");
  s.num_cycles = 0;  // repeats
  EXPECT_TRUE(s.Active(10));
  EXPECT_EQ(s.DescribeSteps(), "steps 3-4, 7-8, ... (every 4 steps)");
  s.num_cycles = 1;
  s.active_steps = 1;
  EXPECT_EQ(s.DescribeSteps(), "step 3");
  s.enabled = false;
  EXPECT_FALSE(s.Active(2));
}

TEST(OpProfileTest, SettingsTakeTorchtunesDefaultsForAbsentKeys) {
  StatusOr<Config> c = Config::FromString(
      "output_dir: /tmp/run\nprofiler:\n  _component_: torchtune.training.setup_torch_profiler\n  enabled: True\n"
      "  active_steps: 3\n",
      "p.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  StatusOr<ProfilerSettings> s = ReadProfilerSettings(*c);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->enabled);
  EXPECT_EQ(s->wait_steps, 5);
  EXPECT_EQ(s->warmup_steps, 5);
  EXPECT_EQ(s->active_steps, 3);
  EXPECT_EQ(s->num_cycles, 1);
  EXPECT_TRUE(s->record_shapes);
  EXPECT_EQ(s->output_dir, "/tmp/run/profiler_output");
  StatusOr<Config> none = Config::FromString("output_dir: /tmp/run\n", "n.yaml");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(ReadProfilerSettings(*none)->enabled);
}

TEST(OpProfileTest, ReportsSayWhatShareOfTheStepsIsOutsideMatmulAndAttention) {
  OpProfile p;
  p.steps = 2;
  p.step_time_s = 10;
  p.device_type = "cpu";
  p.ops = {{"aten::mm", "", 400, 6.0, 6.0},
           {"aten::_scaled_dot_product_flash_attention_for_cpu", "", 32, 1.0, 1.0},
           {"aten::mul", "", 900, 1.5, 1.5},
           {"aten::linear", "", 300, 0.5, 6.5}};
  EXPECT_DOUBLE_EQ(p.CategorySeconds(OpCategory::kMatmul), 6.0);
  EXPECT_DOUBLE_EQ(p.CategorySeconds(OpCategory::kAttention), 1.0);
  EXPECT_DOUBLE_EQ(p.CategorySeconds(OpCategory::kOther), 2.0);
  EXPECT_DOUBLE_EQ(p.OutsideOpsSeconds(), 1.0);
  EXPECT_DOUBLE_EQ(p.OverheadShare(), 0.3);
  EXPECT_EQ(SummarizeOpProfile(p),
            "matmul 60.0%, attention 10.0%, other 20.0%, outside operations 10.0% of 2 steps (10.000 s)");
  const std::string text = FormatOpProfile(p);
  EXPECT_NE(text.find("outside matmul and attention: 30.0% of the step time"), std::string::npos) << text;
  EXPECT_NE(text.find("     6.000   60.0%     400  matmul     aten::mm\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("Host times"), std::string::npos);
  p.device_type = "cuda";
  EXPECT_NE(FormatOpProfile(p).find("Host times on cuda"), std::string::npos);
  const nlohmann::json j = OpProfileJson(p);
  EXPECT_DOUBLE_EQ(j["outside_matmul_and_attention_share"].get<double>(), 0.3);
  EXPECT_EQ(j["ops"][2]["category"], "other");
  EXPECT_EQ(j["ops"][1]["calls"], 32);
}

TEST(OpProfileTest, TheStepProfilerWritesItsFilesAtTheEndOfEachCycle) {
  test::ScratchDir dir;
  ProfilerSettings s = Schedule(/*wait=*/1, /*warmup=*/0, /*active=*/1, /*cycles=*/1);
  s.output_dir = dir.path() + "/prof";
  StepProfiler profiler(s, "cpu", /*rank=*/1);
  EXPECT_EQ(profiler.TextPath(), dir.path() + "/prof/op_profile_rank1.txt");
  const torch::Tensor a = torch::ones({8, 8});
  for (int64_t step = 0; step < 3; ++step) {
    ASSERT_TRUE(profiler.BeforeStep(step).ok());
    at::mm(a, a);
    StatusOr<bool> wrote = profiler.AfterStep(step, 0.5);
    ASSERT_TRUE(wrote.ok());
    EXPECT_EQ(*wrote, step == 1) << step;
  }
  StatusOr<std::string> json = ReadFile(profiler.JsonPath());
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  const nlohmann::json j = nlohmann::json::parse(*json);
  EXPECT_EQ(j["steps"], 1);
  EXPECT_DOUBLE_EQ(j["step_time_s"].get<double>(), 0.5);
  int64_t mm_calls = 0;  // only the recorded step's product
  for (const nlohmann::json& op : j["ops"]) {
    if (op["name"] == "aten::mm") mm_calls += op["calls"].get<int64_t>();
  }
  EXPECT_EQ(mm_calls, 1);
  EXPECT_TRUE(ReadFile(profiler.TextPath()).ok());
}

}  // namespace
}  // namespace tmx::recipes
