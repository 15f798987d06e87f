/*
 * The MON package's C API in use: initialize, start the IDLE and POLL tasks, read the CPU
 * loading a few times, stop, shut down.
 *
 *   cc mon_loading.c $(pkg-config --cflags --libs libmonitord) -o mon_loading
 *   ./mon_loading [SECONDS]
 */
#include <monitord/mon.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int check(const char* call, MON_status status) {
    if (status != MON_SUCCESS) {
        fprintf(stderr, "%s: %s (%s) %s\n", call, MON_status_name(status),
                MON_status_message(status), MON_last_error());
        return 1;
    }
    return 0;
}

int main(int argc, char** argv) {
    int seconds = argc > 1 ? atoi(argv[1]) : 3;
    MON_loading l;

    if (check("MON_initialize", MON_initialize())) return 1;
    if (check("MON_start", MON_start(NULL, NULL))) return 1; /* default task attributes */

    for (int i = 0; i < seconds; ++i) {
        sleep(1);
        MON_status s = MON_get_loading(&l);
        if (s == MON_NOTRDY) continue; /* the first sample is not there yet */
        if (check("MON_get_loading", s)) return 1;
        printf("loading: last second %.1f%%, minute %.1f%% (min %.1f%%, max %.1f%%)\n",
               l.avg_prev_sec, l.avg_prev_min, l.min_prev_min, l.max_prev_min);
    }

    if (check("MON_stop", MON_stop())) return 1;
    if (check("MON_shutdown", MON_shutdown())) return 1;
    return 0;
}
