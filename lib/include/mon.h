/*
 * mon.h: the MON package's C interface, on Linux.
 *
 * The calls and their order are those of the MON CPU monitor of the RAD750 flight software:
 *
 *   MON_initialize()          allocate, set defaults        UNINITIALIZED -> INITIALIZED
 *   MON_start(idle, poll)     start the IDLE and POLL tasks INITIALIZED   -> RUNNING
 *   MON_get_loading(&l)       loading statistics            INITIALIZED or RUNNING
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
 * Link with -lmonitor (pkg-config --cflags --libs libmonitor).
 */
#ifndef MON_H
#define MON_H

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: the MON package's MSG codes, then the conditions Linux adds. */
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
 * MON_start() runs again within its timeout. */
MON_status MON_stop(void);
MON_status MON_shutdown(void);

/* The loading of the monitored CPUs together. MON_NOTRDY before the first sample (one second
 * after MON_start()); after MON_stop(), the statistics as they were when it stopped. */
MON_status MON_get_loading(MON_loading* loading);
/* The same for one CPU; MON_BADARG for a CPU that is not monitored. */
MON_status MON_get_cpu_loading(int cpu, MON_loading* loading);

/* "MON_PRFRUN", and a sentence saying what it means; for any value, never NULL. */
const char* MON_status_name(MON_status status);
const char* MON_status_message(MON_status status);
/* What the last failing MON call of this thread said about its failure, or "". */
const char* MON_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* MON_H */
