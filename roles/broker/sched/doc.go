// Package sched is the broker's publish scheduler: one process-wide
// bounded queue drained by a fixed set of executor goroutines.
//
// Lanes. Every Job names a lane (a stream shard, or the publishes
// forwarded to a stream shard another broker owns). A lane runs one job at a
// time, in the order its jobs were enqueued; different lanes run side by
// side. A lane is busy from the moment an executor takes its head job
// until Run returns; later jobs of that lane wait in the lane's FIFO.
//
// Fairness. Tenants take turns by deficit round robin weighted by bytes.
// Tenants with queued jobs sit in a ring in the order they arrived. On its
// turn a tenant with a runnable lane gains Quantum bytes of credit and
// runs jobs (the heads of its runnable lanes, oldest first) while its
// credit covers their Bytes; what is left over carries to its next turn.
// A tenant whose queued jobs all sit behind busy lanes is passed over
// without credit but keeps its place in the ring; a tenant with nothing
// runnable at the end of its turn loses its leftover credit, so idle
// time never turns into a later burst. A job costs max(Bytes, 1).
//
// Admission. Each tenant may always hold QueueDepth queued jobs (its
// guaranteed slots) while the total is below MaxQueued. Beyond its own
// slots a tenant borrows from a shared remainder of MaxQueued/2 slots,
// summed over all tenants; when that is used up too, TryEnqueue refuses
// with ErrQueueFull. A flooding tenant is therefore refused while at
// least MaxQueued/2 slots stay available to the guaranteed slots of
// everyone else. Running jobs do not count as queued.
//
// Overflow policy: TryEnqueue never blocks and refuses with ErrQueueFull;
// Enqueue waits for room until its context ends. Close stops intake
// (ErrClosed), runs every job already queued, then stops the executors
// and waits for them. Run must not call Close.
//
// Concurrency: one mutex guards all scheduler state and is never held
// while a job runs; executors sleep on a condition variable and waiting
// Enqueue calls on a channel that is closed when a queued job leaves.
package sched
