//go:build tools

// Package tools pins goreleaser, the release builder that
// scripts/release-check runs with `go run -modfile`. It is its own module so
// that goreleaser's many dependencies never enter felix's go.mod.
package tools

import _ "github.com/goreleaser/goreleaser/v2"
