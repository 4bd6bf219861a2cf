//go:build tools

// Package tools pins Prometheus, whose server scrapes the components and evaluates the chart's alerts in
// the real-cluster tier (cmd/prometheus) and whose promtool checks and unit-tests the chart's alerting rules
// (promtool test rules) and parses every expression of the chart's dashboard, and the Prometheus Operator's
// API types, which monitoringcheck decodes the chart's ServiceMonitors and PrometheusRule into.
package tools

import (
	_ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
