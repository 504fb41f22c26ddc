// The hottest `torch.ops.ck_rs` ops in C++ — their CPU, CUDA and autograd kernels — built by
// `ck_rs._cpp` against the user's torch on first use. torch's dispatcher reaches a Python
// kernel at ~2 µs a trip, and the Python kernel then exports each tensor through DLPack; here
// the dispatcher calls C++, which describes the tensors as DLPack `DLTensor`s and calls the Rust
// launch (`python/src/capi.rs`) directly, and records a gradient with a C++ node.
//
// The ops are defined (schemas, fakes) in `ck_rs/_torch_ops.py`. Each kernel does what the op's
// Python implementation (`ck_rs/__init__.py`) does for its schema, and each formula what its
// Python formula does: those run where this library could not be built, and the tests compare
// both on the same inputs, bit for bit.
#include <ATen/Context.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace {

// An error message as one string, raised as one `const char*` (which torch's check macros pass
// on as it is): numbers through std::to_string and snprintf, never iostreams — a number
// formatted through an ostream in this library segfaulted on a machine whose C++ runtime is
// older than its compiler's headers (`ostream::_M_insert<long>`, an H100 machine).
std::string text(const char* s) { return s; }
std::string text(const std::string& s) { return s; }
std::string text(int64_t v) { return std::to_string(v); }
std::string text(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", v);
  return buffer;
}
std::string text(at::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); i++) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}
std::string text(at::ScalarType t) { return c10::toString(t); }
template <typename... Parts>
std::string message(const Parts&... parts) {
  std::string m;
  ((m += text(parts)), ...);
  return m;
}

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
using ChoiceIndexFn = int32_t (*)(uint32_t, const char*, const char*, char*, size_t);
using RunFn = int32_t (*)(uint32_t, size_t, const DlTensor* const*, size_t, const float*, uint64_t,
                          char*, size_t);
using DecodeScratchFn = int32_t (*)(const uint32_t*, uint64_t, uint32_t, int32_t, uint64_t*, char*,
                                 size_t);
using KvcacheFn = int32_t (*)(const DlTensor* const*, bool, float, uint32_t, bool, uint64_t, char*,
                              size_t);

OpIndexFn op_index_fn = nullptr;
ChoiceIndexFn choice_index_fn = nullptr;
RunFn run_fn = nullptr;
DecodeScratchFn decode_scratch_fn = nullptr;
KvcacheFn kvcache_fn = nullptr;

// A registry operator's index, looked up on first use (by any thread: the same value).
struct Operator {
  const char* name;
  std::atomic<int32_t> index{-1};
  int32_t get() {
    int32_t i = index.load(std::memory_order_relaxed);
    if (i < 0) {
      i = op_index_fn(name);
      TORCH_CHECK(i >= 0, message("error[internal]: ck_rs has no operator `", name, "`").c_str());
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

// A call's tensors as DLPack describes them (nullptr for one left out), and torch's current
// stream of the first CUDA tensor's device.
struct Described {
  static constexpr size_t most = 16;
  DlTensor tensors[most];
  const DlTensor* given[most];
  size_t n = 0;
  uint64_t stream = 0;  // 0 is also the legacy default stream: `found` tells them apart
  bool found = false;

  explicit Described(std::initializer_list<const at::Tensor*> all) {
    TORCH_CHECK(all.size() <= most, "error[internal]: more tensors than a call describes");
    for (const at::Tensor* t : all) {
      if (t == nullptr || !t->defined()) {
        given[n++] = nullptr;
        continue;
      }
      tensors[n] = describe(*t);
      given[n] = &tensors[n];
      if (t->is_cuda() && !found) {
        auto guard = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
        stream = reinterpret_cast<uint64_t>(guard->getStream(t->device()).native_handle());
        found = true;
      }
      n++;
    }
  }
};

// Raises a native call's error (its `code`: 1 ValueError, 2 TypeError, else RuntimeError).
void check(int32_t code, const char* why) {
  TORCH_CHECK_VALUE(code != 1, why);
  TORCH_CHECK_TYPE(code != 2, why);
  TORCH_CHECK(code == 0, why);
}

// Runs operator `op` on `tensors` (in the order of its description; nullptr for one left out)
// and `scalars` (DERIVED where the operator picks), on torch's current stream of their device.
void run(Operator& op, std::initializer_list<const at::Tensor*> tensors,
         std::initializer_list<float> scalars) {
  TORCH_CHECK(run_fn != nullptr, "error[internal]: ck_rs's C++ ops were loaded without ck_rs");
  TORCH_CHECK(tensors.size() <= 8, "error[internal]: more tensors than a call describes");
  Described d(tensors);
  char why[1024];
  check(run_fn(static_cast<uint32_t>(op.get()), d.n, d.given, scalars.size(), scalars.begin(),
               d.stream, why, sizeof why),
        why);
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
  TORCH_CHECK_TYPE(*out_dtype == at::kBFloat16,
                   message("error[dtype-unsupported]: out_dtype ", *out_dtype,
                           ": the result is float32, or torch.bfloat16 for torch tensors")
                       .c_str());
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

// The index of `choice` among the names the choice scalar `scalar` of operator `op` takes (its
// description in the registry: a GEMM's activation).
float choice_index(Operator& op, const char* scalar, c10::string_view choice) {
  char why[256];
  int32_t i = choice_index_fn(static_cast<uint32_t>(op.get()), scalar, std::string(choice).c_str(),
                              why, sizeof why);
  TORCH_CHECK_VALUE(i >= 0, message("error[bad-", scalar, "]: ", why).c_str());
  return static_cast<float>(i);
}

// The op's result has x's type (`out_dtype=x.dtype`).
at::Tensor linear(const at::Tensor& x_in, const at::Tensor& weight_in,
                  const std::optional<at::Tensor>& bias_in,
                  const std::optional<at::Tensor>& residual_in, c10::string_view activation,
                  double beta) {
  float act = choice_index(LINEAR, "activation", activation);
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
  // NaN is the launch's "derived"; the Rust side checks every other value.
  TORCH_CHECK_VALUE(!scale || !std::isnan(*scale),
                    "error[bad-scale]: the scale is nan; give a positive finite number");
  TORCH_CHECK_VALUE(out_layout == "bhsd" || out_layout == "bshd",
                    message("error[bad-layout]: out_layout '", std::string(out_layout),
                            "'; use bhsd or bshd")
                        .c_str());
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

// Decode attention against a KV cache, as `ck_rs.attention_with_kvcache` with `return_lse=True`:
// the scratch sized by the Rust side for the split count the launch plans (the heuristic needs
// the device's multiprocessors), the outputs and the scratch from torch's allocator (a CUDA graph captures
// the call), the caches written in place where new keys are given.
std::tuple<at::Tensor, at::Tensor> attention_with_kvcache(
    const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
    const at::Tensor& cache_seqlens, const std::optional<at::Tensor>& page_table,
    const std::optional<at::Tensor>& k, const std::optional<at::Tensor>& v,
    const std::optional<at::Tensor>& rotary_cos, const std::optional<at::Tensor>& rotary_sin,
    bool causal, int64_t num_splits, std::optional<double> scale, bool rotary_interleaved) {
  TORCH_CHECK(kvcache_fn != nullptr, "error[internal]: ck_rs's C++ ops were loaded without ck_rs");
  TORCH_CHECK_VALUE(!scale || (std::isfinite(*scale) && *scale > 0),
                    message("error[bad-scale]: the scale is ", *scale,
                            "; give a positive finite number")
                        .c_str());
  TORCH_CHECK_VALUE(num_splits >= 0 && num_splits <= UINT32_MAX,
                    message("error[argument-size]: num_splits is ", num_splits,
                            "; give 0 (the heuristic) or a count")
                        .c_str());
  TORCH_CHECK_VALUE(q.dim() == 4 && k_cache.dim() == 4,
                    message("error[shape-mismatch]: q is ", q.sizes(), " and k_cache ",
                            k_cache.sizes(),
                            "; give q [batch, seq_q, heads, head_dim] and k_cache [batch, capacity, "
                            "kv_heads, head_dim] (or [pages, page_size, kv_heads, head_dim] with a "
                            "page table)")
                        .c_str());
  int64_t batch = q.size(0), sq = q.size(1), heads = q.size(2), d = q.size(3);
  int64_t capacity = k_cache.size(1);
  if (page_table) capacity *= page_table->dim() == 2 ? page_table->size(-1) : 0;
  auto u32 = [](int64_t x) { return static_cast<uint32_t>(std::min<int64_t>(x, UINT32_MAX)); };
  uint32_t shape[5] = {u32(batch), u32(heads), u32(k_cache.size(2)), u32(sq), u32(d)};
  int32_t ordinal = q.is_cuda() ? q.get_device() : -1;
  uint64_t scratch[2];  // partial O's and partial LSE's lengths
  char why[1024];
  check(decode_scratch_fn(shape, static_cast<uint64_t>(capacity),
                          static_cast<uint32_t>(num_splits), ordinal, scratch, why,
                          sizeof why),
        why);
  at::TensorOptions f32 = q.options().dtype(at::kFloat);
  at::Tensor o = at::empty(q.sizes(), q.options());
  at::Tensor lse = at::empty({batch, heads, sq}, f32);
  at::Tensor o_part = at::empty({static_cast<int64_t>(scratch[0])}, f32);
  at::Tensor lse_part = at::empty({static_cast<int64_t>(scratch[1])}, f32);
  at::Tensor rotated = rotary_cos ? at::empty(q.sizes(), q.options()) : at::Tensor();
  Described t({&q, &k_cache, &v_cache, &cache_seqlens, &o, &lse, &o_part, &lse_part,
               opt(page_table), opt(k), opt(v), opt(rotary_cos), opt(rotary_sin), &rotated});
  check(kvcache_fn(t.given, causal, scale ? static_cast<float>(*scale) : DERIVED,
                   static_cast<uint32_t>(num_splits), rotary_interleaved, t.stream, why,
                   sizeof why),
        why);
  return {o, lse};
}

// The ops called through the dispatcher (below autograd inside a forward or backward, where
// grad mode is off: their autograd kernels go straight on to the kernels above).
template <typename Signature>
c10::TypedOperatorHandle<Signature> handle(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

using GemmSig = at::Tensor(const at::Tensor&, const at::Tensor&, std::optional<at::ScalarType>);

// `a @ b` in `dtype` on the gemm op: bfloat16 straight from the tensor-core kernel where N and K
// allow it, else through its float32 result (`_product` in _torch_ops.py).
at::Tensor product(const at::Tensor& a, const at::Tensor& b, at::ScalarType dtype) {
  static auto gemm_op = handle<GemmSig>("ck_rs::gemm");
  if (dtype == at::kBFloat16 && a.size(1) % 8 == 0 && b.size(1) % 8 == 0) {
    return gemm_op.call(a, b, at::kBFloat16);
  }
  return gemm_op.call(a, b, std::nullopt).to(dtype);
}

}  // namespace

// The autograd formulas of the ops with C++ kernels, as `_torch_ops.py` registers them for the
// Python kernels (each saves what its backward reads). Named as the Python ones' nodes are.
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct ck_rs_rmsnormBackward : torch::autograd::Function<ck_rs_rmsnormBackward> {
  static constexpr const char* name = "ck_rs::rmsnorm";
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& gamma,
                            double eps) {
    static auto op = handle<at::Tensor(const at::Tensor&, const at::Tensor&, double)>("ck_rs::rmsnorm");
    ctx->save_for_backward({x, gamma});
    ctx->saved_data["eps"] = eps;
    return op.call(x, gamma, eps);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    using Sig = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                   const at::Tensor&, double);
    static auto op = handle<Sig>("ck_rs::rmsnorm_backward");
    auto saved = ctx->get_saved_variables();
    auto [dx, dgamma] = op.call(grads[0].contiguous(), saved[0], saved[1],
                                ctx->saved_data["eps"].toDouble());
    return {dx, dgamma, at::Tensor()};
  }
};

struct ck_rs_gemmBackward : torch::autograd::Function<ck_rs_gemmBackward> {
  static constexpr const char* name = "ck_rs::gemm";
  static at::Tensor forward(AutogradContext*, const at::Tensor& a, const at::Tensor& b,
                            std::optional<at::ScalarType> out_dtype) {
    static auto op = handle<GemmSig>("ck_rs::gemm");
    return op.call(a, b, out_dtype);
  }
  static variable_list backward(AutogradContext*, variable_list) {
    TORCH_CHECK(false, "error[no-backward]: ck_rs::gemm has no backward pass yet; compute this "
                       "part with torch ops where a gradient must flow through it");
    return {};
  }
};

struct ck_rs_linearBackward : torch::autograd::Function<ck_rs_linearBackward> {
  static constexpr const char* name = "ck_rs::linear";
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias,
                            const std::optional<at::Tensor>& residual, c10::string_view activation,
                            double beta) {
    using Sig = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                           const std::optional<at::Tensor>&, c10::string_view, double);
    static auto op = handle<Sig>("ck_rs::linear");
    ctx->save_for_backward({x, weight});
    ctx->saved_data["activation"] = std::string(activation);
    ctx->saved_data["beta"] = beta;
    ctx->saved_data["bias"] = bias.has_value();
    ctx->saved_data["residual"] = residual.has_value();
    return op.call(x, weight, bias, residual, activation, beta);
  }
  // dx = dy · W, dW = dyᵀ · x (dyᵀ a view, which gemm reads as it lies), dbias = Σ_rows dy,
  // dresidual = beta · dy.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    std::string activation = ctx->saved_data["activation"].toStringRef();
    TORCH_CHECK(activation == "none",
                message("error[no-backward]: ck_rs::linear has no backward through activation='",
                        activation, "' yet; apply the activation in torch after a linear without one")
                    .c_str());
    auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &dy = grads[0];
    int64_t n = weight.size(0), k = weight.size(1);
    at::Tensor dy2 = dy.reshape({-1, n}).to(x.scalar_type()).contiguous();
    at::Tensor dx, dw, dbias, dres;
    if (ctx->needs_input_grad(0)) {
      dx = product(dy2, weight.to(x.scalar_type()), x.scalar_type()).reshape(x.sizes());
    }
    if (ctx->needs_input_grad(1)) {
      dw = product(dy2.t(), x.reshape({-1, k}), weight.scalar_type());
    }
    if (ctx->saved_data["bias"].toBool()) {
      dbias = dy2.sum(0, false, at::kFloat).to(dy.scalar_type());
    }
    if (ctx->saved_data["residual"].toBool()) {
      double beta = ctx->saved_data["beta"].toDouble();
      dres = beta == 1 ? dy : dy.mul(beta);
    }
    return {dx, dw, dbias, dres, at::Tensor(), at::Tensor()};
  }
};

struct ck_rs_attentionBackward : torch::autograd::Function<ck_rs_attentionBackward> {
  static constexpr const char* name = "ck_rs::attention";
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                               const at::Tensor& v, bool causal, std::optional<double> scale,
                               c10::string_view out_layout) {
    using Sig = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                   const at::Tensor&, bool, std::optional<double>,
                                                   c10::string_view);
    static auto op = handle<Sig>("ck_rs::attention");
    auto [o, lse] = op.call(q, k, v, causal, scale, out_layout);
    ctx->mark_non_differentiable({lse});
    ctx->save_for_backward({q, k, v, o, lse});
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale ? c10::IValue(*scale) : c10::IValue();
    ctx->saved_data["layout"] = std::string(out_layout);
    return {o, lse};
  }
  // FlashAttention's backward from the saved Q, K, V, O and log-sum-exp (deterministic under
  // torch.use_deterministic_algorithms); O and dO in the forward's layout.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    using Sig = std::tuple<at::Tensor, at::Tensor, at::Tensor>(
        const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
        const at::Tensor&, const at::Tensor&, bool, std::optional<double>, bool, c10::string_view);
    static auto op = handle<Sig>("ck_rs::attention_backward");
    auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &o = saved[3];
    const c10::IValue& scale = ctx->saved_data["scale"];
    auto [dq, dk, dv] = op.call(q, k, v, o, saved[4], grads[0].contiguous().to(o.scalar_type()),
                                ctx->saved_data["causal"].toBool(),
                                scale.isNone() ? std::nullopt : std::optional<double>(scale.toDouble()),
                                at::globalContext().deterministicAlgorithms(),
                                ctx->saved_data["layout"].toStringRef());
    return {dq.to(q.scalar_type()), dk.to(k.scalar_type()), dv.to(v.scalar_type()), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

// Decode attention has no backward: a call on tensors that require grad records a node whose
// backward says so, as the Python kernel's does.
struct ck_rs_attention_with_kvcacheBackward
    : torch::autograd::Function<ck_rs_attention_with_kvcacheBackward> {
  static constexpr const char* name = "ck_rs::attention_with_kvcache";
  static variable_list forward(AutogradContext*, const at::Tensor& q, const at::Tensor& k_cache,
                               const at::Tensor& v_cache, const at::Tensor& cache_seqlens,
                               const std::optional<at::Tensor>& page_table,
                               const std::optional<at::Tensor>& k,
                               const std::optional<at::Tensor>& v,
                               const std::optional<at::Tensor>& rotary_cos,
                               const std::optional<at::Tensor>& rotary_sin, bool causal,
                               int64_t num_splits, std::optional<double> scale,
                               bool rotary_interleaved) {
    static auto op = handle<decltype(attention_with_kvcache)>(name);
    auto [o, lse] = op.call(q, k_cache, v_cache, cache_seqlens, page_table, k, v, rotary_cos,
                            rotary_sin, causal, num_splits, scale, rotary_interleaved);
    return {o, lse};
  }
  static variable_list backward(AutogradContext*, variable_list) {
    TORCH_CHECK(false, "error[no-backward]: ck_rs::attention_with_kvcache has no backward pass "
                       "yet; compute this part with torch ops where a gradient must flow through it");
    return {};
  }
};

namespace {

// Whether a call records a node: grad mode on and an input that requires grad.
template <typename T>
bool requires_grad(const T&) {
  return false;
}
bool requires_grad(const at::Tensor& t) { return t.requires_grad(); }
bool requires_grad(const std::optional<at::Tensor>& t) { return t && t->requires_grad(); }
template <typename... T>
bool recorded(const T&... inputs) {
  return c10::GradMode::is_enabled() && (requires_grad(inputs) || ...);
}

// The autograd kernels: where a node is recorded, the formula's function applied; else on below
// autograd (to the kernels above, or a mode's or a fake tensor's kernel), as torch's own
// autograd kernels do, without building a node.
template <typename Fn, typename Sig>
struct Autograd;

// A function's outputs as the op returns them.
at::Tensor result(at::Tensor t) { return t; }
std::tuple<at::Tensor, at::Tensor> result(const variable_list& v) { return {v[0], v[1]}; }

template <typename Fn, typename R, typename... A>
struct Autograd<Fn, R(A...)> {
  static R kernel(c10::DispatchKeySet keys, A... args) {
    if (recorded(args...)) return result(Fn::apply(args...));
    static auto op = handle<R(A...)>(Fn::name);
    at::AutoDispatchBelowADInplaceOrView guard;
    return op.redispatch(keys & c10::after_ADInplaceOrView_keyset, args...);
  }
};

}  // namespace

// The Rust launch's entry points (`_native.c_api()`), set once when `ck_rs` loads this library.
extern "C" void ck_rs_torch_ops_init(void* op_index, void* choice_index, void* run,
                                     void* decode_scratch, void* kvcache) {
  op_index_fn = reinterpret_cast<OpIndexFn>(op_index);
  choice_index_fn = reinterpret_cast<ChoiceIndexFn>(choice_index);
  run_fn = reinterpret_cast<RunFn>(run);
  decode_scratch_fn = reinterpret_cast<DecodeScratchFn>(decode_scratch);
  kvcache_fn = reinterpret_cast<KvcacheFn>(kvcache);
}

// The ops these kernels serve (`ck_rs._cpp.OPS` reads this line).
// OPS: rmsnorm gemm linear attention attention_with_kvcache
TORCH_LIBRARY_IMPL(ck_rs, CPU, m) {
  m.impl("rmsnorm", &rmsnorm);
  m.impl("gemm", &gemm);
  m.impl("linear", &linear);
  m.impl("attention", &attention);
  m.impl("attention_with_kvcache", &attention_with_kvcache);
}

TORCH_LIBRARY_IMPL(ck_rs, CUDA, m) {
  m.impl("rmsnorm", &rmsnorm);
  m.impl("gemm", &gemm);
  m.impl("linear", &linear);
  m.impl("attention", &attention);
  m.impl("attention_with_kvcache", &attention_with_kvcache);
}

TORCH_LIBRARY_IMPL(ck_rs, Autograd, m) {
  m.impl("rmsnorm", &Autograd<ck_rs_rmsnormBackward, decltype(rmsnorm)>::kernel);
  m.impl("gemm", &Autograd<ck_rs_gemmBackward, decltype(gemm)>::kernel);
  m.impl("linear", &Autograd<ck_rs_linearBackward, decltype(linear)>::kernel);
  m.impl("attention", &Autograd<ck_rs_attentionBackward, decltype(attention)>::kernel);
  m.impl("attention_with_kvcache", &Autograd<ck_rs_attention_with_kvcacheBackward,
                                             decltype(attention_with_kvcache)>::kernel);
}
