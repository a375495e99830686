// The worker's hot loop: prepared calls taken from the control page and answered in C.
//
// Included by gpsimd_runtime.cpp (so every library built from now on has it; the worker keeps its
// Python loop for libraries built before). Why C: in Python, the worker's side of a prepared call
// (the poll, reading the call id, the ctypes call of ncc_gpsimd_run with twelve arguments, the
// reply) cost several microseconds of a call whose kernel takes about ten. Here a call costs no
// Python in the worker: Python hands over the loop (ncc_gpsimd_serve) and gets it back only when
// a framed JSON request (prepare, shape, info, ...) or the end of the request pipe is waiting.
//
// The protocol is control.py's, word for word: the layout (word indices, offsets, the refusal
// code) and the time constants come from Python in ncc_serve_config, so that control.py stays
// their one definition. What the Python loop did is done here in the same order:
//   * wait for the next call as the host's gap after the previous call id last time says
//     (control.request_gap, control.wait_plan): poll for up to twice that gap when it is within
//     the host's cap in the POLL word (nanoseconds; 0: no polling); when it is longer, up to the
//     WAKE_AHEAD word, sleep on the request pipe until just before the expected call (a timer,
//     ending as early as this loop's timed sleeps end late, control.next_late) and poll from
//     then; on the host's CPU (HOST_CPU word), move off it before any poll (leave_cpu)
//     (control.shares_cpu); none of this after a call id whose plans have missed the call
//     after it (its score, control.next_score, below hit_min). A poll gives up when it finds
//     it was preempted (a gap between two looks at the clock with an involuntary context
//     switch: then no polling for a while, from `backoff_first` doubled by each further
//     preempted poll up to `backoff`);
//     A call whose host said its graph's run has more to make (MORE word) is followed by a poll
//     whatever the plan's score (control.hinted_plan: twice the gap, at least the cap);
//   * else sleep on the request pipe: set WORKER_WAITING, look again, then sleep until the pipe is
//     readable (a lost wake-up is the host's to recover: control.py); a wake token is read,
//     anything else returns to Python; woken by a prime (PRIME word: a graph's run has begun),
//     read its token and poll for the run's first call (take_prime);
//   * run the call: TAKEN, the call id checked against the calls prepared here, the CPU budget
//     re-armed at most every `arm_every` seconds, ncc_gpsimd_run with its counters, text and
//     error in the page, then CODE and REPLY (release stores), and a wake token for a host that
//     sleeps.
#include <poll.h>
#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <unordered_map>

namespace {

struct ServeEntry {
  int op;
  void* fn;
  const ncc_arg* args;
  int nargs;
  const ncc_arg* dst;
  int ncores;
};

// What the loop learned of the gap after one call id: how long the next call took to come, last
// time, and how often the plan made from the gap before found it (control.next_score).
struct GapStat {
  double gap;
  double score;
};

// The worker's state across calls of ncc_gpsimd_serve (it returns to Python for JSON requests).
struct ServeState {
  std::unordered_map<int64_t, ServeEntry> prepared;
  std::unordered_map<int64_t, GapStat> gaps;  // call id -> its gap after and the plan's score
  bool has_previous = false;
  int64_t previous = 0;
  double replied_at = 0;
  double quiet_from = 0;  // no polling before this time (a poll was preempted)
  double backoff = -1;    // the next back-off (control.Spinner; -1: not set yet)
  double armed_until = 0;
  long switches = -1;  // this thread's involuntary context switches at the latest gap (-1: none yet)
  double late = -1;    // how late a timed sleep ends (control.next_late; -1: not set yet)
  int64_t slept_for = -1;  // the latest call it counted a sleep on the pipe for
  double shared_quiet_from = 0;  // no moves off the host's CPU before this time (one failed: leave_cpu)
};

ServeState& serve_state() {
  static ServeState state;
  return state;
}

double monotonic() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

extern "C" {

// Everything of control.py and worker.py that the loop needs; filled by worker.py.
struct ncc_serve_config {
  int64_t* page;  // the control page
  int64_t request, call, host_waiting, poll, reply, code, worker_waiting, text_len, taken;  // word indices
  int64_t counters_offset, error_offset, text_offset;  // byte offsets in the page
  int64_t text_capacity, error_capacity;
  int64_t refused;         // the code word's value for an unknown call id
  int64_t sequence;        // the latest sequence number answered (read and updated)
  int64_t gaps_kept;       // call ids whose gap is remembered, at most
  int32_t fd_in, fd_out;   // the request and reply pipes
  uint32_t wake_token;     // the 4 bytes of an empty frame
  double cpu_seconds;      // CPU budget, re-armed at most every arm_every seconds of wall time
  double arm_every;
  double first_slice;      // unused: the host recovers lost wake-ups (control.py; kept for the layout)
  double preempted;        // a gap between two looks at the clock that means the CPU was lost
  double backoff;          // no polling for this long after a preempted poll
  double spin_floor;       // wait_plan's margin over twice the last gap
  double spin_max;         // the longest poll, whatever the POLL word says (a kernel may write it)
  // Appended fields (abi.NccServeConfig): word indices of the host's request time (CLOCK_MONOTONIC
  // ns) and of this loop's counts of sleeps, calls found by polling, polls stopped as preempted.
  int64_t request_at, slept, polled, preempted_count;
  int64_t next_poll;  // word index: this poll's length in ns (0: none), for diagnostics
  int64_t stalls;     // word index: gaps without a context switch polled through, for diagnostics
  double backoff_first;  // the shortest back-off (control.BACKOFF_FIRST; `backoff` is the longest)
  // Appended: word indices of the host's CPU, the longest gap to sleep through and then poll
  // (ns), this loop's CPU, its counts of timed sleeps and of polls given up on the host's CPU,
  // its estimate of a timed sleep's lateness (ns); control.wait_plan's constants.
  int64_t host_cpu, wake_ahead, worker_cpu, timed, shared, late;
  double wake_ahead_max, wake_margin, lead_max, late_first, window_share, window_max;
  double shared_nap;  // unused: a poller moves off the host's CPU (leave_cpu; kept for the layout)
  // Appended: a call's plan is followed while its score is at least hit_min; the weight of the
  // latest outcome in the score (control.HIT_MIN, control.HIT_WEIGHT); the word index of this
  // loop's count of plans not followed for a low score (diagnostics).
  double hit_min, hit_weight;
  int64_t unplanned;
  // Appended: word indices of the host's hint that more calls of its graph's run follow, of a
  // prime (the sequence number of the run's first call) and its poll's length in ns, and of this
  // loop's count of calls a prime's poll found (control.py: a graph's runs).
  int64_t more, prime, prime_poll, primed;
};

int ncc_gpsimd_serve_prepare(int64_t id, int op, void* fn, const ncc_arg* args, int nargs, const ncc_arg* dst,
                             int ncores) {
  serve_state().prepared[id] = ServeEntry{op, fn, args, nargs, dst, ncores};
  return 0;
}

int ncc_gpsimd_serve_forget(int64_t id) { return static_cast<int>(serve_state().prepared.erase(id)); }

}  // extern "C"

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

int64_t load(const int64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void store(int64_t* p, int64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

// Whether another task took this thread's CPU since the previous gap (control.Spinner._contended:
// a gap without an involuntary context switch is a stall of the virtual CPU, not contention).
bool contended(ServeState& s) {
  rusage usage{};
  const long switches = getrusage(RUSAGE_THREAD, &usage) == 0 ? usage.ru_nivcsw : -1;
  const bool taken = switches < 0 || switches != s.switches;
  s.switches = switches;
  return taken;
}

// Whether page word `word` holds `value` within `limit` seconds, polling without a system call
// (but after a gap between two looks at the clock); with `while_word` >= 0, only while that word
// holds `while_value`.
bool spin_for(ServeState& s, const ncc_serve_config& c, int64_t word, int64_t value, double limit,
              int64_t while_word = -1, int64_t while_value = 0) {
  const int64_t* p = c.page + word;
  if (load(p) == value) return true;
  double now = monotonic();
  if (now < s.quiet_from || limit <= 0) return false;
  if (s.backoff < c.backoff_first) s.backoff = c.backoff_first;
  const double end = now + limit;
  double last = now;
  for (;;) {
    if (load(p) == value) break;
    if (while_word >= 0 && load(c.page + while_word) != while_value) break;
    cpu_relax();
    now = monotonic();
    if (now - last > c.preempted) {
      if (contended(s)) {
        // Each preempted poll doubles the next back-off (up to c.backoff), each other halves it.
        s.quiet_from = now + s.backoff;
        s.backoff = 2 * s.backoff < c.backoff ? 2 * s.backoff : c.backoff;
        c.page[c.preempted_count] += 1;
        return load(p) == value;
      }
      c.page[c.stalls] += 1;
    }
    if (now >= end) break;
    last = now;
  }
  s.backoff = s.backoff / 2 > c.backoff_first ? s.backoff / 2 : c.backoff_first;
  return load(p) == value;
}

// How long after the reply the host sent the call seen at `now`: control.request_gap (the host's
// own gap from word REQUEST_AT, not this side's wake-up), within [0, now - replied_at].
double request_gap(const ServeState& s, const ncc_serve_config& c, double now) {
  double seen = now - s.replied_at;
  if (seen < 0) seen = 0;
  double host = static_cast<double>(load(c.page + c.request_at)) * 1e-9 - s.replied_at;
  if (host < 0) host = 0;
  return host < seen ? host : seen;
}

struct Plan {
  double nap;   // sleep this long first (0: not at all)
  double poll;  // then poll this long (0: not at all)
};

// How to wait for a call expected `gap` seconds after the previous one: control.wait_plan with
// the host's cap.
Plan wait_plan(const ServeState& s, const ncc_serve_config& c, double gap, double cap) {
  if (gap <= cap) {
    const double twice = 2 * gap + c.spin_floor;
    return Plan{0, twice < cap ? twice : cap};
  }
  double ahead = static_cast<double>(load(c.page + c.wake_ahead)) * 1e-9;
  if (ahead > c.wake_ahead_max) ahead = c.wake_ahead_max;
  if (gap > ahead) return Plan{0, 0};
  const double late = s.late > 0 ? s.late : 0;
  const double lead = late + c.wake_margin < c.lead_max ? late + c.wake_margin : c.lead_max;
  double window = c.spin_floor + c.window_share * gap;
  if (window > c.window_max) window = c.window_max;
  if (gap <= lead) return Plan{0, gap + window};
  return Plan{gap - lead, lead + window};
}

// The plan followed after the previous call: control.followed_plan (none while its score is
// below hit_min, counted in the page).
Plan followed_plan(const ServeState& s, const ncc_serve_config& c, double cap) {
  auto found = s.gaps.find(s.previous);
  if (found == s.gaps.end()) return Plan{0, cap};
  if (found->second.score < c.hit_min) {
    c.page[c.unplanned] += 1;
    return Plan{0, 0};
  }
  return wait_plan(s, c, found->second.gap, cap);
}

// control.hinted_plan: after a call the host said more of its run follow, poll for up to twice
// the gap after it last time plus the margin, at least the cap and at most window_max.
Plan hinted_plan(const ServeState& s, const ncc_serve_config& c, double cap) {
  auto found = s.gaps.find(s.previous);
  double poll = found == s.gaps.end() ? cap : 2 * found->second.gap + c.spin_floor;
  if (poll < cap) poll = cap;
  if (poll > c.window_max) poll = cap > c.window_max ? cap : c.window_max;
  return Plan{0, poll};
}

// control.next_score: a call within the plan's poll counts 1, one after it 0; one before the poll
// began, or a plan without a poll, leaves the score.
double next_score(const ncc_serve_config& c, double score, Plan plan, double gap) {
  if (plan.poll <= 0 || gap < plan.nap) return score;
  const double hit = gap <= plan.nap + plan.poll ? 1.0 : 0.0;
  return score + c.hit_weight * (hit - score);
}

// control.learned: the previous call's gap and score once the call after it came `gap` after it.
void learn(ServeState& s, const ncc_serve_config& c, double gap, double cap) {
  auto found = s.gaps.find(s.previous);
  double score = 1;
  if (found != s.gaps.end()) score = next_score(c, found->second.score, wait_plan(s, c, found->second.gap, cap), gap);
  if (s.gaps.size() > static_cast<size_t>(c.gaps_kept)) s.gaps.clear();
  s.gaps[s.previous] = GapStat{gap, score};
}

// control.next_late: up at once to a later wake-up, down by an eighth towards an earlier one.
double next_late(double late, double observed) {
  if (observed < 0) observed = 0;
  return observed > late ? observed : late + (observed - late) / 8;
}

// 1: readable, 0: time-out, -1: error. `seconds` < 0: no time-out.
int wait_readable(int fd, double seconds) {
  pollfd p{fd, POLLIN, 0};
  int ms = seconds < 0 ? -1 : static_cast<int>(seconds * 1e3 + 0.999);
  for (;;) {
    int n = ::poll(&p, 1, ms);
    if (n >= 0) return n > 0;
    if (errno != EINTR) return -1;
  }
}

// wait_readable with a time-out in nanoseconds (ppoll): a timed sleep of a few tens of
// microseconds, which poll()'s milliseconds can not express.
int wait_readable_for(int fd, double seconds) {
  pollfd p{fd, POLLIN, 0};
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(seconds);
  ts.tv_nsec = static_cast<long>((seconds - static_cast<double>(ts.tv_sec)) * 1e9);
  for (;;) {
    int n = ::ppoll(&p, 1, &ts, nullptr);
    if (n >= 0) return n > 0;
    if (errno != EINTR) return -1;
  }
}

bool read_token(int fd, uint32_t token) {
  uint32_t got = 0;
  ssize_t n;
  do {
    n = ::read(fd, &got, sizeof got);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof got) && got == token;
}

void write_token(int fd, uint32_t token) {
  ssize_t n;
  do {
    n = ::write(fd, &token, sizeof token);
  } while (n < 0 && errno == EINTR);
}

void arm_cpu(double seconds) {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return;
  double used = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
  rlimit limit{};
  if (getrlimit(RLIMIT_CPU, &limit) != 0) return;
  rlim_t soft = static_cast<rlim_t>(used + seconds) + 1;
  if (limit.rlim_max != RLIM_INFINITY && soft > limit.rlim_max) soft = limit.rlim_max;
  limit.rlim_cur = soft;
  setrlimit(RLIMIT_CPU, &limit);
}

// Moves this thread off CPU `cpu` (the host's) onto another it may run on, now: its affinity is
// narrowed to the others and at once restored. Why not a nap: a wake-up is placed on the CPU of
// its waker, or of its timer, whenever the other virtual CPU is halted (this virtual machine
// reports a halted CPU as preempted, which the scheduler avoids), so a napping poller came back
// to the host's CPU; a narrowed affinity migrates the thread, and the other CPU is woken for it.
// Whether it is off `cpu` now.
bool leave_cpu(int64_t cpu) {
  cpu_set_t all, others;
  if (sched_getaffinity(0, sizeof all, &all) != 0) return false;
  others = all;
  CPU_CLR(static_cast<int>(cpu), &others);
  if (CPU_COUNT(&others) == 0 || sched_setaffinity(0, sizeof others, &others) != 0) return false;
  sched_setaffinity(0, sizeof all, &all);
  return sched_getcpu() != cpu;
}

// take_prime's outcomes (worker._take_prime's).
enum PrimeOutcome { kNoPrime = 0, kPrimeFound = 1, kPrimeMissed = 2, kPrimeBroken = -1 };

// For a loop woken with call `expected` not come: when it was a prime for that call (control.py:
// a graph's runs), reads the prime's wake token and polls for the call for up to the PRIME_POLL
// word (at most spin_max), off the host's CPU (leave_cpu first when on it, as after a reply),
// until the call comes or the host withdraws the prime (it clears the word before a JSON
// request, which then waits in the pipe behind the token).
int take_prime(ServeState& s, ncc_serve_config& c, int64_t expected) {
  int64_t* page = c.page;
  if (load(page + c.prime) != expected) return kNoPrime;
  if (!read_token(c.fd_in, c.wake_token)) return kPrimeBroken;
  double limit = static_cast<double>(load(page + c.prime_poll)) * 1e-9;
  if (limit > c.spin_max) limit = c.spin_max;
  const int64_t cpu = sched_getcpu();
  page[c.worker_cpu] = cpu;
  if (cpu >= 0 && load(page + c.host_cpu) == cpu) {
    page[c.shared] += 1;
    leave_cpu(cpu);
    page[c.worker_cpu] = sched_getcpu();
  }
  if (!spin_for(s, c, c.request, expected, limit, c.prime, expected)) return kPrimeMissed;
  page[c.primed] += 1;
  return kPrimeFound;
}

void run_call(ServeState& s, ncc_serve_config& c, int64_t sequence) {
  int64_t* page = c.page;
  char* bytes = reinterpret_cast<char*>(page);
  page[c.worker_cpu] = sched_getcpu();
  store(page + c.taken, sequence);
  const int64_t id = load(page + c.call);
  s.has_previous = true;
  s.previous = id;
  auto found = s.prepared.find(id);
  int64_t code;
  if (found == s.prepared.end()) {
    snprintf(bytes + c.error_offset, static_cast<size_t>(c.error_capacity), "no prepared call %lld in this worker",
             static_cast<long long>(id));
    code = c.refused;
  } else {
    double now = monotonic();
    if (now >= s.armed_until) {
      arm_cpu(c.cpu_seconds);
      s.armed_until = now + c.arm_every;
    }
    const ServeEntry& e = found->second;
    code = ncc_gpsimd_run(e.op, e.fn, e.args, e.nargs, e.dst, e.ncores,
                          reinterpret_cast<ncc_counters*>(bytes + c.counters_offset), bytes + c.text_offset,
                          static_cast<size_t>(c.text_capacity), reinterpret_cast<size_t*>(page + c.text_len),
                          bytes + c.error_offset, static_cast<size_t>(c.error_capacity));
  }
  store(page + c.code, code);
  store(page + c.reply, sequence);
  c.sequence = sequence;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);  // the reply before the look at HOST_WAITING
  if (load(page + c.host_waiting)) write_token(c.fd_out, c.wake_token);
  s.replied_at = monotonic();
}

}  // namespace

extern "C" {

// Answers prepared calls until a frame (a JSON request, or the end of the pipe) waits on the
// request pipe: returns 0 then (Python reads and answers it, and calls this again), 1 when the
// pipe held something that is not a wake token while a call waited (the protocol is broken:
// the worker ends), 2 when poll() failed.
int ncc_gpsimd_serve(ncc_serve_config* config) {
  ncc_serve_config& c = *config;
  ServeState& s = serve_state();
  int64_t* page = c.page;
  if (s.late < 0) s.late = c.late_first;
  for (;;) {
    const int64_t expected = c.sequence + 1;
    const int64_t cap_ns = s.has_previous ? load(page + c.poll) : 0;
    const double cap_s = static_cast<double>(cap_ns) * 1e-9;
    const double cap = cap_s < c.spin_max ? cap_s : c.spin_max;
    bool ready = load(page + c.request) == expected;
    if (!ready) {
      // The host's run has more calls to make (MORE): poll whatever the plan's score says.
      const Plan plan = cap_ns <= 0 ? Plan{0, 0} : load(page + c.more) ? hinted_plan(s, c, cap) : followed_plan(s, c, cap);
      const double nap = plan.nap;
      const double limit = plan.poll;
      bool shared = false;
      int64_t cpu = -1;
      if (limit > 0) {
        // Not on the host's CPU (control.shares_cpu): a poll there holds the CPU the host needs.
        cpu = sched_getcpu();
        page[c.worker_cpu] = cpu;
        shared = cpu >= 0 && load(page + c.host_cpu) == cpu && monotonic() >= s.shared_quiet_from;
        if (shared) page[c.shared] += 1;
      }
      page[c.next_poll] = static_cast<int64_t>(limit * 1e9);
      if (plan.nap > 0) {
        // Asleep until just before the expected call, flagged: a call that comes earlier
        // wakes this loop with a token.
        page[c.timed] += 1;
        const double started = monotonic();
        store(page + c.worker_waiting, 1);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        int woken = 0;
        if (load(page + c.request) != expected) woken = wait_readable_for(c.fd_in, nap);
        store(page + c.worker_waiting, 0);
        if (woken < 0) return 2;
        ready = load(page + c.request) == expected;
        if (woken > 0 && !ready) {
          const int primed = take_prime(s, c, expected);
          if (primed == kNoPrime) return 0;  // a JSON request (or a token without a call)
          if (primed == kPrimeBroken) return 1;
          if (primed == kPrimeMissed) continue;
          ready = true;
          woken = 0;  // the prime's token is read
        } else if (woken == 0 && ready) {
          // A call that came as the timer ended may have seen the flag: its token, read now, would
          // otherwise wake the next sleep for nothing (a JSON request never comes while a call waits).
          woken = wait_readable_for(c.fd_in, 0);
        }
        if (woken > 0 && !read_token(c.fd_in, c.wake_token)) return 1;
        if (woken == 0 && !ready) {
          s.late = next_late(s.late, monotonic() - started - nap);
          page[c.late] = static_cast<int64_t>(s.late * 1e9);
        }
      } else if (shared) {
        // The host's CPU: moved off it. Still on it (no other CPU it may run on): no moves for a while.
        if (!leave_cpu(cpu)) s.shared_quiet_from = monotonic() + c.backoff;
        page[c.worker_cpu] = sched_getcpu();
        ready = load(page + c.request) == expected;
      }
      if (!ready) {
        ready = limit > 0 && spin_for(s, c, c.request, expected, limit);
        if (ready) page[c.polled] += 1;
      }
    }
    if (!ready) {
      if (s.slept_for != expected) page[c.slept] += 1;  // calls it slept for, not sleeps
      s.slept_for = expected;
      store(page + c.worker_waiting, 1);
      __atomic_thread_fence(__ATOMIC_SEQ_CST);
      int woken = 0;
      // No slice of its own against a lost wake-up: the host wakes it again (control.py).
      if (load(page + c.request) != expected) woken = wait_readable(c.fd_in, -1);
      store(page + c.worker_waiting, 0);
      if (woken < 0) return 2;
      if (load(page + c.request) != expected) {
        const int primed = woken > 0 ? take_prime(s, c, expected) : kNoPrime;
        if (primed == kNoPrime) return 0;  // a JSON request (or the pipe's end)
        if (primed == kPrimeBroken) return 1;
        if (primed == kPrimeMissed) continue;
      } else if (woken > 0 && !read_token(c.fd_in, c.wake_token)) {
        return 1;
      }
    }
    if (cap_ns > 0) {
      // How long this call took to come after the previous one: the next poll is sized by it,
      // and whether the plan from the gap before would have found it scores that plan.
      learn(s, c, request_gap(s, c, monotonic()), cap);
    }
    run_call(s, c, expected);
  }
}

}  // extern "C"
