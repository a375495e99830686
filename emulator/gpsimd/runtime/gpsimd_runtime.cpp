// The C API of a built GpSimd custom-op library, linked into every lib<name>.so. It needs none
// of the library's switches (NEURON_LIBRARY records multicore and STACK_SIZE in the registry), so
// its object is built once per compiler and flags and shared by all libraries.
//
// The emulator's worker process calls it through ctypes (the host never loads a library): it
// reads the registration table, runs shape functions with data-less tensors, and runs a compute
// function on 1 or 8 emulated cores, each with its own painted stack, TCM pool, counters and
// printf buffer. Cores are kept across runs: core 0 runs on the calling thread and every other
// core on a host thread of its own that waits between runs, each switching to its core's stack.
#include <cxxabi.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <mutex>
#include <string>
#include <vector>

#include "torchneuron/register.h"

namespace {

using torchneuron::detail::OpEntry;
using torchneuron::detail::registry;

constexpr size_t kDefaultStackLimit = 8 * 1024;     // undeclared stacks live in local memory
constexpr size_t kHostAllowance = 16 * 1024;        // host libc frames (printf formatting, memcpy)
constexpr size_t kStackSlack = 256 * 1024;          // room past the limit so overflow is measured
constexpr unsigned char kStackPaint = 0xA5;

size_t declared_stack() { return registry().stack_size; }

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

void ensure_initialized() {
  auto& r = registry();
  if (r.initialized) return;
  r.initialized = true;
  if (r.body != nullptr) {
    torchneuron::Library lib;
    r.body(lib);
  }
}

void copy_error(char* err, size_t errlen, const std::string& msg) {
  if (err == nullptr || errlen == 0) return;
  size_t n = msg.size() < errlen - 1 ? msg.size() : errlen - 1;
  std::memcpy(err, msg.data(), n);
  err[n] = '\0';
}

int error_code(const ncc_gpsimd::DeviceError& e) { return 1 + static_cast<int>(e.kind); }
constexpr int kOtherError = 100;

std::string describe(torch::ScalarType t, const int64_t* sizes, int ndim) {
  std::string s = torch::dtype_name(t);
  s += "[";
  for (int k = 0; k < ndim; ++k) s += (k ? ", " : "") + std::to_string(sizes[k]);
  return s + "]";
}

// One emulated core's execution of the compute function.
struct CoreRun {
  const OpEntry* op = nullptr;
  torchneuron::detail::AnyFn fn = nullptr;
  const ncc_arg* args = nullptr;
  const ncc_arg* dst = nullptr;
  ncc_gpsimd::CoreState* state = nullptr;
  unsigned char* stack_lo = nullptr;
  size_t stack_size = 0;
  size_t stack_used = 0;
  int code = 0;
  std::string error;
};

void finish_single_core(CoreRun& run, const torch::Tensor& result) {
  const ncc_arg* d = run.dst;
  torch::TensorImpl& im = result.impl();
  if (im.dtype != static_cast<torch::ScalarType>(d->dtype) || im.ndim != d->ndim ||
      !std::equal(d->sizes, d->sizes + d->ndim, im.sizes)) {
    ncc_gpsimd::fail(ncc_gpsimd::ErrorKind::kUsage,
                     "the compute function returned " + describe(im.dtype, im.sizes, im.ndim) +
                         " but the shape function declared " +
                         describe(static_cast<torch::ScalarType>(d->dtype), d->sizes, d->ndim));
  }
  void* src = result.device_data("result");
  if (src != d->data) std::memcpy(d->data, src, result.nbytes());
}

void core_main(CoreRun& run) {
  ncc_gpsimd::tls_core = run.state;
  ncc_gpsimd::tls_stack_lo = run.stack_lo;
  ncc_gpsimd::tls_stack_hi = run.stack_lo + run.stack_size;
  try {
    torch::Tensor result = run.op->compute_invoke(run.fn, run.args);
    if (size_t overrun = run.state->tcm.overrun_block()) {
      ncc_gpsimd::failf(ncc_gpsimd::ErrorKind::kTcm,
                        "TCM buffer overrun: a write past the end of a tcm_malloc'd block of %zu bytes", overrun);
    }
    if (!run.state->multicore) finish_single_core(run, result);
    run.state->dst_tensor.reset();
  } catch (const ncc_gpsimd::DeviceError& e) {
    run.code = error_code(e);
    run.error = e.what();
  } catch (const std::exception& e) {
    run.code = kOtherError;
    run.error = std::string("op '") + run.op->name + "': C++ exception: " + e.what();
  } catch (...) {
    run.code = kOtherError;
    run.error = std::string("op '") + run.op->name + "': unknown C++ exception";
  }
  ncc_gpsimd::tls_core = nullptr;
  ncc_gpsimd::tls_stack_lo = ncc_gpsimd::tls_stack_hi = nullptr;
}

struct PaintedStack;
bool register_stack(PaintedStack* stack);
void watch_slack_writes();

// A painted stack with a guard page below it; used() measures the high-water mark of a run.
// Stacks are kept between runs, and only the part a run used is painted again.
//
// The bottom `slack` bytes (room past the limit, so that an overflow is measured rather than a
// crash) are write-protected between runs: almost no run writes there, and reading them back
// at every run cost most of a small call (a 280 KB stack: about 8 us, where a 32x120 ReLU takes
// 3). A write into them faults; the SIGSEGV handler (on_slack_write) unprotects that page and
// records it, and used() reads the slack from the lowest page written, if any.
struct PaintedStack {
  unsigned char* base = nullptr;  // guard page
  size_t total = 0;
  size_t page = 4096;
  size_t slack = 0;  // write-protected bytes at the bottom (whole pages)
  size_t dirty = 0;  // bytes at the top that the last run wrote
  std::atomic<unsigned char*> lowest_written{nullptr};  // the lowest slack page a run wrote
  PaintedStack(size_t size, size_t slack_bytes) {
    total = size + page;
    void* m = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (m == MAP_FAILED) throw std::runtime_error("cannot map a core stack");
    base = static_cast<unsigned char*>(m);
    mprotect(base, page, PROT_NONE);
    std::memset(base + page, kStackPaint, size);
    slack = slack_bytes < size ? slack_bytes / page * page : 0;
    if (slack != 0) {
      watch_slack_writes();
      if (!register_stack(this) || mprotect(lo(), slack, PROT_READ) != 0) slack = 0;
    }
  }
  ~PaintedStack() { munmap(base, total); }
  PaintedStack(const PaintedStack&) = delete;
  PaintedStack& operator=(const PaintedStack&) = delete;
  unsigned char* lo() const { return base + page; }
  size_t size() const { return total - page; }
  void repaint() {
    std::memset(lo() + size() - dirty, kStackPaint, dirty);
    dirty = 0;
    if (lowest_written.load() != nullptr) {
      // Every slack byte is paint again (the written ones were in `dirty`): protect it again.
      mprotect(lo(), slack, PROT_READ);
      lowest_written.store(nullptr);
    }
  }
  // Whether `address` lies in this stack's write-protected slack.
  bool in_slack(const unsigned char* address) const { return address >= lo() && address < lo() + slack; }
  // The bytes from the lowest one that is not paint to the top. The unused part is most of the
  // stack, so it is compared 128 bytes at a time (vector XORs ORed together: this file is built
  // with -O1, which does not vectorise loops); only the block holding the boundary is looked at
  // byte by byte.
  size_t used() {
    typedef uint64_t Vec __attribute__((vector_size(16), may_alias));
    constexpr uint64_t kWord = 0x0101010101010101ull * kStackPaint;
    constexpr size_t kBlock = 8 * sizeof(Vec);
    const Vec paint = {kWord, kWord};
    const unsigned char* p = lo();
    const size_t n = size();  // a multiple of the page size, so of kBlock
    // Below the lowest slack page written (all of the slack if none) is paint: protected.
    const unsigned char* written = lowest_written.load();
    size_t k = written != nullptr ? static_cast<size_t>(written - p) : slack;
    for (; k < n; k += kBlock) {
      const Vec* q = reinterpret_cast<const Vec*>(p + k);
      Vec d = ((q[0] ^ paint) | (q[1] ^ paint)) | ((q[2] ^ paint) | (q[3] ^ paint)) |
              ((q[4] ^ paint) | (q[5] ^ paint)) | ((q[6] ^ paint) | (q[7] ^ paint));
      if ((d[0] | d[1]) != 0) break;
    }
    while (k < n && p[k] == kStackPaint) ++k;
    dirty = n - k;
    return dirty;
  }
};

// The stacks whose slack is write-protected (cores are never freed, so neither are these).
constexpr int kMaxStacks = 64;
std::atomic<PaintedStack*> g_stacks[kMaxStacks];
std::atomic<int> g_stack_count{0};
struct sigaction g_previous_segv;

bool register_stack(PaintedStack* stack) {
  int n = g_stack_count.load();
  if (n >= kMaxStacks) return false;
  g_stacks[n].store(stack);
  g_stack_count.store(n + 1);
  return true;
}

// SIGSEGV: a write into a protected slack page unprotects that page, records it and returns
// (the write is made again, now allowed); any other fault goes to the disposition there was
// before (by default the worker dies of SIGSEGV, as it did without this handler).
void on_slack_write(int sig, siginfo_t* info, void* context) {
  auto* address = static_cast<unsigned char*>(info->si_addr);
  if (info->si_code == SEGV_ACCERR) {
    const int n = g_stack_count.load();
    for (int i = 0; i < n; ++i) {
      PaintedStack* stack = g_stacks[i].load();
      if (stack == nullptr || !stack->in_slack(address)) continue;
      unsigned char* page = stack->lo() + static_cast<size_t>(address - stack->lo()) / stack->page * stack->page;
      if (mprotect(page, stack->page, PROT_READ | PROT_WRITE) != 0) break;
      unsigned char* lowest = stack->lowest_written.load();
      while ((lowest == nullptr || page < lowest) && !stack->lowest_written.compare_exchange_weak(lowest, page)) {
      }
      return;
    }
  }
  if ((g_previous_segv.sa_flags & SA_SIGINFO) != 0 && g_previous_segv.sa_sigaction != nullptr) {
    g_previous_segv.sa_sigaction(sig, info, context);
  } else if (g_previous_segv.sa_handler != SIG_DFL && g_previous_segv.sa_handler != SIG_IGN) {
    g_previous_segv.sa_handler(sig);
  } else {
    sigaction(SIGSEGV, &g_previous_segv, nullptr);  // the fault happens again and takes its course
  }
}

void watch_slack_writes() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = on_slack_write;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previous_segv);
  });
}

// The handler runs on an alternate stack: a write into the slack faults with the stack pointer
// just above it, where the handler's own frame would land in the protected slack again.
void ensure_signal_stack() {
  thread_local bool ready = false;
  if (ready) return;
  stack_t current{};
  if (sigaltstack(nullptr, &current) == 0 && (current.ss_flags & SS_DISABLE) == 0) {
    ready = true;  // one is set (Python's faulthandler, say): the handler uses it
    return;
  }
  constexpr size_t kSize = 64 * 1024;
  void* m = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return;
  stack_t alternate{};
  alternate.ss_sp = m;
  alternate.ss_size = kSize;
  if (sigaltstack(&alternate, nullptr) != 0) {
    munmap(m, kSize);
    return;
  }
  ready = true;  // kept for the thread's life (core threads live as long as the process)
}

// Runs `run` on the calling thread but on `stack`, in a context of its own (so that nothing but
// the kernel's frames is ever on the painted stack, and no thread is started), then measures the
// stack's high-water mark and paints what the run used again, ready for the next run.
thread_local CoreRun* tls_fiber_run = nullptr;

#if defined(__x86_64__)
// Switching to a core's stack and back without ucontext: glibc's getcontext and swapcontext save
// and restore the signal mask with a system call each (three per run), 1.1-1.4 us of a 6 us run
// of the main job's ReLU. ncc_fiber_switch saves what the x86-64 System V ABI has a function
// preserve (rbx, rbp, r12-r15, MXCSR and the x87 control word) on the current stack, stores the
// stack pointer in *save and continues on the stack `to` (as swapcontext, with no signal mask:
// a kernel that changes it keeps the change, as a thread's own code would).
extern "C" void ncc_fiber_switch(void** save, void* to);
extern "C" void ncc_fiber_start();
asm(R"(
  .text
  .p2align 4
  .hidden ncc_fiber_switch
  .type ncc_fiber_switch, @function
ncc_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size ncc_fiber_switch, .-ncc_fiber_switch

  .p2align 4
  .hidden ncc_fiber_start
  .type ncc_fiber_start, @function
ncc_fiber_start:
  .cfi_startproc
  .cfi_undefined rip
  call ncc_fiber_body
  ud2
  .cfi_endproc
  .size ncc_fiber_start, .-ncc_fiber_start
)");

thread_local void* tls_caller_sp = nullptr;  // run_on_stack's stack while the core's runs
thread_local void* tls_fiber_sp = nullptr;   // the core's stack once it is done (never resumed)

// The core's stack's first frame: runs the kernel, then goes back to run_on_stack for good.
extern "C" __attribute__((visibility("hidden"), used, noreturn)) void ncc_fiber_body() {
  core_main(*tls_fiber_run);
  ncc_fiber_switch(&tls_fiber_sp, tls_caller_sp);
  __builtin_trap();
}

// The frame ncc_fiber_switch pops to start ncc_fiber_start on a fresh core stack ending at `top`
// (16-byte aligned): the saved MXCSR and x87 control word (the caller's own), six zero
// registers, and ncc_fiber_start as the return address, so that it starts with the stack
// aligned as at a function's call.
void* fiber_frame(unsigned char* top) {
  auto* slot = reinterpret_cast<uint64_t*>(top);
  *--slot = reinterpret_cast<uint64_t>(&ncc_fiber_start);
  for (int k = 0; k < 6; ++k) *--slot = 0;
  uint32_t mxcsr = 0;
  uint16_t control = 0;
  __asm__ __volatile__("stmxcsr %0" : "=m"(mxcsr));
  __asm__ __volatile__("fnstcw %0" : "=m"(control));
  *--slot = static_cast<uint64_t>(mxcsr) | (static_cast<uint64_t>(control) << 32);
  return slot;
}

bool switch_to_core(PaintedStack& stack) {
  ncc_fiber_switch(&tls_caller_sp, fiber_frame(stack.lo() + stack.size()));
  return true;
}
#else
void fiber_main() { core_main(*tls_fiber_run); }

bool switch_to_core(PaintedStack& stack) {
  ucontext_t caller, fiber;
  if (getcontext(&fiber) != 0) return false;
  fiber.uc_stack.ss_sp = stack.lo();
  fiber.uc_stack.ss_size = stack.size();
  fiber.uc_link = &caller;
  makecontext(&fiber, fiber_main, 0);
  swapcontext(&caller, &fiber);
  return true;
}
#endif

void run_on_stack(CoreRun& run, PaintedStack& stack) {
  tls_fiber_run = &run;
  ensure_signal_stack();
  if (!switch_to_core(stack)) {
    run.code = kOtherError;
    run.error = "cannot set up an emulated core's context";
  }
  tls_fiber_run = nullptr;
  run.stack_used = stack.used();
  stack.repaint();
}

// One emulated core, kept for the life of the process: its stack and its state, and (for every
// core but core 0, which runs on the caller's thread) a host thread that waits for runs, so
// that the cores of a multicore run execute in parallel without a thread being started per run.
struct Core {
  explicit Core(size_t stack_size) : stack(stack_size, kStackSlack) {}
  PaintedStack stack;
  ncc_gpsimd::CoreState state;
  bool has_thread = false;
  pthread_t thread{};
  sem_t go{}, done{};
  CoreRun* job = nullptr;
};

void* core_thread(void* p) {
  Core& core = *static_cast<Core*>(p);
  for (;;) {
    while (sem_wait(&core.go) != 0) {
    }
    run_on_stack(*core.job, core.stack);
    sem_post(&core.done);
  }
  return nullptr;
}

bool start_thread(Core& core) {
  if (core.has_thread) return true;
  if (sem_init(&core.go, 0, 0) != 0) return false;
  if (sem_init(&core.done, 0, 0) != 0) {
    sem_destroy(&core.go);
    return false;
  }
  if (pthread_create(&core.thread, nullptr, core_thread, &core) != 0) {
    sem_destroy(&core.go);
    sem_destroy(&core.done);
    return false;
  }
  core.has_thread = true;
  return true;
}

// Emulated core `c`, whose stack holds `stack_size` bytes. Cores are never freed: their threads
// wait on them until the process ends.
Core& core_at(size_t c, size_t stack_size) {
  static std::vector<Core*> cores;
  if (cores.size() <= c) cores.resize(c + 1, nullptr);
  if (cores[c] == nullptr) cores[c] = new Core(stack_size);
  return *cores[c];
}

// Makes `state` a fresh core state, as a new one would be (the printf buffer's old bytes are
// left: only output written since is ever read).
// The printf buffer's size: NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES (the host checked it is 0
// or a power of two up to 128 KB before starting this worker), else the default.
size_t printf_capacity() {
  static const size_t capacity = [] {
    const char* text = std::getenv("NEURON_RT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES");
    return text && *text ? static_cast<size_t>(std::strtoull(text, nullptr, 10)) : ncc_gpsimd::kPrintfDefaultBytes;
  }();
  return capacity;
}

void renew(ncc_gpsimd::CoreState& state) {
  state.~CoreState();
  new (&state) ncc_gpsimd::CoreState;
  state.tcm.reset();
  state.out.set_capacity(printf_capacity());
}

}  // namespace

extern "C" {

int ncc_gpsimd_abi_version() { return 1; }

// The registration table and build switches as JSON (read once by the emulator).
const char* ncc_gpsimd_library_info() {
  static std::string info;
  ensure_initialized();
  auto& r = registry();
  std::string s = "{\"library\": " + json_string(r.library ? r.library : "") +
                  ", \"multicore\": " + (r.multicore ? "true" : "false") +
                  ", \"stack_size\": " + std::to_string(declared_stack()) +
                  ", \"error\": " + json_string(r.error) + ", \"ops\": [";
  for (size_t k = 0; k < r.ops.size(); ++k) {
    const OpEntry& e = r.ops[k];
    s += (k ? ", " : "");
    s += "{\"name\": " + json_string(e.name) + ", \"compute\": " + json_string(e.compute) + ", \"args\": [";
    for (int a = 0; a < e.nargs; ++a) s += (a ? ", " : "") + json_string(e.kinds[a]);
    s += "]}";
  }
  info = s + "]}";
  return info.c_str();
}

// Demangles a C++ symbol (used to check a compute function's parameter types).
int ncc_gpsimd_demangle(const char* mangled, char* out, size_t cap) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) return -1;
  copy_error(out, cap, d);
  std::free(d);
  return 0;
}

// Runs shape function `op` on data-less tensors; writes the result's dtype and sizes to *out.
int ncc_gpsimd_shape(int op, const ncc_arg* args, int nargs, ncc_arg* out, char* err, size_t errlen) {
  ensure_initialized();
  auto& r = registry();
  if (op < 0 || op >= static_cast<int>(r.ops.size()) || r.ops[op].nargs != nargs) {
    copy_error(err, errlen, "bad op index or argument count");
    return kOtherError;
  }
  const OpEntry& e = r.ops[op];
  auto state = std::make_unique<ncc_gpsimd::CoreState>();
  state->shape_mode = true;
  state->op_name = e.name;
  ncc_gpsimd::CoreState* saved = ncc_gpsimd::tls_core;
  ncc_gpsimd::tls_core = state.get();
  int code = 0;
  try {
    torch::Tensor t = e.shape_invoke(e.shape_fn, args);
    torch::TensorImpl& im = t.impl();
    out->kind = 0;
    out->dtype = static_cast<int32_t>(im.dtype);
    out->ndim = im.ndim;
    for (int k = 0; k < im.ndim; ++k) out->sizes[k] = im.sizes[k];
    out->data = nullptr;
  } catch (const ncc_gpsimd::DeviceError& ex) {
    code = error_code(ex);
    copy_error(err, errlen, std::string("shape function: ") + ex.what());
  } catch (const std::exception& ex) {
    code = kOtherError;
    copy_error(err, errlen, std::string("shape function of op '") + e.name + "': " + ex.what());
  } catch (...) {
    code = kOtherError;
    copy_error(err, errlen, std::string("shape function of op '") + e.name +
                                "': a C++ exception not derived from std::exception");
  }
  ncc_gpsimd::tls_core = saved;
  return code;
}

// Runs compute function `fn` of op `op` on `ncores` emulated cores (1, or 8 in multicore mode).
// `dst` is the output buffer, sized by the shape function. Counters are summed over cores and
// core 0's printf output is copied to `text`.
int ncc_gpsimd_run(int op, void* fn, const ncc_arg* args, int nargs, const ncc_arg* dst, int ncores,
                   ncc_counters* counters, char* text, size_t text_cap, size_t* text_len, char* err,
                   size_t errlen) {
  ensure_initialized();
  auto& r = registry();
  *text_len = 0;
  if (op < 0 || op >= static_cast<int>(r.ops.size()) || r.ops[op].nargs != nargs || ncores < 1 ||
      ncores > static_cast<int>(ncc_gpsimd::kCoreCount)) {
    copy_error(err, errlen, "bad op index, argument count or core count");
    return kOtherError;
  }
  static std::mutex one_run_at_a_time;  // the cores are shared between runs
  std::lock_guard<std::mutex> guard(one_run_at_a_time);
  size_t limit = declared_stack() ? declared_stack() : kDefaultStackLimit;
  ncc_gpsimd::take_element_accesses();  // start from zero (a count left by anything before this run)
  CoreRun runs[ncc_gpsimd::kCoreCount];
  bool posted[ncc_gpsimd::kCoreCount] = {};
  for (int c = ncores - 1; c >= 0; --c) {  // core 0 last: it runs on this thread
    CoreRun& run = runs[c];
    run.op = &r.ops[op];
    run.fn = reinterpret_cast<torchneuron::detail::AnyFn>(fn);
    run.args = args;
    run.dst = dst;
    Core& core = core_at(static_cast<size_t>(c), limit + kHostAllowance + kStackSlack);
    renew(core.state);
    run.state = &core.state;
    run.state->cpu_id = static_cast<uint32_t>(c);
    run.state->cpu_count = static_cast<uint32_t>(ncores);
    run.state->multicore = ncores > 1 || r.multicore;
    run.state->op_name = run.op->name;
    run.state->dst = dst;
    run.stack_lo = core.stack.lo();
    run.stack_size = core.stack.size();
    if (c == 0) {
      run_on_stack(run, core.stack);
    } else if (start_thread(core)) {
      core.job = &run;
      sem_post(&core.go);
      posted[c] = true;
    } else {
      run.code = kOtherError;
      run.error = "cannot start an emulated core thread";
    }
  }
  for (int c = 1; c < ncores; ++c) {
    if (!posted[c]) continue;
    Core& core = core_at(static_cast<size_t>(c), 0);
    while (sem_wait(&core.done) != 0) {
    }
  }
  *counters = ncc_counters{};
  int code = 0;
  std::string message;
  // Element-wise accessors count per translation unit; they run on one core only (multicore mode
  // refuses them), so the whole count is that core's.
  counters->element_accesses = ncc_gpsimd::take_element_accesses();
  bool dst_requested = false;
  for (int c = 0; c < ncores; ++c) {
    CoreRun& run = runs[c];
    const ncc_counters& k = run.state->counters;
    counters->element_accesses += k.element_accesses;  // streams beyond the TCM pool's four
    dst_requested = dst_requested || run.state->dst_taken;
    counters->stream_bytes += k.stream_bytes;
    counters->tcm_bytes += k.tcm_bytes;
    counters->arith_elements += k.arith_elements;
    counters->factory_bytes += k.factory_bytes;
    size_t peak = run.state->tcm.peak();
    if (peak > counters->tcm_peak_bytes) counters->tcm_peak_bytes = peak;
    if (run.stack_used > counters->stack_bytes) counters->stack_bytes = run.stack_used;
    if (run.code != 0 && code == 0) {
      code = run.code;
      message = ncores > 1 ? "core " + std::to_string(c) + ": " + run.error : run.error;
    }
  }
  if (code == 0 && runs[0].state->multicore && !dst_requested) {
    // The return value of a multicore kernel is ignored: without get_dst_tensor() nothing
    // reaches the output (undefined on the device), so say so rather than return stale memory.
    code = 1 + static_cast<int>(ncc_gpsimd::ErrorKind::kUsage);
    message = std::string("op '") + r.ops[op].name +
              "': a multicore kernel must write its output through get_dst_tensor() (its return value "
              "is ignored), but no core called get_dst_tensor()";
  }
  if (code == 0 && counters->stack_bytes > limit + kHostAllowance) {
    code = 1 + static_cast<int>(ncc_gpsimd::ErrorKind::kUsage);
    message = std::string("op '") + r.ops[op].name + "': stack overflow: the kernel used " +
              std::to_string(counters->stack_bytes) + " bytes of stack, more than " +
              (declared_stack() ? "its declared STACK_SIZE of " + std::to_string(limit)
                                : "the undeclared limit of " + std::to_string(limit)) +
              " bytes; declare it with extra_cflags=['-DSTACK_SIZE=<bytes>'] (at most 409600)";
  }
  counters->printf_lost_bytes = runs[0].state->out.drain(text, text_cap, text_len);
  if (code != 0) copy_error(err, errlen, message);
  return code;
}

}  // extern "C"

// The worker's loop of prepared calls (ncc_gpsimd_serve), in C so that a call costs no Python.
#include "gpsimd_serve.h"
