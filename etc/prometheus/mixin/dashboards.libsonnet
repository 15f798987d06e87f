// The Grafana dashboard: a machine (or several) chosen by job and instance, its CPU time by
// mode as node_exporter's dashboards show it, each CPU's busiest second, the two sources'
// load, the idle probes, the watchdog and the standing counter sessions.
{
  grafanaDashboards+:: {
    local cfg = $._config,
    local sel = '%(monitordSelector)s' % cfg,
    // The panels' series: the job and instances the dashboard's variables choose.
    local m = 'job=~"$job", instance=~"$instance"',
    local target(expr, legend) = {
      datasource: { type: 'prometheus', uid: '${datasource}' },
      expr: expr,
      legendFormat: legend,
      refId: 'A',
    },
    local panel(id, title, type, targets, x, y, w, h, unit='percentunit', extra={}) = {
      id: id,
      title: title,
      type: type,
      datasource: { type: 'prometheus', uid: '${datasource}' },
      gridPos: { x: x, y: y, w: w, h: h },
      targets: [t { refId: std.char(65 + i) } for i in std.range(0, std.length(targets) - 1) for t in [targets[i]]],
      fieldConfig: { defaults: { unit: unit }, overrides: [] },
      options: {},
    } + extra,
    local stacked = { fieldConfig+: { defaults+: { custom: { stacking: { mode: 'normal' }, fillOpacity: 60 } } } },

    'monitord.json': {
      uid: cfg.dashboardUid,
      title: cfg.dashboardTitle,
      tags: cfg.dashboardTags,
      editable: true,
      schemaVersion: 38,
      time: { from: 'now-1h', to: 'now' },
      refresh: '30s',
      templating: {
        list: [
          {
            name: 'datasource',
            label: 'Data source',
            type: 'datasource',
            query: 'prometheus',
          },
          {
            name: 'job',
            label: 'Job',
            type: 'query',
            datasource: { type: 'prometheus', uid: '${datasource}' },
            query: { query: 'label_values(monitord_up{%s}, job)' % sel, refId: 'job' },
            definition: 'label_values(monitord_up{%s}, job)' % sel,
            refresh: 2,
            includeAll: false,
          },
          {
            name: 'instance',
            label: 'Instance',
            type: 'query',
            datasource: { type: 'prometheus', uid: '${datasource}' },
            query: { query: 'label_values(monitord_up{job=~"$job"}, instance)', refId: 'instance' },
            definition: 'label_values(monitord_up{job=~"$job"}, instance)',
            refresh: 2,
            includeAll: true,
            multi: true,
          },
        ],
      },
      panels: [
        panel(1, 'CPUs', 'stat', [target('instance:monitord_num_cpu:sum{%s}' % m, '{{instance}}')], 0, 0, 4, 4, 'none'),
        panel(2, 'Busy (not idle, iowait or steal)', 'stat',
              [target('instance:monitord_cpu_utilisation:rate%s{%s}' % [cfg.rateInterval, m], '{{instance}}')], 4, 0, 4, 4),
        panel(3, 'Idle probes by state', 'stat',
              [target('sum by (state) (monitord_probes{%s})' % m, '{{state}}')], 8, 0, 8, 4, 'none'),
        panel(4, 'Watchdog: late pets (10 m), refused pets (10 m), armed', 'stat', [
          target('sum by (instance) (increase(monitord_watchdog_late_pets_total{%s}[10m]))' % m, 'late {{instance}}'),
          target('sum by (instance) (increase(monitord_watchdog_pet_errors_total{%s}[10m]))' % m, 'refused {{instance}}'),
          target('monitord_watchdog_armed{%s}' % m, 'armed {{instance}}'),
        ], 16, 0, 8, 4, 'none'),
        panel(5, 'CPU time by mode', 'timeseries',
              [target('sum by (mode) (rate(monitord_cpu_seconds_total{%s, mode!="idle"}[$__rate_interval]))' % m, '{{mode}}')],
              0, 4, 12, 9, 'none', stacked),
        panel(6, 'Busy share per instance', 'timeseries',
              [target('instance:monitord_cpu_utilisation:rate%s{%s}' % [cfg.rateInterval, m], '{{instance}}')], 12, 4, 12, 9),
        panel(7, "Each CPU's busiest second in the window (procstat)", 'timeseries',
              [target('monitord_cpu_load_window_max_ratio{%s, source="procstat"}' % m, '{{instance}} cpu{{cpu}}')], 0, 13, 12, 9),
        panel(8, 'Machine load by source: last second and window average', 'timeseries', [
          target('monitord_load_ratio{%s}' % m, '{{instance}} {{source}}'),
          target('monitord_load_window_avg_ratio{%s}' % m, '{{instance}} {{source}} window'),
        ], 12, 13, 12, 9),
        panel(9, 'Standing counter sessions counting', 'stat',
              [target('monitord_perf_session_counting{%s}' % m, '{{instance}} {{session}}')], 0, 22, 24, 4, 'none'),
      ],
    },
  },
}
