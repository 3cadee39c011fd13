// The sim device's kernels. The ones that make and move tensors, views and copies (what every backend needs);
// a native set for what dominates a training step (mm, addmm, bmm; elementwise, norms, softmax), computed by CPU
// kernels on CPU views of the device's memory (a simulation: no copies of inputs); everything else through PyTorch's boxed CPU fallback, which copies
// the arguments to the host and the results back. Every op passes one gate first: a cpu tensor beside sim tensors
// fails naming the op (unless it is a 0-dim scalar, as on real devices), an op TM_SIM_REMOVE_OPS names fails
// naming itself, and TM_SIM_WRONG_OP's op has its floating outputs scaled by 1.1 (sim.h).
#include <cstdlib>
#include <set>

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/CPUFunctions.h>
#include <ATen/NativeFunctions.h>
#include <torch/library.h>

#include "plugins/sim/sim.h"

namespace tmx::sim {
namespace {

std::set<std::string> RemovedOps() {
  std::set<std::string> ops;
  if (const char* value = std::getenv("TM_SIM_REMOVE_OPS")) {
    std::string list = value;
    size_t start = 0;
    while (start <= list.size()) {
      size_t end = list.find(',', start);
      if (end == std::string::npos) end = list.size();
      std::string op = list.substr(start, end - start);
      if (!op.empty()) ops.insert(op.find("::") == std::string::npos ? "aten::" + op : op);
      start = end + 1;
    }
  }
  return ops;
}

std::string WrongOp() {
  const char* value = std::getenv("TM_SIM_WRONG_OP");
  std::string op = value == nullptr ? "" : value;
  return op.empty() || op.find("::") != std::string::npos ? op : "aten::" + op;
}

bool Named(const std::string& pattern, const c10::OperatorName& op) {
  return pattern == op.name || pattern == op.name + (op.overload_name.empty() ? "" : "." + op.overload_name);
}

std::string FullName(const c10::OperatorName& op) {
  return op.name + (op.overload_name.empty() ? "" : "." + op.overload_name);
}

// The gate every sim op passes (see the file's comment). `tensors`: the op's tensor arguments.
void Admit(const c10::OperatorName& op, const std::vector<at::Tensor>& tensors) {
  static const std::set<std::string> removed = RemovedOps();
  for (const std::string& pattern : removed) {
    TORCH_CHECK_NOT_IMPLEMENTED(!Named(pattern, op), "sim: ", FullName(op),
                                " is removed from the simulated device (TM_SIM_REMOVE_OPS): it has no kernel here");
  }
  bool on_sim = false;
  for (const at::Tensor& t : tensors) on_sim = on_sim || (t.defined() && t.device().is_privateuseone());
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(!on_sim || !t.defined() || !t.device().is_cpu() || t.dim() == 0, "sim: ", FullName(op),
                " got a cpu tensor of shape ", t.sizes(), " beside sim tensors: a tensor left on the wrong "
                "device; move it with .to(device) first");
  }
}

bool IsWrong(const c10::OperatorName& op) {
  static const std::string wrong = WrongOp();
  return !wrong.empty() && Named(wrong, op);
}

// A CPU tensor over the same memory as sim tensor `t` (no copy).
at::Tensor CpuView(const at::Tensor& t) {
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(at::kCPU));
}

void MakeWrong(const at::Tensor& t) {
  if (t.defined() && at::isFloatingType(t.scalar_type())) {
    at::Tensor view = t.device().is_privateuseone() ? CpuView(t) : t;
    view.mul_(1.1);
  }
}

c10::OperatorName OpName(const char* name, const char* overload = "") { return {name, overload}; }

// --- Making, viewing and moving tensors.

at::Tensor Empty(c10::IntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                 std::optional<at::Device> device, std::optional<bool> pin, std::optional<at::MemoryFormat> format) {
  const at::ScalarType type = c10::dtype_or_default(dtype);
  TORCH_CHECK(type != at::kBFloat16 || Bf16Enabled(), "sim: bfloat16 is switched off on this simulated device "
              "(TM_SIM_BF16=0); use dtype=fp32");
  TORCH_CHECK(c10::layout_or_default(layout) == at::Layout::Strided, "sim: only strided tensors");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin), "sim: pinned memory is host memory");
  return at::detail::empty_generic(size, Allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), type,
                                   format);
}

at::Tensor EmptyStrided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                        std::optional<at::Layout> layout, std::optional<at::Device> device, std::optional<bool> pin) {
  const at::ScalarType type = c10::dtype_or_default(dtype);
  TORCH_CHECK(type != at::kBFloat16 || Bf16Enabled(), "sim: bfloat16 is switched off on this simulated device "
              "(TM_SIM_BF16=0); use dtype=fp32");
  return at::detail::empty_strided_generic(size, stride, Allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), type);
}

at::Tensor AsStrided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                     std::optional<c10::SymInt> offset) {
  return at::native::as_strided_tensorimpl(
      self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride),
      offset.has_value() ? std::optional<int64_t>(offset->expect_int()) : std::nullopt);
}

at::Tensor View(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor ReshapeAlias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride));
}

const at::Tensor& Resize(const at::Tensor& self, c10::SymIntArrayRef size, std::optional<at::MemoryFormat> format) {
  return at::native::resize_(self, C10_AS_INTARRAYREF_SLOW(size), format);
}

// Copies within the device and in both directions between it and the host; the only way data crosses.
at::Tensor CopyFrom(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor to = dst.device().is_privateuseone() ? CpuView(dst) : dst;
  at::Tensor from = self.device().is_privateuseone() ? CpuView(self) : self;
  to.copy_(from, non_blocking);
  return dst;
}

at::Tensor CopyFromAndResize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_(dst, self.sizes(), std::nullopt);
  return CopyFrom(self, dst, false);
}

at::Scalar LocalScalarDense(const at::Tensor& self) { return CpuView(self).item(); }

at::Tensor& SetTensor(at::Tensor& self, const at::Tensor& source) { return at::native::set_tensor_(self, source); }
at::Tensor& SetStorage(at::Tensor& self, at::Storage source) { return at::native::set_(self, source); }
at::Tensor& SetStorageOffset(at::Tensor& self, at::Storage source, int64_t offset, c10::IntArrayRef size,
                             c10::IntArrayRef stride) {
  return at::cpu::set_(self, source, offset, size, stride);
}

// --- The native set: CPU kernels on CPU views of the device's memory.

at::Tensor Mm(const at::Tensor& a, const at::Tensor& b) {
  static const c10::OperatorName op = OpName("aten::mm");
  Admit(op, {a, b});
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
  at::Tensor result = CpuView(out);
  at::mm_out(result, CpuView(a), CpuView(b));
  if (IsWrong(op)) MakeWrong(out);
  return out;
}

at::Tensor Bmm(const at::Tensor& a, const at::Tensor& b) {
  static const c10::OperatorName op = OpName("aten::bmm");
  Admit(op, {a, b});
  at::Tensor out = at::empty({a.size(0), a.size(1), b.size(2)}, a.options());
  at::Tensor result = CpuView(out);
  at::bmm_out(result, CpuView(a), CpuView(b));
  if (IsWrong(op)) MakeWrong(out);
  return out;
}

at::Tensor Addmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b, const at::Scalar& beta,
                 const at::Scalar& alpha) {
  static const c10::OperatorName op = OpName("aten::addmm");
  Admit(op, {self, a, b});
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
  at::Tensor bias = self.device().is_privateuseone() ? CpuView(self) : self;
  at::Tensor result = CpuView(out);
  at::addmm_out(result, bias, CpuView(a), CpuView(b), beta, alpha);
  if (IsWrong(op)) MakeWrong(out);
  return out;
}

// The native set beyond matmuls (elementwise, norms, softmax: NativeOps below), one boxed kernel: the op's CPU
// kernel runs on CPU views of the sim tensors (inputs are not copied); a result that is one of those views (an
// in-place op's self) is given back as its sim tensor, a new result is copied onto the device once.
std::vector<at::Tensor> TensorArguments(const torch::jit::Stack& stack, size_t count) {
  std::vector<at::Tensor> tensors;
  for (auto it = stack.end() - static_cast<std::ptrdiff_t>(count); it != stack.end(); ++it) {
    if (it->isTensor()) tensors.push_back(it->toTensor());
    if (it->isTensorList()) {
      for (const at::Tensor& t : it->toTensorList()) tensors.push_back(t);
    }
  }
  return tensors;
}

at::Tensor BackOnDevice(const at::Tensor& result, const std::vector<std::pair<at::Tensor, at::Tensor>>& viewed) {
  for (const auto& [device, view] : viewed) {
    if (result.is_same(view) || (result.data_ptr() == view.data_ptr() && result.sizes().equals(view.sizes()) &&
                                 result.strides().equals(view.strides()))) {
      return device;
    }
  }
  at::Tensor copy = at::empty_strided(result.sizes(), result.strides(),
                                      result.options().device(c10::Device(c10::DeviceType::PrivateUse1, 0)));
  CpuView(copy).copy_(result);
  return copy;
}

void OnViews(const c10::OperatorHandle& handle, torch::jit::Stack* stack) {
  const c10::OperatorName& op = handle.schema().operator_name();
  const size_t count = handle.schema().arguments().size();
  Admit(op, TensorArguments(*stack, count));
  std::vector<std::pair<at::Tensor, at::Tensor>> viewed;  // sim tensor, its CPU view
  for (auto it = stack->end() - static_cast<std::ptrdiff_t>(count); it != stack->end(); ++it) {
    if (it->isTensor() && it->toTensor().device().is_privateuseone()) {
      viewed.emplace_back(it->toTensor(), CpuView(it->toTensor()));
      *it = viewed.back().second;
    }
  }
  handle.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  const size_t returns = handle.schema().returns().size();
  for (auto it = stack->end() - static_cast<std::ptrdiff_t>(returns); it != stack->end(); ++it) {
    if (!it->isTensor() || !it->toTensor().defined() || !it->toTensor().device().is_cpu()) continue;
    *it = BackOnDevice(it->toTensor(), viewed);
    if (IsWrong(op)) MakeWrong(it->toTensor());
  }
}

// The ops that dominate a step besides matmuls, run by OnViews.
constexpr const char* kNativeOps[] = {
    "add.Tensor", "add_.Tensor", "sub.Tensor", "mul.Tensor", "mul_.Tensor", "div.Tensor", "neg", "exp", "rsqrt",
    "pow.Tensor_Scalar", "silu", "silu_backward", "sigmoid", "mean.dim", "sum.dim_IntList", "native_layer_norm",
    "native_layer_norm_backward", "_softmax", "_softmax_backward_data", "_log_softmax",
    "_log_softmax_backward_data"};

// --- Everything else: the gate, then PyTorch's CPU fallback.

void Fallback(const c10::OperatorHandle& handle, torch::jit::Stack* stack) {
  const c10::OperatorName& op = handle.schema().operator_name();
  Admit(op, TensorArguments(*stack, handle.schema().arguments().size()));
  at::native::cpu_fallback(handle, stack);
  if (!IsWrong(op)) return;
  const size_t returns = handle.schema().returns().size();
  for (auto it = stack->end() - static_cast<std::ptrdiff_t>(returns); it != stack->end(); ++it) {
    if (it->isTensor()) MakeWrong(it->toTensor());
  }
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", Empty);
  m.impl("empty_strided", EmptyStrided);
  m.impl("as_strided", AsStrided);
  m.impl("view", View);
  m.impl("_reshape_alias", ReshapeAlias);
  m.impl("resize_", Resize);
  m.impl("_copy_from", CopyFrom);
  m.impl("_copy_from_and_resize", CopyFromAndResize);
  m.impl("_local_scalar_dense", LocalScalarDense);
  m.impl("set_.source_Tensor", SetTensor);
  m.impl("set_.source_Storage", SetStorage);
  m.impl("set_.source_Storage_storage_offset", SetStorageOffset);
  m.impl("mm", Mm);
  m.impl("bmm", Bmm);
  m.impl("addmm", Addmm);
  for (const char* name : kNativeOps) m.impl(name, torch::CppFunction::makeFromBoxedFunction<&OnViews>());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&Fallback>()); }

}  // namespace tmx::sim
