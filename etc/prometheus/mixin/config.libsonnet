// What an installation changes, as in every Prometheus mixin: the selector of the scrape job
// of monitord-exporter, the range of the rates, the dashboard's identity. For instance, for a
// job named "node" and 2-minute rates:
//
//   jsonnet -S -e 'local m = (import "mixin.libsonnet") + { _config+:: {
//       monitordSelector: "job=\"node\"", rateInterval: "2m" } };
//     std.manifestYamlDoc(m.prometheusRules)' > monitord-rules.yml
{
  _config+:: {
    // The series of monitord-exporter: the label matchers of its scrape job.
    monitordSelector: 'job="monitord"',
    // The range of the recorded rates: four scrapes at Prometheus's usual 15 s.
    rateInterval: '1m',
    dashboardUid: 'monitord',
    dashboardTitle: 'monitord: CPU loading',
    dashboardTags: ['monitord'],
  },
}
