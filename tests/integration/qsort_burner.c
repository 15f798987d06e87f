/* The workload of the dwarf call chain test: for SECONDS of CPU time (default 2), sorts a small
 * array again and again with libc's qsort, whose comparison callback does most of the work.
 * Built with -O2 -fomit-frame-pointer, as Debian's libc is: a chain followed by frame pointers
 * breaks in qsort, one unwound by call frame information (perf record --call-graph dwarf,
 * monctl perf profile --call-graph dwarf) goes on to burner_sort and main. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime in strict C11 */

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Not inlined, and each does something after its call: no tail call leaves a frame out. */
__attribute__((noinline)) int burner_compare(const void* a, const void* b) {
    const int x = *(const int*)a;
    const int y = *(const int*)b;
    volatile int sink = 0;
    for (int i = 0; i < 40; ++i) sink = sink + i;
    return (x > y) - (x < y);
}

__attribute__((noinline)) int burner_sort(int* values, size_t n) {
    for (size_t i = 0; i < n; ++i) values[i] = (int)((i * 7919) % n);
    qsort(values, n, sizeof(int), burner_compare);
    return values[0] + values[n - 1];
}

int main(int argc, char** argv) {
    const double seconds = argc > 1 ? atof(argv[1]) : 2;
    int values[200]; /* 800 bytes: msort's buffer is on the stack */
    long sum = 0;
    const double end = cpu_seconds() + seconds;
    while (cpu_seconds() < end) sum += burner_sort(values, sizeof values / sizeof values[0]);
    printf("%ld\n", sum);
    return 0;
}
