// Command monitoringcheck reads Kubernetes objects (YAML documents on stdin) and decodes every
// monitoring.coreos.com/v1 ServiceMonitor and PrometheusRule into the Prometheus Operator's own API types,
// refusing unknown fields: a field name the operator does not know, or one at the wrong place, fails.
// It prints one line per object checked and exits 1 on the first object that does not decode.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	data, err := io.ReadAll(bufio.NewReader(os.Stdin))
	if err != nil {
		fmt.Fprintln(os.Stderr, "monitoringcheck:", err)
		os.Exit(2)
	}
	checked := 0
	for _, doc := range strings.Split(string(data), "\n---") {
		raw, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			fmt.Fprintln(os.Stderr, "monitoringcheck: not YAML:", err)
			os.Exit(1)
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &head); err != nil || head.APIVersion != "monitoring.coreos.com/v1" {
			continue
		}
		var target any
		switch head.Kind {
		case "ServiceMonitor":
			target = &monitoringv1.ServiceMonitor{}
		case "PrometheusRule":
			target = &monitoringv1.PrometheusRule{}
		default:
			fmt.Fprintf(os.Stderr, "monitoringcheck: %s/%s: kind not checked\n", head.Kind, head.Metadata.Name)
			os.Exit(1)
		}
		decoder := json.NewDecoder(bytes.NewReader(raw))
		decoder.DisallowUnknownFields()
		if err := decoder.Decode(target); err != nil {
			fmt.Fprintf(os.Stderr, "monitoringcheck: %s/%s: %v\n", head.Kind, head.Metadata.Name, err)
			os.Exit(1)
		}
		fmt.Printf("%s/%s ok\n", head.Kind, head.Metadata.Name)
		checked++
	}
	fmt.Printf("%d objects checked\n", checked)
}
