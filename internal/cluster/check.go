package cluster

import (
	"fmt"

	"github.com/pgsprint/pgsprint/internal/journal"
)

// This file holds the checks a whole-server run makes before it creates
// anything, which preflight's checklists call too, so that both give the
// same verdict in the same words.

// Journal decides what the cluster journal found on the target
// (nil: none) means for a whole-server run (verb, e.g. "restore --all")
// of the archive or source (of) whose identity is id: the journal to
// finish (nil: the run starts afresh), or why the run is refused.
func Journal(found *journal.Cluster, id string, clean, resume bool, verb, of string) (*journal.Cluster, error) {
	switch {
	case found != nil && found.Archive != id:
		if !clean || resume {
			return nil, fmt.Errorf("the target server holds an unfinished whole-server copy of another %s (%s): finish it with that %s and --resume, or start over with --clean", of, found.Archive, of)
		}
		return nil, nil
	case found != nil && !resume:
		if !clean {
			return nil, fmt.Errorf("the target server holds an unfinished %s of this %s: finish it with --resume, or start over with --clean", verb, of)
		}
		return nil, nil
	}
	return found, nil
}

// ExistingDatabase is the refusal of a whole-server run (verb) that would
// create database name, which the target already has.
func ExistingDatabase(name, verb string) error {
	return fmt.Errorf("the target server already has a database %q: %s creates each of the source's databases; use --clean to replace them, or copy the others one by one", name, verb)
}
