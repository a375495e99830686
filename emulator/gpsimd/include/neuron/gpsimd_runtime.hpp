// The emulated GpSimd core's device runtime: per-core state (cpu id, the 16 KB TCM pool, the
// access counters, the printf buffer), the device error type and the C ABI structures that the
// emulator's runner uses to hand buffers to a compiled kernel.
//
// Every core of the emulated engine runs on its own host thread, so all per-core state is reached
// through one thread_local pointer that the runner sets before calling the kernel.
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef STACK_SIZE
#if STACK_SIZE > 409600
#error "STACK_SIZE is larger than the GpSimd maximum of 400 KB (409600 bytes)"
#endif
#endif

extern "C" {
// One operator argument or result as the runner describes it (layout documented in docs/gpsimd.md).
struct ncc_arg {
  int32_t kind;        // 0 tensor, 1 scalar holding a double, 2 scalar holding an int64, 3 double, 4 int64
  int32_t dtype;       // c10 ScalarType code for tensors
  int32_t ndim;
  int32_t reserved;
  int64_t sizes[8];
  void* data;          // nullptr for the data-less tensors of shape functions
  double f;
  int64_t i;
};

// Per-execution counters for the cost model, summed over cores.
struct ncc_counters {
  uint64_t element_accesses;   // element-wise accessor element references
  uint64_t stream_bytes;       // bytes moved by stream accessors between HBM and TCM
  uint64_t tcm_bytes;          // bytes moved by TCM accessors between HBM and TCM
  uint64_t arith_elements;     // elements produced by tensor-library arithmetic
  uint64_t factory_bytes;      // bytes written by factories (zeros, ones, full, eye)
  uint64_t tcm_peak_bytes;     // largest TCM pool use of any core
  uint64_t stack_bytes;        // largest measured stack use of any core
  uint64_t printf_lost_bytes;  // core 0 printf output lost to buffer overflow
};
}

namespace ncc_gpsimd {

constexpr size_t kTcmPoolBytes = 16 * 1024;      // user TCM pool per core
constexpr size_t kStreamBufferBytes = 4 * 1024;  // TCM taken by each stream accessor
constexpr size_t kPrintfBufferBytes = 128 * 1024; // largest device printf buffer per core
constexpr size_t kPrintfDefaultBytes = 64 * 1024; // its size unless NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES says
constexpr uint32_t kCoreCount = 8;

enum class ErrorKind { kBounds, kShapeReadsData, kDtype, kCoherence, kTcm, kMulticore, kUsage };

// A device error: thrown by the runtime, caught by the runner, reported to Python with its kind.
struct DeviceError : std::runtime_error {
  ErrorKind kind;
  DeviceError(ErrorKind k, const std::string& msg) : std::runtime_error(msg), kind(k) {}
};

inline const char* error_kind_name(ErrorKind k) {
  static const char* const names[] = {"bounds", "shape_reads_data", "dtype", "coherence",
                                      "tcm", "multicore", "usage"};
  return names[static_cast<int>(k)];
}

enum class CoherencePolicy { COHERENT, INCOHERENT_VERBOSE, INCOHERENT_QUIET };

// First-fit allocator over one core's TCM pool; blocks are 16-byte aligned. Each block is
// followed by a red zone outside the 16 KB budget, checked when the block is freed and when the
// kernel ends, so that a kernel writing past its TCM buffer through a raw pointer is an error
// naming the op rather than silent corruption.
class TcmPool {
 public:
  enum class Release { kOk, kUnknown, kOverrun };
  static constexpr size_t kRedZone = 16;
  static constexpr unsigned char kRedZoneByte = 0xFD;

  // Empties the pool; its memory reads as zeros again, as a new pool's (cores are reused).
  void reset() {
    nblocks_ = 0;
    used_ = 0;
    peak_ = 0;
    std::memset(memory_, 0, sizeof memory_);
  }
  void* allocate(size_t nbytes) {
    if (nbytes == 0) nbytes = 1;
    size_t need = (nbytes + 15) & ~size_t(15);
    if (nblocks_ == kMaxBlocks || used_ + need > kTcmPoolBytes) return nullptr;
    size_t span = need + kRedZone;
    size_t pos = 0;
    size_t at = 0;
    for (; at < nblocks_; ++at) {
      if (blocks_[at].offset - pos >= span) break;
      pos = blocks_[at].offset + blocks_[at].size + kRedZone;
    }
    if (at == nblocks_ && kPhysicalBytes - pos < span) return nullptr;
    for (size_t k = nblocks_; k > at; --k) blocks_[k] = blocks_[k - 1];
    blocks_[at] = Block{pos, need};
    ++nblocks_;
    std::memset(memory_ + pos + need, kRedZoneByte, kRedZone);
    used_ += need;
    if (used_ > peak_) peak_ = used_;
    return memory_ + pos;
  }
  Release release(void* p, size_t* size = nullptr) {
    for (size_t k = 0; k < nblocks_; ++k) {
      if (memory_ + blocks_[k].offset == p) {
        bool intact = red_zone_intact(k);
        if (size != nullptr) *size = blocks_[k].size;
        used_ -= blocks_[k].size;
        for (size_t j = k; j + 1 < nblocks_; ++j) blocks_[j] = blocks_[j + 1];
        --nblocks_;
        return intact ? Release::kOk : Release::kOverrun;
      }
    }
    return Release::kUnknown;
  }
  // The size of a live block whose red zone was overwritten, or 0.
  size_t overrun_block() const {
    for (size_t k = 0; k < nblocks_; ++k) {
      if (!red_zone_intact(k)) return blocks_[k].size;
    }
    return 0;
  }
  // True when [p, p + nbytes) lies inside one allocated block.
  bool contains(const void* p, size_t nbytes) const {
    const unsigned char* c = static_cast<const unsigned char*>(p);
    if (c < memory_ || c >= memory_ + kPhysicalBytes) return false;
    size_t off = static_cast<size_t>(c - memory_);
    for (size_t k = 0; k < nblocks_; ++k) {
      if (off >= blocks_[k].offset && off + nbytes <= blocks_[k].offset + blocks_[k].size) return true;
    }
    return false;
  }
  size_t peak() const { return peak_; }

 private:
  struct Block {
    size_t offset;
    size_t size;
  };
  static constexpr size_t kMaxBlocks = 64;
  static constexpr size_t kPhysicalBytes = kTcmPoolBytes + kMaxBlocks * kRedZone;
  bool red_zone_intact(size_t k) const {
    const unsigned char* z = memory_ + blocks_[k].offset + blocks_[k].size;
    for (size_t j = 0; j < kRedZone; ++j) {
      if (z[j] != kRedZoneByte) return false;
    }
    return true;
  }
  alignas(64) unsigned char memory_[kPhysicalBytes];
  Block blocks_[kMaxBlocks];
  size_t nblocks_ = 0;
  size_t used_ = 0;
  size_t peak_ = 0;
};

// Ring buffer holding the newest `capacity` bytes (at most kPrintfBufferBytes) of a core's printf
// output; a capacity of 0 disables printf, as NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES=0 does.
class PrintfBuffer {
 public:
  void reset() { total_ = 0; }
  void set_capacity(size_t capacity) { cap_ = capacity < kPrintfBufferBytes ? capacity : kPrintfBufferBytes; }
  void append(const char* s, size_t n) {
    if (cap_ == 0) return;
    for (size_t k = 0; k < n; ++k) data_[(total_ + k) % cap_] = s[k];
    total_ += n;
  }
  // Copies the retained output in order; returns the number of bytes lost to overflow.
  uint64_t drain(char* out, size_t cap, size_t* written) const {
    size_t kept = total_ < cap_ ? total_ : cap_;
    size_t start = total_ - kept;
    size_t n = kept < cap ? kept : cap;
    for (size_t k = 0; k < n; ++k) out[k] = data_[(start + k) % cap_];
    *written = n;
    return total_ - kept;
  }

 private:
  char data_[kPrintfBufferBytes];
  uint64_t total_ = 0;
  size_t cap_ = kPrintfDefaultBytes;
};

struct OutputSlot;  // defined by the tensor library

// Everything one emulated core owns while a kernel runs on it.
struct CoreState {
  uint32_t cpu_id = 0;
  uint32_t cpu_count = 1;
  bool shape_mode = false;   // running a shape function on the host: tensors are data-less
  bool multicore = false;
  const char* op_name = "";
  CoherencePolicy coherence = CoherencePolicy::COHERENT;
  TcmPool tcm;
  PrintfBuffer out;
  ncc_counters counters{};
  const ncc_arg* dst = nullptr;  // the operator's output buffer
  bool dst_taken = false;        // the output buffer already backs a tensor
  std::shared_ptr<void> dst_tensor;  // what get_dst_tensor() returned on this core (a TensorImpl)
};

inline thread_local CoreState* tls_core = nullptr;

// Element-wise accessors count their element references in a plain variable of each translation
// unit, not through a pointer into CoreState: no pointer can reach a variable whose address is
// never taken, so the compiler keeps the count in a register for a whole loop (one add per
// element, no store) and can hoist the accessors' size and stride loads out of it. One count
// per translation unit is enough because element-wise accessors are refused in multicore mode
// and runs do not overlap; every translation unit registers a function that takes its count
// (static initialiser), and the runtime collects them all after each run
// (take_element_accesses).
using ElementCountTaker = uint64_t (*)();
inline std::vector<ElementCountTaker>& element_count_takers() {
  static std::vector<ElementCountTaker> takers;
  return takers;
}
// The element references counted since the last call, summed over translation units.
inline uint64_t take_element_accesses() {
  uint64_t n = 0;
  for (ElementCountTaker take : element_count_takers()) n += take();
  return n;
}
namespace {
uint64_t tu_element_accesses = 0;
uint64_t take_tu_element_accesses() {
  uint64_t n = tu_element_accesses;
  tu_element_accesses = 0;
  return n;
}
struct ElementCountRegistration {
  ElementCountRegistration() { element_count_takers().push_back(&take_tu_element_accesses); }
} element_count_registration;
}  // namespace

inline CoreState& core() {
  if (tls_core == nullptr) {
    throw DeviceError(ErrorKind::kUsage, "the tensor library was used outside an emulated GpSimd core");
  }
  return *tls_core;
}

// Error paths are out of line and cold: kernels' hot loops stay small, and compile faster.
#define NCC_COLD __attribute__((noinline, cold))

[[noreturn]] NCC_COLD inline void fail(ErrorKind kind, const std::string& what) {
  std::string msg = "op '";
  msg += tls_core ? tls_core->op_name : "";
  msg += "': ";
  msg += what;
  throw DeviceError(kind, msg);
}

// fail() with a printf-style message, so that call sites pass numbers, not built strings.
[[noreturn]] NCC_COLD __attribute__((format(printf, 2, 3))) inline void failf(ErrorKind kind, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fail(kind, buf);
}

// printf on a core goes to its device buffer; in a shape function (which runs on the host) and
// outside any core it is the host's printf.
inline int device_vprintf(const char* fmt, va_list ap) {
  if (tls_core == nullptr || tls_core->shape_mode) {
    int n = vfprintf(stdout, fmt, ap);
    fflush(stdout);
    return n;
  }
  char stack_buf[512];
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(stack_buf, sizeof stack_buf, fmt, ap);
  if (n >= 0 && static_cast<size_t>(n) < sizeof stack_buf) {
    tls_core->out.append(stack_buf, static_cast<size_t>(n));
  } else if (n >= 0) {
    std::string big(static_cast<size_t>(n) + 1, '\0');
    vsnprintf(&big[0], big.size(), fmt, again);
    tls_core->out.append(big.data(), static_cast<size_t>(n));
  }
  va_end(again);
  return n;
}

inline int device_printf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = device_vprintf(fmt, ap);
  va_end(ap);
  return n;
}

}  // namespace ncc_gpsimd

// Kernels call printf (or std::printf); on the emulated engine it is the device's printf.
inline int ncc_device_printf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = ncc_gpsimd::device_vprintf(fmt, ap);
  va_end(ap);
  return n;
}
namespace std {
using ::ncc_device_printf;
}  // namespace std
#define printf ncc_device_printf

