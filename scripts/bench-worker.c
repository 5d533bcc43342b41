/* The benchmark's trivial compiled command worker: it writes {"output":null} and exits,
 * without the C library. Linked against glibc, even an empty program spends ~0.5 ms of a VM's
 * time detecting the CPU at start (cpuid traps to the hypervisor), which is the worker's
 * cost, not the engine's; `scripts/bench` builds this with `cc -static -nostdlib` so its
 * engine cases measure Trellis. Linux on x86_64 or aarch64 only. */

static const char reply[] = "{\"output\":null}\n";

static long raw_syscall3(long number, long first, long second, long third) {
#if defined(__x86_64__)
    long result;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(number), "D"(first), "S"(second), "d"(third)
                     : "rcx", "r11", "memory");
    return result;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = number;
    register long x0 __asm__("x0") = first;
    register long x1 __asm__("x1") = second;
    register long x2 __asm__("x2") = third;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
    return x0;
#else
#error "bench-worker.c knows the system call convention of x86_64 and aarch64 only"
#endif
}

#if defined(__x86_64__)
enum { SYS_WRITE = 1, SYS_EXIT = 60 };
#else
enum { SYS_WRITE = 64, SYS_EXIT = 93 };
#endif

void _start(void) {
    long status = raw_syscall3(SYS_WRITE, 1, (long)reply, sizeof reply - 1) ==
                          (long)(sizeof reply - 1)
                      ? 0
                      : 1;
    raw_syscall3(SYS_EXIT, status, 0, 0);
    for (;;) {
    }
}
