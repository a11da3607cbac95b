// SPDX-License-Identifier: Apache-2.0
// flashsteps._flashsteps: the binding of every built step to Python, through DLPack.
//
// Tensors arrive as nanobind ndarrays (any object with __dlpack__, which nanobind reads
// without copying) and become the contract's TensorViews: data pointer, shape and element
// strides as they are, so a BSHD tensor seen as [B, H, N, D] (x.transpose(1, 2)) is used in
// place. The Python layer (flashsteps/__init__.py) allocates the outputs in the caller's
// framework and picks the stream; this file checks what the contract cannot express (where
// a tensor lives, its rank and element type, whether an output is writable, whether float32
// holds the scale given as a double), fills AttentionArgs and calls the step. The
// contract's own checks (validate(), and each step's Unsupported) run inside the step.
//
// Errors: flashsteps::Unsupported -> NotImplementedError, InvalidArgument -> ValueError,
// DeviceError -> RuntimeError, each with the library's message (which names the field).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

#include "flashsteps/attention.h"
#include "step_table.h"

namespace nb = nanobind;

namespace flashsteps::python {
namespace {

using InArray = nb::ndarray<nb::ro>;  // any dtype, shape and device; read-only is fine
using OutArray = nb::ndarray<>;       // written by the step

// DLPack device types that can show up, for messages (dlpack.h, DLDeviceType).
std::string device_text(int type, int id) {
  switch (type) {
    case 1: return "CPU";
    case 2: return "CUDA device " + std::to_string(id);
    case 3: return "CUDA pinned host memory";
    case 10: return "ROCm device " + std::to_string(id);
    case 11: return "ROCm pinned host memory";
    case 13: return "CUDA managed memory";
    default: return "DLPack device type " + std::to_string(type);
  }
}

std::string dtype_text(nb::dlpack::dtype dt) {
  std::string name;
  switch (static_cast<nb::dlpack::dtype_code>(dt.code)) {
    case nb::dlpack::dtype_code::Int: name = "int"; break;
    case nb::dlpack::dtype_code::UInt: name = "uint"; break;
    case nb::dlpack::dtype_code::Float: name = "float"; break;
    case nb::dlpack::dtype_code::Bfloat: name = "bfloat"; break;
    case nb::dlpack::dtype_code::Complex: name = "complex"; break;
    case nb::dlpack::dtype_code::Bool: return "bool";
    default: name = "code" + std::to_string(int(dt.code)) + "_";
  }
  name += std::to_string(int(dt.bits));
  if (dt.lanes != 1) name += "x" + std::to_string(int(dt.lanes));
  return name;
}

// The element type of @p array, or InvalidArgument naming @p field.
DType element_type(const char* field, nb::dlpack::dtype dt) {
  const auto code = static_cast<nb::dlpack::dtype_code>(dt.code);
  if (dt.lanes == 1 && code == nb::dlpack::dtype_code::Float && dt.bits == 32) return DType::f32;
  if (dt.lanes == 1 && code == nb::dlpack::dtype_code::Float && dt.bits == 16) return DType::f16;
  if (dt.lanes == 1 && code == nb::dlpack::dtype_code::Bfloat && dt.bits == 16) return DType::bf16;
  throw InvalidArgument(std::string(field) + ".dtype (" + dtype_text(dt) +
                        "): expected float16, bfloat16 or float32");
}

// Where the tensor lives: on a device of this build's runtime, else InvalidArgument.
void check_device(const char* field, int type, int id) {
  if (type == dlpack_device_type()) return;
  std::ostringstream s;
  s << field << ": tensor is on " << device_text(type, id) << ", but flashsteps runs on " << backend_name()
    << " devices: move it to one first";
  throw InvalidArgument(s.str());
}

// Rank, element type and device of one input, in that order (numpy arrays without a GPU
// reach the first two).
template <typename Array>
void check_tensor(const char* field, const Array& a) {
  if (a.ndim() != 4) {
    std::ostringstream s;
    s << field << ".ndim = " << a.ndim() << ": expected a [B, H, N, D] tensor (4 dimensions)";
    throw InvalidArgument(s.str());
  }
  element_type(field, a.dtype());
  check_device(field, a.device_type(), a.device_id());
}

// An output (o) must be writable: a read-only export (a NumPy array with writeable=False, a
// JAX array) would make nanobind refuse the whole call with its signature dump, naming no
// field. Checked after check_tensor(), so a read-only flag is the only thing left to refuse.
void check_writable(const char* field, nb::handle tensor) {
  OutArray writable;
  if (!nb::try_cast(tensor, writable, /*convert=*/false))
    throw InvalidArgument(std::string(field) + ": tensor is read-only, but the step writes its output there: "
                                               "pass a writable tensor");
}

template <typename Array>
TensorView view_of(const char* field, const Array& a, int device) {
  check_tensor(field, a);
  if (a.device_id() != device)
    throw InvalidArgument(std::string(field) + ": on " + device_text(a.device_type(), a.device_id()) + ", but q is on " +
                          device_text(a.device_type(), device));
  TensorView t;
  t.data = const_cast<void*>(static_cast<const void*>(a.data()));
  t.dtype = element_type(field, a.dtype());
  for (int d = 0; d < 4; ++d) {
    t.shape[d] = static_cast<std::int64_t>(a.shape(d));
    t.stride[d] = a.stride(d);
  }
  return t;
}

const StepEntry& find_step(int index) {
  std::string built;
  for (const StepEntry& s : built_steps()) {
    if (s.index == index) return s;
    built += (built.empty() ? "" : ", ") + std::to_string(s.index);
  }
  throw InvalidArgument("step = " + std::to_string(index) + " is not built into this module (built: " +
                        (built.empty() ? std::string("none") : built) + ")");
}

Mask mask_from(const std::string& name) {
  for (Mask m : {Mask::none, Mask::causal_bottom_right, Mask::causal_top_left})
    if (name == mask_name(m)) return m;
  throw InvalidArgument("mask = '" + name + "': expected none, causal_bottom_right or causal_top_left");
}

// The LSE output: float32 [B, Hq, Nq], contiguous, on q's device.
float* lse_of(const OutArray& lse, const AttentionArgs& a, int device) {
  check_device("lse", lse.device_type(), lse.device_id());
  if (lse.device_id() != device)
    throw InvalidArgument("lse: on " + device_text(lse.device_type(), lse.device_id()) + ", but q is on " +
                          device_text(lse.device_type(), device));
  const auto dt = lse.dtype();
  if (!(dt.lanes == 1 && dt.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float) && dt.bits == 32))
    throw InvalidArgument("lse.dtype (" + dtype_text(dt) + "): expected float32");
  const std::int64_t want[3] = {a.batch(), a.heads_q(), a.seqlen_q()};
  bool ok = lse.ndim() == 3;
  std::int64_t contiguous = 1;
  for (int d = 2; ok && d >= 0; --d) {
    ok = static_cast<std::int64_t>(lse.shape(d)) == want[d] && (want[d] <= 1 || lse.stride(d) == contiguous);
    contiguous *= want[d];
  }
  if (!ok) {
    std::ostringstream s;
    s << "lse: expected a contiguous float32 tensor of shape [" << want[0] << ", " << want[1] << ", " << want[2]
      << "] ([B, Hq, Nq])";
    throw InvalidArgument(s.str());
  }
  return static_cast<float*>(lse.data());
}

// Fills the AttentionArgs of one call (everything but the workspace).
AttentionArgs args_of(const InArray& q, const InArray& k, const InArray& v, const OutArray& o,
                      const std::optional<OutArray>& lse, const std::string& mask, std::optional<double> scale) {
  check_tensor("q", q);
  const int device = q.device_id();
  AttentionArgs a;
  a.q = view_of("q", q, device);
  a.k = view_of("k", k, device);
  a.v = view_of("v", v, device);
  a.o = view_of("o", o, device);
  a.mask = mask_from(mask);
  if (scale) a.softmax_scale = softmax_scale_from_double(*scale, "scale");
  if (lse) a.lse = lse_of(*lse, a, device);
  return a;
}

// The step call: 0 when it ran, or the workspace bytes it needs when @p workspace is
// missing or too small (the caller allocates them and calls again; steps 01, 09 and 10 need
// some: step 01's S/P matrix, step 09's tile counter, step 10's split partials).
std::size_t forward(int step, const InArray& q, const InArray& k, const InArray& v, const OutArray& o,
                    const std::optional<OutArray>& lse, const std::optional<OutArray>& workspace,
                    const std::string& mask, std::optional<double> scale, std::uintptr_t stream) {
  const StepEntry& s = find_step(step);
  AttentionArgs a = args_of(q, k, v, o, lse, mask, scale);
  validate(a);  // before workspace_bytes, so a bad call fails on its field, not on a size
  const std::size_t need = s.workspace_bytes(a);
  if (need > 0) {
    if (workspace) {
      check_device("workspace", workspace->device_type(), workspace->device_id());
      a.workspace = workspace->data();
      a.workspace_size = workspace->nbytes();
    }
    if (a.workspace_size < need) return need;
  }
  nb::gil_scoped_release release;  // the step may tune (step 06, FLASHSTEPS_TUNE=1)
  DeviceGuard guard(q.device_id());
  s.attention_forward(a, reinterpret_cast<void*>(stream));
  return 0;
}

}  // namespace
}  // namespace flashsteps::python

NB_MODULE(_flashsteps, m) {
  using namespace flashsteps::python;
  m.doc() = "FlashSteps' compiled steps; use the flashsteps package, which wraps this module.";

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const flashsteps::Unsupported& e) {  // first: it is an InvalidArgument too
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    } catch (const flashsteps::InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const flashsteps::DeviceError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  m.attr("backend") = backend_name();
  m.attr("dlpack_device_type") = dlpack_device_type();
  m.def("device_count", &device_count, "Number of visible devices of the backend's runtime (0 without one).");
  m.def(
      "steps",
      [] {
        nb::list out;
        for (const StepEntry& s : built_steps()) {
          nb::dict d;
          d["index"] = s.index;
          d["slug"] = s.slug;
          d["summary"] = s.summary;
          d["bench_max_seqlen"] = s.bench_max_seqlen;
          d["max_head_dim"] = s.max_head_dim;
          d["accepts_fp32"] = s.accepts_fp32;
          d["head_dim_multiple"] = s.head_dim_multiple;
          d["alignment_elems"] = s.alignment_elems;
          out.append(d);
        }
        return out;
      },
      "The StepInfo of every built step, as dicts, in registry order.");
  m.def(
      "check_tensor", [](const char* field, const InArray& a) { check_tensor(field, a); }, nb::arg("field"),
      nb::arg("array"),
      "Raises ValueError naming FIELD unless ARRAY is a 4-d float16/bfloat16/float32 tensor on a device of "
      "this backend.");
  m.def(
      "check_writable", [](const char* field, nb::handle tensor) { check_writable(field, tensor); },
      nb::arg("field"), nb::arg("tensor"),
      "Raises ValueError naming FIELD when TENSOR (which passed check_tensor) is exported read-only.");
  m.def(
      "check_scale", [](double scale) { flashsteps::softmax_scale_from_double(scale, "scale"); }, nb::arg("scale"),
      "Raises ValueError naming SCALE unless it is finite and positive and stays so in float32.");
  m.def("forward", &forward, nb::arg("step"), nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("o"),
        nb::arg("lse").none(), nb::arg("workspace").none(), nb::arg("mask"), nb::arg("scale").none(),
        nb::arg("stream"),
        "Runs STEP on the given tensors, enqueued on STREAM (a cudaStream_t/hipStream_t as an int, 0: the "
        "default stream). Returns 0, or the workspace bytes the step needs when WORKSPACE is None or too "
        "small (nothing ran).");
}
