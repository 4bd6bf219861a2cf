//go:build tools

// Package tools pins the kubelet the guest tier runs beside the agent (tools/build-kubelet.sh).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kubelet"
)
