#include "recipes/op_profile.h"

#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>

#include "base/file_util.h"
#include "base/text.h"

namespace tmx::recipes {

const char* OpCategoryName(OpCategory category) {
  switch (category) {
    case OpCategory::kMatmul: return "matmul";
    case OpCategory::kAttention: return "attention";
    case OpCategory::kOther: return "other";
  }
  return "other";
}

OpCategory CategoryOf(std::string_view op_name) {
  static const char* const kMatmul[] = {"aten::mm",       "aten::addmm",    "aten::addmm_",
                                        "aten::bmm",      "aten::baddbmm",  "aten::baddbmm_",
                                        "aten::addbmm",   "aten::addbmm_",  "aten::_addmm_activation",
                                        "aten::_int_mm",  "aten::_weight_int4pack_mm", "aten::_weight_int8pack_mm"};
  for (const char* m : kMatmul) {
    if (op_name == m) return OpCategory::kMatmul;
  }
  // ATen's fused kernels: _scaled_dot_product_{flash,efficient,cudnn}_attention[_for_cpu][_backward],
  // _flash_attention_{forward,backward}, _efficient_attention_{forward,backward}. The composite
  // aten::scaled_dot_product_attention only dispatches to one (its self time is the dispatch).
  if (op_name.rfind("aten::_", 0) == 0 && op_name.find("attention") != std::string_view::npos) {
    return OpCategory::kAttention;
  }
  return OpCategory::kOther;
}

// ---- OpProfiler ------------------------------------------------------------------------------------------

namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// An operation in flight on one thread: when it started, what its callees took, and the one it was called from.
struct Frame : at::ObserverContext {
  int64_t start_ns = 0;
  int64_t child_ns = 0;
  Frame* parent = nullptr;
  std::string shapes;
};

thread_local Frame* t_current = nullptr;

const char* DtypeShort(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return "f32";
    case c10::kBFloat16: return "bf16";
    case c10::kHalf: return "f16";
    case c10::kDouble: return "f64";
    case c10::kLong: return "i64";
    case c10::kInt: return "i32";
    case c10::kChar: return "i8";
    case c10::kByte: return "u8";
    case c10::kBool: return "bool";
    default: return c10::toString(t);
  }
}

void AppendTensor(const at::Tensor& t, std::string* out) {
  if (!out->empty()) *out += ", ";
  if (!t.defined()) {
    *out += "-";
    return;
  }
  *out += DtypeShort(t.scalar_type());
  *out += "[";
  for (int64_t d = 0; d < t.dim(); ++d) *out += (d ? ", " : "") + std::to_string(t.size(d));
  *out += "]";
}

// The first kShownShapes tensor inputs, then how many there were: a fused optimizer's step takes every
// parameter, its gradient and both moments (hundreds of tensors) and would fill a line with them.
constexpr int kShownShapes = 8;

std::string ShapesOf(const at::RecordFunction& fn) {
  std::string out;
  int count = 0;
  auto add = [&](const at::Tensor& t) {
    if (count++ < kShownShapes) AppendTensor(t, &out);
  };
  for (const c10::IValue& v : fn.inputs()) {
    if (v.isTensor()) {
      add(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) add(t);
    }
  }
  if (count > kShownShapes) out += ", ... (" + std::to_string(count) + " tensors)";
  return out;
}

}  // namespace

struct OpProfiler::State {
  bool record_shapes = false;
  std::mutex mu;
  std::map<std::pair<std::string, std::string>, OpStats> ops;  // by name and shapes
};

namespace {

std::mutex g_mu;                             // guards g_state
std::shared_ptr<OpProfiler::State> g_state;  // the recording profiler's, else null

std::shared_ptr<OpProfiler::State> Recording() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_state;
}

std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn) {
  std::shared_ptr<OpProfiler::State> state = Recording();
  if (state == nullptr) return nullptr;
  auto frame = std::make_unique<Frame>();
  if (state->record_shapes) frame->shapes = ShapesOf(fn);
  frame->parent = t_current;
  t_current = frame.get();
  frame->start_ns = NowNs();
  return frame;
}

void OnEnd(const at::RecordFunction& fn, at::ObserverContext* context) {
  const int64_t end_ns = NowNs();
  auto* frame = static_cast<Frame*>(context);
  if (frame == nullptr) return;
  if (t_current == frame) t_current = frame->parent;
  const int64_t total_ns = end_ns - frame->start_ns;
  if (frame->parent != nullptr) frame->parent->child_ns += total_ns;
  std::shared_ptr<OpProfiler::State> state = Recording();
  if (state == nullptr) return;  // stopped while the operation ran
  std::lock_guard<std::mutex> lock(state->mu);
  OpStats& s = state->ops[{fn.name(), frame->shapes}];
  if (s.calls == 0) {
    s.name = fn.name();
    s.shapes = frame->shapes;
  }
  ++s.calls;
  s.total_s += static_cast<double>(total_ns) * 1e-9;
  s.self_s += static_cast<double>(std::max<int64_t>(0, total_ns - frame->child_ns)) * 1e-9;
}

}  // namespace

OpProfiler::OpProfiler(bool record_shapes) : state_(std::make_shared<State>()) {
  state_->record_shapes = record_shapes;
}

OpProfiler::~OpProfiler() { Stop(); }

Status OpProfiler::Start() {
  if (recording_) return Status::OK();
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_state != nullptr) {
      return Status::FailedPrecondition("another operation profiler is recording in this process; stop it first");
    }
    g_state = state_;
  }
  at::RecordFunctionCallback callback(&OnStart, &OnEnd);
  callback.needsInputs(state_->record_shapes).scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION});
  handle_ = at::addGlobalCallback(callback);
  recording_ = true;
  return Status::OK();
}

void OpProfiler::Stop() {
  if (!recording_) return;
  at::removeCallback(handle_);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_state == state_) g_state = nullptr;
  }
  recording_ = false;
}

std::vector<OpStats> OpProfiler::Ops() const {
  std::vector<OpStats> out;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    for (const auto& [key, stats] : state_->ops) out.push_back(stats);
  }
  std::stable_sort(out.begin(), out.end(), [](const OpStats& a, const OpStats& b) { return a.self_s > b.self_s; });
  return out;
}

// ---- Settings -------------------------------------------------------------------------------------------

bool ProfilerSettings::Active(int64_t step) const {
  const int64_t cycle = CycleSteps();
  if (!enabled || active_steps <= 0 || step < 0) return false;
  if (num_cycles > 0 && step / cycle >= num_cycles) return false;
  return step % cycle >= wait_steps + warmup_steps;
}

bool ProfilerSettings::EndsCycle(int64_t step) const {
  return Active(step) && step % CycleSteps() == CycleSteps() - 1;
}

std::string ProfilerSettings::DescribeSteps() const {
  const int64_t cycle = CycleSteps();
  auto range = [&](int64_t c) {
    const int64_t first = c * cycle + wait_steps + warmup_steps + 1, last = (c + 1) * cycle;
    return first == last ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last);
  };
  std::string out = (active_steps == 1 && num_cycles == 1 ? "step " : "steps ") + range(0);
  if (num_cycles == 0) return out + ", " + range(1) + ", ... (every " + std::to_string(cycle) + " steps)";
  for (int64_t c = 1; c < num_cycles; ++c) out += (c + 1 == num_cycles ? " and " : ", ") + range(c);
  return out;
}

StatusOr<ProfilerSettings> ReadProfilerSettings(const Config& config) {
  ProfilerSettings s;
  if (!config.Find("profiler").IsMap()) return s;
  StatusOr<bool> enabled = config.GetBool("profiler.enabled", false);
  StatusOr<bool> shapes = config.GetBool("profiler.record_shapes", true);
  StatusOr<std::string> output_dir = config.GetString("output_dir", "");
  for (const Status& st : {enabled.status(), shapes.status(), output_dir.status()}) TM_RETURN_IF_ERROR(st);
  const std::string default_dir = *output_dir + "/profiler_output";
  StatusOr<std::string> dir = config.GetString("profiler.output_dir", default_dir);
  TM_RETURN_IF_ERROR(dir.status());
  s.enabled = *enabled;
  s.record_shapes = *shapes;
  s.output_dir = dir->empty() ? default_dir : *dir;
  const std::pair<const char*, int64_t*> ints[] = {{"profiler.wait_steps", &s.wait_steps},
                                                   {"profiler.warmup_steps", &s.warmup_steps},
                                                   {"profiler.active_steps", &s.active_steps},
                                                   {"profiler.num_cycles", &s.num_cycles}};
  for (const auto& [key, value] : ints) {
    StatusOr<int64_t> v = config.GetInt(key, *value);
    TM_RETURN_IF_ERROR(v.status());
    *value = *v;
  }
  return s;
}

// ---- Profile and its reports ----------------------------------------------------------------------------

double OpProfile::CategorySeconds(OpCategory category) const {
  double total = 0;
  for (const OpStats& op : ops) {
    if (CategoryOf(op.name) == category) total += op.self_s;
  }
  return total;
}

double OpProfile::OutsideOpsSeconds() const {
  double in_ops = 0;
  for (const OpStats& op : ops) in_ops += op.self_s;
  return std::max(0.0, step_time_s - in_ops);
}

double OpProfile::OverheadShare() const {
  if (step_time_s <= 0) return 0;
  const double kernels = CategorySeconds(OpCategory::kMatmul) + CategorySeconds(OpCategory::kAttention);
  return std::max(0.0, 1.0 - kernels / step_time_s);
}

namespace {

std::string Percent(double part, double whole) { return FormatNumber(whole > 0 ? 100.0 * part / whole : 0.0, 1) + "%"; }

std::string Secs(double s) { return FormatNumber(s, 3); }

std::string StepsText(const OpProfile& p) {
  return std::to_string(p.steps) + (p.steps == 1 ? " step" : " steps") + " (" + Secs(p.step_time_s) + " s)";
}

}  // namespace

std::string SummarizeOpProfile(const OpProfile& p) {
  const double t = p.step_time_s;
  return std::string("matmul ") + Percent(p.CategorySeconds(OpCategory::kMatmul), t) + ", attention " +
         Percent(p.CategorySeconds(OpCategory::kAttention), t) + ", other " +
         Percent(p.CategorySeconds(OpCategory::kOther), t) + ", outside operations " +
         Percent(p.OutsideOpsSeconds(), t) + " of " + StepsText(p);
}

std::string FormatOpProfile(const OpProfile& p) {
  std::ostringstream out;
  const double t = p.step_time_s;
  out << "Operation profile of " << StepsText(p) << ", by ATen operation's self time (its time minus that of the "
      << "operations it called)\n";
  if (p.device_type != "cpu" && !p.device_type.empty()) {
    out << "Host times on " << p.device_type << ": its kernels run asynchronously, so an operation's time is its "
        << "launch unless it waits for the device.\n";
  }
  out << "\n";
  const std::pair<const char*, double> rows[] = {
      {"matmul", p.CategorySeconds(OpCategory::kMatmul)},
      {"attention", p.CategorySeconds(OpCategory::kAttention)},
      {"other", p.CategorySeconds(OpCategory::kOther)},
      {"outside operations", p.OutsideOpsSeconds()}};
  char line[256];
  for (const auto& [name, s] : rows) {
    std::snprintf(line, sizeof(line), "%-20s %10s s %7s\n", name, Secs(s).c_str(), Percent(s, t).c_str());
    out << line;
  }
  out << "outside matmul and attention: " << Percent(p.OverheadShare(), 1) << " of the step time\n\n";
  std::snprintf(line, sizeof(line), "%10s %7s %7s  %-9s  %s\n", "self s", "share", "calls", "category", "operation");
  out << line;
  for (const OpStats& op : p.ops) {
    std::snprintf(line, sizeof(line), "%10s %7s %7lld  %-9s  ", Secs(op.self_s).c_str(), Percent(op.self_s, t).c_str(),
                  static_cast<long long>(op.calls), OpCategoryName(CategoryOf(op.name)));
    out << line << op.name;
    if (!op.shapes.empty()) out << "  " << op.shapes;
    out << "\n";
  }
  return out.str();
}

nlohmann::json OpProfileJson(const OpProfile& p) {
  nlohmann::json ops = nlohmann::json::array();
  for (const OpStats& op : p.ops) {
    ops.push_back({{"name", op.name},
                   {"shapes", op.shapes},
                   {"category", OpCategoryName(CategoryOf(op.name))},
                   {"calls", op.calls},
                   {"self_s", op.self_s},
                   {"total_s", op.total_s}});
  }
  return {{"steps", p.steps},
          {"step_time_s", p.step_time_s},
          {"device_type", p.device_type},
          {"matmul_s", p.CategorySeconds(OpCategory::kMatmul)},
          {"attention_s", p.CategorySeconds(OpCategory::kAttention)},
          {"other_s", p.CategorySeconds(OpCategory::kOther)},
          {"outside_ops_s", p.OutsideOpsSeconds()},
          {"outside_matmul_and_attention_share", p.OverheadShare()},
          {"ops", ops}};
}

// ---- StepProfiler ---------------------------------------------------------------------------------------

StepProfiler::StepProfiler(ProfilerSettings settings, std::string device_type, int64_t rank)
    : settings_(std::move(settings)),
      device_type_(std::move(device_type)),
      rank_(rank),
      profiler_(settings_.record_shapes) {}

std::string StepProfiler::TextPath() const {
  return settings_.output_dir + "/op_profile" + (rank_ > 0 ? "_rank" + std::to_string(rank_) : "") + ".txt";
}

std::string StepProfiler::JsonPath() const {
  return settings_.output_dir + "/op_profile" + (rank_ > 0 ? "_rank" + std::to_string(rank_) : "") + ".json";
}

Status StepProfiler::BeforeStep(int64_t step) {
  return settings_.Active(step) ? profiler_.Start() : Status::OK();
}

StatusOr<bool> StepProfiler::AfterStep(int64_t step, double step_time_s) {
  if (!settings_.Active(step)) return false;
  profiler_.Stop();
  ++steps_;
  step_time_s_ += step_time_s;
  if (!settings_.EndsCycle(step)) return false;
  TM_RETURN_IF_ERROR(MakeDirs(settings_.output_dir));
  const OpProfile profile = Profile();
  TM_RETURN_IF_ERROR(WriteFileAtomically(TextPath(), FormatOpProfile(profile)));
  TM_RETURN_IF_ERROR(WriteFileAtomically(JsonPath(), OpProfileJson(profile).dump(1) + "\n"));
  return true;
}

OpProfile StepProfiler::Profile() const {
  OpProfile p;
  p.steps = steps_;
  p.step_time_s = step_time_s_;
  p.device_type = device_type_;
  p.ops = profiler_.Ops();
  return p;
}

}  // namespace tmx::recipes
