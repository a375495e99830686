#include <signal.h>
#include <stdint.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <unistd.h>
#include <torch/torch.h>

// Forks a child that lives on (holding the worker's reply pipe), then crashes the worker.
torch::Tensor fork_then_crash(const torch::Tensor& t, int64_t child_seconds) {
    pid_t child = fork();
    if (child == 0) {
        sleep(static_cast<unsigned>(child_seconds));
        _exit(0);
    }
    printf("child %d\n", static_cast<int>(child));
    abort();
    return t;
}

// Prints what the worker was given: whether a host variable reached it, its limits, its group.
torch::Tensor probe(const torch::Tensor& t) {
    struct rlimit core, as, fsize, cpu;
    getrlimit(RLIMIT_CORE, &core);
    getrlimit(RLIMIT_AS, &as);
    getrlimit(RLIMIT_FSIZE, &fsize);
    getrlimit(RLIMIT_CPU, &cpu);
    printf("secret=%s\n", getenv("NCC_TEST_SECRET") ? getenv("NCC_TEST_SECRET") : "absent");
    printf("core=%llu as=%llu fsize=%llu cpu=%llu\n", (unsigned long long)core.rlim_cur,
           (unsigned long long)as.rlim_cur, (unsigned long long)fsize.rlim_cur, (unsigned long long)cpu.rlim_cur);
    printf("own_group=%d\n", getpgrp() == getpid() ? 1 : 0);
    return torch::zeros(t.sizes(), torch::kFloat);
}

// Burns CPU time without end (stopped by the CPU-time limit or the wall-clock time-out).
torch::Tensor spin(const torch::Tensor& t) {
    volatile uint64_t n = 0;
    while (true) n = n + 1;
    return t;
}

// Tries to reach outside the worker: signal 0 (a permission probe that delivers nothing) to the
// host, to every process (-1) and to itself; ptrace of the host; setsid in a child (leaving the
// group the host kills).
// Prints each result as "<what>=<return>/<errno>".
torch::Tensor reach_out(const torch::Tensor& t) {
    pid_t host = getppid();
    errno = 0; int r = kill(host, 0); printf("kill_host=%d/%d\n", r, r ? errno : 0);
    errno = 0; r = kill(-1, 0); printf("kill_all=%d/%d\n", r, r ? errno : 0);
    errno = 0; r = static_cast<int>(syscall(SYS_tgkill, host, host, 0));
    printf("tgkill_host=%d/%d\n", r, r ? errno : 0);
    errno = 0; r = kill(getpid(), 0); printf("kill_self=%d/%d\n", r, r ? errno : 0);
    errno = 0; r = kill(0, 0); printf("kill_group=%d/%d\n", r, r ? errno : 0);
    // Only where signals to the host are refused (the filter is on): an attach that succeeded
    // would stop the host (the test process) for good.
    int filtered = kill(host, 0) != 0 && errno == EPERM;
    if (filtered) {
        errno = 0; r = static_cast<int>(ptrace(PTRACE_ATTACH, host, nullptr, nullptr));
        printf("ptrace_host=%d/%d\n", r, r ? errno : 0);
    }
    // setsid in a forked child (the worker itself leads its session, where setsid always fails).
    pid_t child = fork();
    if (child == 0) _exit(setsid() < 0 ? errno : 0);
    int status = 0;
    waitpid(child, &status, 0);
    int err = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    printf("child_setsid=%d/%d\n", err ? -1 : 0, err);
    return torch::zeros(t.sizes(), torch::kFloat);
}
