// Package cli holds felix's client-side commands: admin (tenants,
// namespaces, streams, caches and tokens over the control plane's REST
// API), pub, sub, read, offset-for-time, cache (through the Go SDK),
// inspect segments (the segment log read-only, no server needed) and
// version.
//
// Usage contract:
//
//   - Commands(build) returns the commands; roles/serve adds them to its
//     urfave/cli app and must run os.Args through PermuteArgs first, so
//     flags may follow positional arguments. Everything after "--" stays
//     literal.
//   - Connection settings resolve per setting: flag, then its FELIX_*
//     variable, then <data-dir>/client.json (whose relative paths are
//     relative to the data directory). Tenant and namespace default to
//     "default". A command reports a missing setting it needs with the
//     flag, variable and file that could supply it (exit code 2).
//   - Every command that prints data takes -o text|json. Failures are
//     returned as cli.ExitCoder values whose message is ready to print:
//     "error: <message> (code <code>)" plus a "hint:" line for known
//     codes. Exit code 1 is a failure, 2 a usage error; cache get exits 1
//     with "not found" when the key is absent.
//   - delete commands ask for confirmation when standard input is a
//     terminal and otherwise require --yes.
//   - sub, read and offset-for-time take --shard and, on durable streams,
//     offsets: a start the broker cannot serve exits 1 with the requested
//     and nearest available offsets and a --from hint. sub and read end
//     cleanly (exit 0) on Ctrl-C.
//   - inspect segments never writes: it runs package log's Inspect over
//     every shard log under <storage>/streams/<tenant>/<ns>/<stream>/<shard>
//     (storage defaults to <data-dir>/log), and core/cachelog's Inspect
//     over every cache incarnation under <storage>/caches (its cache log,
//     index snapshot and counter log), and exits 2 when any log would be
//     refused, 1 when one cannot be read, 0 otherwise.
//   - The package never imports a server role; the admin commands speak
//     HTTP to the control plane (AdminClient), with a 10 s timeout per
//     request.
package cli
