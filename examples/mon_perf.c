/*
 * The MON package's performance counters from C: count the task clock and the page faults of
 * this thread in user mode while it works, for a given time, and print them when the
 * collection ends. Counting its own thread in user mode (:u) needs no privilege at the
 * kernel's default perf_event_paranoid (2); MON_PERF_MACHINE would count every CPU and needs
 * CAP_PERFMON.
 *
 *   cc mon_perf.c $(pkg-config --cflags --libs libmonitord) -o mon_perf
 *   ./mon_perf [MILLISECONDS]
 *
 * Exits 1 when a MON call fails or nothing was counted, 77 (a test harness's "skipped") when
 * nothing can count on this system (MON_NOPMU: a kernel without perf events, or an emulator).
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include <monitord/mon.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char* const events[] = {"perf::TASK-CLOCK:u", "perf::PAGE-FAULTS:u"};
static atomic_int done;

static int check(const char* call, MON_status status) {
    if (status != MON_SUCCESS) {
        fprintf(stderr, "%s: %s (%s) %s\n", call, MON_status_name(status),
                MON_status_message(status), MON_last_error());
        return status == MON_NOPMU ? 77 : 1;
    }
    return 0;
}

/* Called on MON's POLL task when the collection ends. */
static void collected(MON_status status, const MON_perf_stats* stats, void* user) {
    (void)user;
    if (status == MON_SUCCESS) {
        printf("counted for %.3f s:\n", (double)stats->duration_ns / 1e9);
        for (int set = 0; set < 2; ++set) {
            const MON_perf_count* c = &stats->counts[set];
            printf("  %-20s %15llu  (%.0f%% of the time on a counter)\n", events[set], c->count,
                   100.0 * c->running);
        }
    }
    atomic_store(&done, status == MON_SUCCESS && stats->counts[0].count > 0 ? 1 : -1);
}

int main(int argc, char** argv) {
    unsigned int ms = argc > 1 ? (unsigned int)atoi(argv[1]) : 500;
    MON_perf_config config = {{events[0], events[1], NULL, NULL}, MON_PERF_THREAD, 0, 0};
    MON_perf_stats stats;
    const struct timespec nap = {0, 1000000};
    int failed;

    if (check("MON_initialize", MON_initialize())) return 1;
    if (check("MON_start", MON_start(NULL, NULL))) return 1;
    failed = check("MON_collect_perf_stats",
                   MON_collect_perf_stats(&config, ms, &stats, collected, NULL));
    if (failed) return failed;
    while (atomic_load(&done) == 0) { /* touch fresh memory and sleep by turns */
        volatile char* block = malloc(1 << 20);
        for (size_t i = 0; block != NULL && i < (1 << 20); i += 4096) block[i] = 1;
        free((void*)block);
        nanosleep(&nap, NULL);
    }
    if (check("MON_stop", MON_stop())) return 1;
    if (check("MON_shutdown", MON_shutdown())) return 1;
    return atomic_load(&done) == 1 ? 0 : 1;
}
