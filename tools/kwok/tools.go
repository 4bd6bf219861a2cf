//go:build tools

// Package tools pins kwok, which keeps the real-cluster tier's fake nodes Ready and runs their pods.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
