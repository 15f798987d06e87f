// Recording rules, named as node_exporter's mixin names its own (level:metric:operations):
// the same queries work on monitord_cpu_seconds_total with the metric's name changed.
{
  prometheusRules+:: {
    local c = $._config,
    groups+: [
      {
        name: 'monitord.rules',
        rules: [
          {
            // The CPUs of each machine.
            record: 'instance:monitord_num_cpu:sum',
            expr: 'count without (cpu, mode) (monitord_cpu_seconds_total{%(monitordSelector)s, mode="idle"})' % c,
          },
          {
            // The share of the machine's CPU time that is busy (not idle, iowait or steal),
            // as node_exporter's instance:node_cpu_utilisation:rate5m.
            record: 'instance:monitord_cpu_utilisation:rate%(rateInterval)s' % c,
            expr: |||
              1 - avg without (cpu) (
                sum without (mode) (
                  rate(monitord_cpu_seconds_total{%(monitordSelector)s, mode=~"idle|iowait|steal"}[%(rateInterval)s])
                )
              )
            ||| % c,
          },
          {
            // The machine's CPU seconds per second in each mode, summed over its CPUs.
            record: 'instance_mode:monitord_cpu_seconds:rate%(rateInterval)s' % c,
            expr: 'sum without (cpu) (rate(monitord_cpu_seconds_total{%(monitordSelector)s}[%(rateInterval)s]))' % c,
          },
          {
            // The busiest second of any CPU of the machine within monitord's window, by
            // source: a CPU saturated between two scrapes shows here.
            record: 'instance_source:monitord_cpu_load_window_max_ratio:max',
            expr: 'max without (cpu) (monitord_cpu_load_window_max_ratio{%(monitordSelector)s})' % c,
          },
          {
            // The CPUs that were saturated (95 % and more) for a second of the window; 0 when none.
            record: 'instance_source:monitord_cpus_saturated_in_window:count',
            expr: 'count without (cpu) (monitord_cpu_load_window_max_ratio{%(monitordSelector)s} >= 0.95) or sum without (cpu) (monitord_cpu_load_window_max_ratio{%(monitordSelector)s} * 0)' % c,
          },
        ],
      },
    ],
  },
}
