// monitord's Prometheus mixin: the recording rules and the Grafana dashboard, with the scrape
// job's selector and the rates' range set in config.libsonnet. scripts/mixin writes what the
// packages install from it (etc/prometheus/monitord-rules.yml, etc/grafana/monitord.json).
(import 'config.libsonnet') +
(import 'rules.libsonnet') +
(import 'dashboards.libsonnet')
