// Package schedule lays out a restore's post-data as tasks of its task
// graph (internal/taskgraph, which runs them): it reads pg_dump's
// statements from pg_restore's script (shapes.go: CREATE INDEX, ADD
// CONSTRAINT, foreign keys, ATTACH PARTITION), turns each entry into tasks
// with the table locks they take and what they wait for (PostData), adds
// an ANALYZE per loaded table, leaves to pg_restore what it does not
// recognise, and fuses a small table's tasks into its load (fuse.go).
package schedule

import "github.com/pgsprint/pgsprint/internal/taskgraph"

// Graph is the restore's task graph: taskgraph's runner, each load
// carrying the post-data tasks fused into it (PostDataOptions.FuseBytes).
type Graph = taskgraph.Graph[Fused]

// Task is one task of a Graph.
type Task = taskgraph.Task[Fused]
