// The CPU and CUDA kernels of the hottest `torch.ops.ck_rs` ops in C++, built by `ck_rs._cpp`
// against the user's torch on first use. torch's dispatcher reaches a Python kernel at ~2 µs a
// trip, and the Python kernel then exports each tensor through DLPack; here the dispatcher
// calls C++, which describes the tensors as DLPack `DLTensor`s and calls the Rust launch
// (`python/src/capi.rs`) directly; their autograd kernel calls Python only where a gradient is
// recorded. The ops are defined (schemas, fakes, autograd formulas) in `ck_rs/_torch_ops.py`; each kernel below does what its Python implementation in
// `ck_rs/__init__.py` does for the op's schema, and the tests run both on the same inputs.
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace {

// DLPack's DLTensor (v0.8 and later), as `ck_python::DlTensor` reads it.
struct DlTensor {
  void* data;
  int32_t device_type;  // 1 CPU, 2 CUDA
  int32_t device_id;
  int32_t ndim;
  uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat, 6 bool, 10 float8_e4m3fn
  uint8_t bits;
  uint16_t lanes;
  const int64_t* shape;
  const int64_t* strides;
  uint64_t byte_offset;
};

using OpIndexFn = int32_t (*)(const char*);
using RunFn = int32_t (*)(uint32_t, const DlTensor* const*, const float*, uint64_t, char*, size_t);

OpIndexFn op_index_fn = nullptr;
RunFn run_fn = nullptr;

// A registry operator's index, looked up on first use (by any thread: the same value).
struct Operator {
  const char* name;
  std::atomic<int32_t> index{-1};
  int32_t get() {
    int32_t i = index.load(std::memory_order_relaxed);
    if (i < 0) {
      i = op_index_fn(name);
      TORCH_CHECK(i >= 0, "error[internal]: ck_rs has no operator `", name, "`");
      index.store(i, std::memory_order_relaxed);
    }
    return i;
  }
};

Operator RMSNORM{"rmsnorm"}, GEMM{"gemm"}, SGEMM{"sgemm"}, GEMM_A_KM{"gemm_a_km"},
    LINEAR{"linear"}, ATTENTION{"attention"};

DlTensor describe(const at::Tensor& t) {
  DlTensor d{};
  d.data = t.data_ptr();
  d.device_type = t.is_cuda() ? 2 : (t.is_cpu() ? 1 : 0);
  d.device_id = t.is_cuda() ? t.get_device() : 0;
  d.ndim = static_cast<int32_t>(t.dim());
  d.lanes = 1;
  d.bits = static_cast<uint8_t>(t.element_size() * 8);
  switch (t.scalar_type()) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
      d.code = 2;
      break;
    case at::kBFloat16:
      d.code = 4;
      break;
    case at::kFloat8_e4m3fn:
      d.code = 10;
      break;
    case at::kByte:
    case at::kBool:
      d.code = t.scalar_type() == at::kBool ? 6 : 1;
      break;
    default:  // the other integers; the Rust side names what it takes
      d.code = c10::isIntegralType(t.scalar_type(), false) ? 0 : 255;
  }
  d.shape = t.sizes().data();
  d.strides = t.strides().data();
  return d;
}

const float DERIVED = std::numeric_limits<float>::quiet_NaN();  // a scalar the op derives

// Runs operator `op` on `tensors` (in the order of its description; nullptr for one left out)
// and `scalars` (DERIVED where the operator picks), on torch's current stream of their device.
void run(Operator& op, std::initializer_list<const at::Tensor*> tensors,
         std::initializer_list<float> scalars) {
  TORCH_CHECK(run_fn != nullptr, "error[internal]: ck_rs's C++ ops were loaded without ck_rs");
  constexpr size_t most = 8;
  TORCH_CHECK(tensors.size() <= most, "error[internal]: more tensors than a call describes");
  DlTensor described[most];
  const DlTensor* given[most];
  size_t n = 0;
  uint64_t stream = 0;
  for (const at::Tensor* t : tensors) {
    if (t == nullptr || !t->defined()) {
      given[n++] = nullptr;
      continue;
    }
    described[n] = describe(*t);
    given[n] = &described[n];
    if (t->is_cuda() && stream == 0) {
      auto guard = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
      stream = reinterpret_cast<uint64_t>(guard->getStream(t->device()).native_handle());
    }
    n++;
  }
  char message[1024];
  int32_t code = run_fn(static_cast<uint32_t>(op.get()), given, scalars.begin(), stream, message,
                        sizeof message);
  TORCH_CHECK_VALUE(code != 1, message);
  TORCH_CHECK_TYPE(code != 2, message);
  TORCH_CHECK(code == 0, message);
}

const at::Tensor* opt(const std::optional<at::Tensor>& t) { return t ? &*t : nullptr; }

at::Tensor rmsnorm(const at::Tensor& x, const at::Tensor& gamma, double eps) {
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  run(RMSNORM, {&x, &gamma, &y}, {static_cast<float>(eps)});
  return y;
}

// A matrix stored transposed: `t.t()` contiguous, `t` not.
bool transposed_view(const at::Tensor& t) {
  return t.dim() == 2 && !t.is_contiguous() && t.t().is_contiguous();
}

bool bf16_result(std::optional<at::ScalarType> out_dtype) {
  if (!out_dtype || *out_dtype == at::kFloat) return false;
  TORCH_CHECK_TYPE(*out_dtype == at::kBFloat16, "error[dtype-unsupported]: out_dtype ",
                   *out_dtype, ": the result is float32, or torch.bfloat16 for torch tensors");
  return true;
}

at::Tensor gemm(const at::Tensor& a_in, const at::Tensor& b_in,
                std::optional<at::ScalarType> out_dtype) {
  at::Tensor a = a_in, b = b_in;
  bool bf16_out = bf16_result(out_dtype);
  at::TensorOptions result = a.options().dtype(bf16_out ? at::kBFloat16 : at::kFloat);
  if (transposed_view(a)) {
    // Read as it lies ([K, M]) where M and N are whole vectors (`_km_takes`).
    if (a.size(0) % 8 == 0 && b.dim() == 2 && b.size(1) % 8 == 0) {
      at::Tensor a_km = a.t();
      if (a.is_cuda() && a_km.scalar_type() != at::kBFloat16) {
        a_km = a_km.to(at::kBFloat16);
        b = b.to(at::kBFloat16);
      }
      at::Tensor c = at::empty({a.size(0), b.size(1)}, result);
      run(GEMM_A_KM, {&a_km, &b, nullptr, &c}, {1.0f, 1.0f});
      return c;
    }
    a = a.contiguous();
  }
  if (bf16_out && a.is_cuda() && a.scalar_type() != at::kBFloat16) {
    a = a.to(at::kBFloat16);  // the GPU kernel reads bf16 in place
    b = b.to(at::kBFloat16);
  }
  bool matrices = a.dim() == 2 && b.dim() == 2;
  at::Tensor c = at::empty({matrices ? a.size(0) : 0, matrices ? b.size(1) : 0}, result);
  if (!bf16_out && a.scalar_type() == at::kFloat) {
    run(SGEMM, {&a, &b, &c}, {});  // f32 operands, not rounded
  } else {
    run(GEMM, {&a, &b, nullptr, nullptr, &c}, {1.0f, 1.0f, 0.0f});
  }
  return c;
}

// The registry's activation index (`ck_rs._ACTIVATIONS`, the `linear` operator's choices).
float activation_index(const std::string& activation) {
  static const char* const names[] = {"none", "relu", "gelu", "silu"};
  for (int i = 0; i < 4; i++) {
    if (activation == names[i]) return static_cast<float>(i);
  }
  TORCH_CHECK_VALUE(false, "error[bad-activation]: activation '", activation,
                    "'; use one of none, relu, gelu, silu");
  return 0;
}

// The op's result has x's type (`out_dtype=x.dtype`).
at::Tensor linear(const at::Tensor& x_in, const at::Tensor& weight_in,
                  const std::optional<at::Tensor>& bias_in,
                  const std::optional<at::Tensor>& residual_in, c10::string_view activation,
                  double beta) {
  float act = activation_index(std::string(activation));
  at::Tensor x = x_in, weight = weight_in;
  bool bf16_out = bf16_result(x.scalar_type());
  at::ScalarType result = bf16_out ? at::kBFloat16 : at::kFloat;
  if (x.is_cuda() && x.scalar_type() != at::kBFloat16) {
    x = x.to(at::kBFloat16);  // the GPU kernels read bf16 in place
    weight = weight.to(at::kBFloat16);
  }
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - (x.dim() > 0 ? 1 : 0));
  shape.push_back(weight.dim() == 2 ? weight.size(0) : 0);
  at::Tensor y = at::empty(shape, x.options().dtype(result));
  std::optional<at::Tensor> bias = bias_in, residual = residual_in;
  for (std::optional<at::Tensor>* t : {&bias, &residual}) {
    if (*t && (*t)->scalar_type() != result) **t = (*t)->to(result);  // the result's type
  }
  run(LINEAR, {&x, &weight, opt(residual), opt(bias), &y},
      {1.0f, static_cast<float>(beta), act});
  return y;
}

std::tuple<at::Tensor, at::Tensor> attention(const at::Tensor& q_in, const at::Tensor& k_in,
                                             const at::Tensor& v_in, bool causal,
                                             std::optional<double> scale,
                                             c10::string_view out_layout) {
  TORCH_CHECK_VALUE(!scale || (std::isfinite(*scale) && *scale > 0), "error[bad-scale]: the scale is ",
                    *scale, "; give a positive finite number");
  TORCH_CHECK_VALUE(out_layout == "bhsd" || out_layout == "bshd", "error[bad-layout]: out_layout '",
                    std::string(out_layout), "'; use bhsd or bshd");
  at::Tensor q = q_in, k = k_in, v = v_in;
  bool widen = q.is_cuda() && q.scalar_type() == at::kFloat;
  if (widen) {  // the GPU kernel reads bfloat16 in place: convert on the device
    q = q.to(at::kBFloat16);
    k = k.to(at::kBFloat16);
    v = v.to(at::kBFloat16);
  }
  bool seq_first = out_layout == "bshd";
  std::vector<int64_t> shape(q.sizes().begin(), q.sizes().end());
  if (seq_first && shape.size() == 4) std::swap(shape[1], shape[2]);
  at::Tensor o = at::empty(shape, q.options());
  std::vector<int64_t> rows = {0};
  if (q.dim() == 4) rows = {q.size(0), q.size(1), q.size(2)};
  at::Tensor lse = at::empty(rows, q.options().dtype(at::kFloat));
  run(ATTENTION, {&q, &k, &v, &o, &lse},
      {scale ? static_cast<float>(*scale) : DERIVED, causal ? 1.0f : 0.0f, seq_first ? 1.0f : 0.0f});
  if (widen) o = o.to(at::kFloat);
  return {o, lse};
}

// The ops' autograd kernel. Where no input needs a gradient it goes on below autograd to the
// kernels above — as torch's own ops do, without a trip into Python. Else the op's gradient is
// recorded by its Python formula (`_torch_ops.py`), registered on the op's twin
// `ck_rs::<name>_autograd`, which is called instead.
void autograd(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  size_t arguments = op.schema().arguments().size();
  bool needed = false;
  if (c10::GradMode::is_enabled()) {
    for (const c10::IValue& v : torch::jit::last(*stack, arguments)) {
      needed |= v.isTensor() && v.toTensor().requires_grad();
    }
  }
  if (needed) {
    static std::mutex lock;
    static std::unordered_map<std::string, c10::OperatorHandle> twins;
    std::string name = op.schema().name();
    std::optional<c10::OperatorHandle> twin;
    {
      std::lock_guard<std::mutex> guard(lock);
      auto found = twins.find(name);
      if (found == twins.end()) {
        auto handle = c10::Dispatcher::singleton().findSchemaOrThrow((name + "_autograd").c_str(), "");
        found = twins.emplace(name, handle).first;
      }
      twin = found->second;
    }
    twin->callBoxed(stack);
    return;
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  op.redispatchBoxed(keys & c10::after_ADInplaceOrView_keyset, stack);
}

}  // namespace

// The Rust launch's entry points (`_native.c_api()`), set once when `ck_rs` loads this library.
extern "C" void ck_rs_torch_ops_init(void* op_index, void* run) {
  op_index_fn = reinterpret_cast<OpIndexFn>(op_index);
  run_fn = reinterpret_cast<RunFn>(run);
}

// The ops these kernels serve (`ck_rs._cpp.OPS` reads this line).
// OPS: rmsnorm gemm linear attention
TORCH_LIBRARY_IMPL(ck_rs, CPU, m) {
  m.impl("rmsnorm", &rmsnorm);
  m.impl("gemm", &gemm);
  m.impl("linear", &linear);
  m.impl("attention", &attention);
}

TORCH_LIBRARY_IMPL(ck_rs, CUDA, m) {
  m.impl("rmsnorm", &rmsnorm);
  m.impl("gemm", &gemm);
  m.impl("linear", &linear);
  m.impl("attention", &attention);
}

TORCH_LIBRARY_IMPL(ck_rs, Autograd, m) {
  for (const char* name : {"rmsnorm", "gemm", "linear", "attention"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&autograd>());
  }
}
