//go:build tools

// Package tools pins helm, which scripts/release-check runs (lint and
// template of deploy/helm/felix) with `go run -modfile`. It is its own module
// so that Kubernetes' dependencies never enter felix's go.mod or goreleaser's.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
