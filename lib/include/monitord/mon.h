/*
 * mon.h: the MON package's C interface, on Linux.
 *
 * The calls and their order are those of the MON CPU monitor of the RAD750 flight software:
 *
 *   MON_initialize()          allocate, set defaults        UNINITIALIZED -> INITIALIZED
 *   MON_start(idle, poll)     start the IDLE and POLL tasks INITIALIZED   -> RUNNING
 *   MON_get_loading(&l)       loading statistics            INITIALIZED or RUNNING
 *   MON_start_perf_mon(...)   performance counters          RUNNING (see below)
 *   MON_set_watchdog(dev, s)  the hardware watchdog         INITIALIZED
 *   MON_stop()                stop the tasks                RUNNING       -> INITIALIZED
 *   MON_shutdown()            free everything               INITIALIZED   -> UNINITIALIZED
 *
 * A call made in another state returns MON_BADSTATE and changes nothing; a NULL pointer where
 * one is required returns MON_NULLPTR. Every call returns MON_SUCCESS (0) or a status code.
 * The calls may be made from any thread; they are serialised inside.
 *
 * The IDLE task is one thread per monitored CPU, pinned to it at the lowest priority
 * (SCHED_IDLE), spinning over a calibrated loop; the time it gets is the CPU's idle time. The
 * POLL task samples it once a second and keeps a history of 60 per-second samples.
 *
 * Include it as <monitord/mon.h>; link with -lmonitord (pkg-config --cflags --libs libmonitord).
 */
#ifndef MON_H
#define MON_H

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: the MON package's MSG codes, then the conditions Linux adds. No MON call
 * lets an exception out, nor ends the program from MON's own threads: a failed allocation is
 * MON_ALLOCMEM, a thread that cannot be started MON_TSKSPAWN, anything else the closest code,
 * and MON_last_error() says what happened; MON_last_error_info() gives the MSG codes'
 * parameters as fields.
 *
 * Five MSG codes are never returned on Linux, and keep their values so that MON code builds
 * unchanged: MON_ALLOCWUT and MON_FREEWUT (the POLL task sleeps on a condition variable with
 * a deadline, not on a wake-up timer that is allocated and freed), MON_POLSLEEP (that wait
 * cannot fail: a wake-up before the deadline is waited again), MON_FREEMEM (freeing memory
 * cannot fail in C or C++) and MON_FREEMTX (MON's mutexes live as long as the program, and
 * destroying a mutex reports nothing). */
typedef unsigned int MON_status;
enum {
    MON_SUCCESS = 0, /* the function succeeded */
    MON_ALLOCMEM,    /* unable to allocate memory */
    MON_ALLOCMTX,    /* unable to allocate a mutex */
    MON_ALLOCWUT,    /* unable to allocate a wake-up timer */
    MON_BADSTATE,    /* not valid in the current state */
    MON_FREEMEM,     /* unable to free memory */
    MON_FREEMTX,     /* unable to destroy a mutex */
    MON_FREEWUT,     /* unable to destroy a wake-up timer */
    MON_LOCKMTX,     /* unable to lock or unlock a mutex */
    MON_NOTRDY,      /* not ready: no loading sample yet */
    MON_NULLPTR,     /* a NULL pointer argument */
    MON_POLSLEEP,    /* a task is unable to sleep */
    MON_PRFRUN,      /* performance statistics are already being collected */
    MON_TSKJOIN,     /* a task could not be stopped */
    MON_TSKSPAWN,    /* a task could not be started */
    MON_NOPMU,       /* no performance monitoring unit for the requested events */
    MON_PERM,        /* the kernel refused for lack of privilege */
    MON_NOEVENT,     /* no such event */
    MON_NODEV,       /* no such device */
    MON_BUSY,        /* the resource is held by someone else */
    MON_IOERR,       /* a system call failed */
    MON_BADARG,      /* an argument is invalid */
    MON_BADDATA      /* data from the kernel is malformed */
};

/*
 * Attributes of a task, for MON_start(). A NULL pointer selects the defaults.
 *
 * policy    SCHED_OTHER, SCHED_BATCH, SCHED_IDLE, SCHED_FIFO or SCHED_RR (<sched.h>).
 *           The IDLE task accepts SCHED_IDLE (its default), SCHED_OTHER and SCHED_BATCH: a
 *           real-time spinning thread would take the CPU from everything else. The POLL task
 *           defaults to SCHED_OTHER.
 * priority  sched_priority for SCHED_FIFO and SCHED_RR, the nice value (-20..19) for
 *           SCHED_OTHER and SCHED_BATCH; ignored for SCHED_IDLE.
 * cpus      ncpus CPU numbers. For the IDLE task, the CPUs to monitor; for the POLL task, the
 *           CPUs it may run on. NULL (or ncpus 0) means every online CPU.
 */
typedef struct MON_task_attr {
    int policy;
    int priority;
    const int* cpus;
    unsigned int ncpus;
} MON_task_attr;

/* Loading statistics, in percent (0 to 100), over the previous 60 seconds. */
typedef struct MON_loading {
    double avg_prev_sec; /* the previous second; NaN when that second has no valid sample */
    double avg_prev_min; /* the previous minute */
    double min_prev_min; /* the lowest avg_prev_sec of the previous minute */
    double max_prev_min; /* the highest avg_prev_sec of the previous minute */
} MON_loading;

MON_status MON_initialize(void);
MON_status MON_start(const MON_task_attr* idle, const MON_task_attr* poll);
/* The hardware watchdog, when one is petted, stays armed: it resets the machine unless
 * MON_start() runs again within its timeout. A counting session ends as by
 * MON_stop_perf_mon(NULL). MON_BADSTATE when called from a perf callback.
 *
 * MON_stop waits up to MON_TASK_STOP_MS for each task to end, and returns MON_TSKJOIN naming
 * the task (MON_last_error_info) when one has not:
 *   - the POLL task, running a perf callback or overflow handler that has not returned: MON
 *     stays STOPPING (the loading and the last counts can be read; MON_start, MON_shutdown
 *     and the calls that start counting return MON_BADSTATE), and a later MON_stop waits
 *     again and completes the stop once it has;
 *   - a thread of the IDLE task, which gets no CPU time (a real-time task takes all of its
 *     CPU, or the thread is frozen): MON is stopped all the same (INITIALIZED), and the thread
 *     ends by itself when it next runs. */
#define MON_TASK_STOP_MS 2000
MON_status MON_stop(void);
MON_status MON_shutdown(void);

/*
 * The hardware watchdog, petted by the IDLE task: each IDLE thread earns a credit for every
 * 100 ms of idle time it gets, idle time counting until it is older than the timeout, and the
 * watchdog is petted when every monitored CPU has earned one since the last pet (at most ten
 * times a second). So a CPU keeps it petted while it has 100 ms of idle time per timeout (up
 * to 99 % load with 10 s: 100 x (1 - 0.1 s / timeout) percent), and a CPU starved for the
 * whole timeout lets the watchdog reset the machine, within two timeouts (a credit under way
 * may still complete within the first).
 *
 * MON_set_watchdog(device, timeout_s) chooses the device ("/dev/watchdog") and the timeout
 * asked of the driver (1 to 3600 s; 0 for 10); MON_start opens it, which arms it, and returns
 * MON_NODEV, MON_BUSY or MON_PERM when it cannot. MON_stop and MON_shutdown leave it armed,
 * as on the RAD750: the machine resets unless MON_start runs again within the timeout.
 * MON_set_watchdog(NULL, 0) disarms it (the magic close) and turns it off. Valid in the
 * INITIALIZED state only.
 */
MON_status MON_set_watchdog(const char* device, unsigned int timeout_s);
/* Pets the armed watchdog once, now: MON's watchdogSet() for flight code that runs on with MON
 * stopped (after MON_stop or MON_shutdown), and must then keep the machine from resetting
 * itself, at least once per timeout. MON_BADSTATE while MON runs (the IDLE task pets it then,
 * and only when every CPU has idle time: a pet from the caller would hide a starved CPU) and
 * when no watchdog is armed; the driver's error (MON_IOERR, ...) when the pet fails. */
MON_status MON_pet_watchdog(void);

/* The loading of the monitored CPUs together. MON_NOTRDY before the first sample (one second
 * after MON_start()); after MON_stop(), the statistics as they were when it stopped. */
MON_status MON_get_loading(MON_loading* loading);
/* The same for one CPU; MON_BADARG for a CPU that is not monitored. */
MON_status MON_get_cpu_loading(int cpu, MON_loading* loading);

/*
 * Performance counters.
 *
 * The RAD750 counts four events at a time, one from each of four sets (PMC1 to PMC4); a
 * MON_perf_config names one event per set. Names are those of `monctl perf list`: the
 * ppc750:: table (ppc750::CYCLES and three more can go in any set, the others in the set of
 * their counter), any event libpfm4 knows on this machine (perf::TASK-CLOCK, cycles,
 * amd64_fam19h_zen3::RETIRED_INSTRUCTIONS, ...), a raw code PMU::rHEX, each with the
 * modifiers :u or :k. ppc750::L1_LOAD_MISSES_OVER_THRESHOLD (set 1) takes :threshold=N, N
 * from 0 to 63 (MMCR0[THRESHOLD], 0 when not given): it counts the L1 load misses that take
 * more than N cycles; MON_get_perf_event says the threshold a session counts with. ppc750 events
 * must all fit on the counters at once, as on the 750; other events are multiplexed by the kernel
 * when there are more than counters, and their counts come with the time they really counted.
 *
 *   MON_start_perf_mon(&config)                         count until MON_stop_perf_mon
 *   MON_stop_perf_mon(&stats)                           stop, and return the counts
 *   MON_collect_perf_stats(&config, ms, &stats, fn, v)  count for ms milliseconds, then fill
 *                                                       stats and call fn(status, stats, v)
 *
 * Counting needs MON to be running (MON_start): the POLL task ends collections and calls the
 * callbacks. One session at a time: a second start or collect returns MON_PRFRUN. Counting
 * the whole machine or one CPU needs CAP_PERFMON (or root, or perf_event_paranoid <= 0);
 * MON_PERF_THREAD needs no privilege at perf_event_paranoid 1 or lower, and at 2 for events
 * counted in user mode only (:u).
 *
 * MON_PERF_THREAD counts the thread config.tid: 0 for the calling thread, or any thread of the
 * calling process (its main thread, whose id is the process's pid, too), or a thread of
 * another process other than its main one. The pid of another process (the id of its main
 * thread) counts every thread that process has when counting starts, and the threads and
 * processes they create while counting, added up into one count per set: a process whose
 * main thread sleeps while its workers run counts the workers. A thread that exits just as
 * counting starts is left out; a process that is gone is MON_NODEV.
 */
#define MON_PERF_SETS 4

enum {
    MON_PERF_MACHINE = 0, /* every online CPU, counts added up (the default) */
    MON_PERF_CPU = 1,     /* the CPU config.cpu */
    MON_PERF_THREAD = 2   /* the thread config.tid (0: the calling thread), and the threads
                             and processes it creates while counting; another process's
                             pid: all the threads of that process (see below) */
};

typedef struct MON_perf_config {
    /* events[i]: the event of set i + 1; NULL or "" leaves that counter unused. */
    const char* events[MON_PERF_SETS];
    int target; /* MON_PERF_MACHINE, MON_PERF_CPU or MON_PERF_THREAD */
    int cpu;    /* MON_PERF_CPU */
    int tid;    /* MON_PERF_THREAD: a thread, or another process's pid */
} MON_perf_config;

typedef struct MON_perf_count {
    unsigned long long count;      /* events counted while the event was on a counter */
    unsigned long long enabled_ns; /* how long the event was asked for */
    unsigned long long running_ns; /* how long it was on a counter */
    double scaled;  /* count x enabled / running: the estimate for the whole period */
    double running; /* running / enabled: 1 when it counted all the time */
} MON_perf_count;

typedef struct MON_perf_stats {
    MON_perf_count counts[MON_PERF_SETS]; /* per set, as configured; zero for unused sets */
    unsigned long long duration_ns;       /* wall time from start to stop */
} MON_perf_stats;

/* Called when a collection ends: status MON_SUCCESS with the counts, or the reason they
 * could not be read. `stats` is the caller's structure, or a temporary one when it passed
 * NULL. It runs on the POLL task, or in the thread of the MON_stop_perf_mon or MON_stop that
 * ended the collection early; no MON lock is held, so it may call MON functions (not
 * MON_stop, which waits for the POLL task). */
typedef void (*MON_perf_callback)(MON_status status, const MON_perf_stats* stats, void* user);

/* Starts counting. MON_NULLPTR for a NULL config, MON_NOEVENT for an unknown event (the
 * message names the closest ones), MON_BADARG for events that cannot be counted together,
 * MON_PERM / MON_NOPMU when the kernel refuses (the message says what would allow it),
 * MON_PRFRUN while counting. */
MON_status MON_start_perf_mon(const MON_perf_config* config);
/* Stops counting and stores the counts in *stats unless stats is NULL. When nothing is
 * counting, stores the counts of the last session (MON_NOTRDY if there was none). Ends a
 * MON_collect_perf_stats early: its stats are filled and its callback called before this
 * returns. */
MON_status MON_stop_perf_mon(MON_perf_stats* stats);
/* Counts for duration_ms milliseconds (1 to 604800000), then stores the counts in *stats
 * (unless NULL; it must stay valid until then) and calls callback(status, stats, user)
 * (unless NULL). Returns at once: errors in starting are returned, errors in reading are
 * given to the callback. */
MON_status MON_collect_perf_stats(const MON_perf_config* config, unsigned int duration_ms,
                                  MON_perf_stats* stats, MON_perf_callback callback, void* user);

/* The event of set `set` (1 to MON_PERF_SETS) as the running session counts it, or as the
 * last one did: the PMU's name for it, with what the PMU was set to where the name asked for
 * it ("ppc750::L1_LOAD_MISSES_OVER_THRESHOLD:threshold=16": the threshold granted, also 0 when
 * none was asked for), "" for an unused set; copied with its NUL into name[size]. MON_NOTRDY
 * before the first session, MON_BADARG for a set out of range or a name that does not fit
 * (MON_last_error says the size needed). */
MON_status MON_get_perf_event(int set, char* name, unsigned int size);

/* Extension (not in the RAD750 MON package; pfm's PCNTRDISABLE and PCNTRENABLE, AmigaOS's
 * FreezeCounters): MON_pause_perf_mon stops the running session's counting until
 * MON_resume_perf_mon. Its counts, enabled_ns and running_ns stand still meanwhile, and so do
 * its overflow handlers' events; its duration_ns, and a MON_collect_perf_stats's duration, go
 * on. Pausing a paused session, or resuming one that is not paused, changes nothing.
 * MON_NOTRDY when nothing is counting; MON_BADSTATE before MON_initialize. */
MON_status MON_pause_perf_mon(void);
MON_status MON_resume_perf_mon(void);
/* Whether the running session is paused now (*paused 1, else 0), and how long it has been
 * paused in all since it started (*paused_ns, of its duration_ns); when nothing is counting,
 * the same of the last session (*paused 0). Either pointer may be NULL. MON_NOTRDY before the
 * first session. */
MON_status MON_get_perf_paused(int* paused, unsigned long long* paused_ns);

/* Extension (not in the RAD750 MON package; AmigaOS's SetInterruptVector with a counter
 * preload): be told of the overflows of a set's event. Every `period` events of set `set`
 * (1 to MON_PERF_SETS, as config.events[set - 1] names it) in the sessions started after this
 * call, handler(set, count, user) is called with the set's count at that overflow (period,
 * 2 x period, ...). It is called on the POLL task, never from a signal handler, and without a
 * MON lock held: the POLL task looks for overflows every 10 ms while a session with handlers
 * counts, and calls the handler once per overflow, oldest first. The overflows still unseen
 * when a session ends are handed over before its collection's callback, in the thread that
 * calls it (the POLL task, or that of the MON_stop_perf_mon or MON_stop that ended it). A
 * handler must not call MON_stop. handler NULL removes the set's handler; MON_shutdown
 * removes them all. MON_BADARG for a set out of range or a period of 0, MON_PRFRUN while
 * counting, MON_BADSTATE before MON_initialize. A set with a handler and no event makes
 * MON_start_perf_mon and MON_collect_perf_stats return MON_BADARG. */
typedef void (*MON_perf_overflow_handler)(int set, unsigned long long count, void* user);
MON_status MON_set_perf_overflow(int set, unsigned long long period,
                                 MON_perf_overflow_handler handler, void* user);

/* "MON_PRFRUN", and a sentence saying what it means; for any value, never NULL. */
const char* MON_status_name(MON_status status);
const char* MON_status_message(MON_status status);
/* What the last failing MON call of this thread said about its failure, or "". */
const char* MON_last_error(void);

/* MON's states, as bits (MON_error_info). */
enum {
    MON_STATE_UNINITIALIZED = 0x1, /* before MON_initialize; after MON_shutdown */
    MON_STATE_INITIALIZED = 0x2,   /* after MON_initialize or MON_stop */
    MON_STATE_RUNNING = 0x4,       /* after MON_start */
    MON_STATE_STOPPING = 0x8       /* in MON_stop; after a MON_stop whose POLL task did not end */
};

/* The last failing MON call of this thread, with the parameters of the MON package's MSG
 * codes. The strings stay valid until this thread's next failing MON call. */
typedef struct MON_error_info {
    MON_status status;         /* what it returned; MON_SUCCESS when no call has failed */
    const char* call;          /* its name ("MON_start"); "" when no call has failed */
    const char* message;       /* MON_last_error() */
    unsigned int valid_states; /* MON_BADSTATE: the states the call is valid in (bits) */
    unsigned int state;        /* MON_BADSTATE: the state MON was in (one bit) */
    unsigned long long size;   /* MON_ALLOCMEM: the bytes asked for; 0: not known (below) */
    const char* purpose;       /* MON_ALLOCMEM: what MON was allocating memory for */
    const char* task;          /* MON_TSKSPAWN, MON_TSKJOIN: "IDLE" or "POLL"; "" otherwise */
    int cpu;                   /* MON_TSKSPAWN, MON_TSKJOIN: the CPU of the IDLE task's
                                  thread; -1 for the POLL task and otherwise */
} MON_error_info;
/* Fills *info (MON_NULLPTR when NULL). An allocation that fails inside the C++ library
 * (std::bad_alloc) does not say its size: size is then 0, and purpose says what MON was
 * doing ("the IDLE task and the loading history", "the counters", ...). */
MON_status MON_last_error_info(MON_error_info* info);

#ifdef __cplusplus
}
#endif

#endif /* MON_H */
