// Package e2e holds black-box tests that build the real felix binary, run it
// as separate processes in temporary directories on loopback, and drive it
// through its command line and the Go SDK. Set FELIX_BIN to test a binary
// built elsewhere; otherwise the tests build one once per run.
package e2e
