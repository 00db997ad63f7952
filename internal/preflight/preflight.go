// Package preflight holds the checklists that refuse a doomed dump, restore
// or clone before it starts: `pgsprint preflight` prints one, built from
// the stages' own checks, without changing anything.
//
// Each check that a command also runs up front is one function, the
// stage's own, called by the stage at its start and by the checklists
// here (Dump, Restore, Clone, DumpAll, CloneAll): dump's (CanRead,
// LockSlots, DiskSpace), restore's (Empty, Journal, DataTargets,
// Encoding, CanCreate, RestoreTools), pg.ConnectionRoom, clone's
// DistinctDatabases, follow's requirements (ReadSourceSettings,
// ReadTargetSettings, Keyless) and, for a whole-server run, cluster's
// Journal and ExistingDatabase. No stage imports preflight. So a
// preflight that passes and the run it vouches for read the same numbers
// the same way. Checks that need something to exist (a publication and a
// subscription for the target's reach of the source, a temporary file)
// are left to the run: a preflight only reads.
package preflight

import (
	"fmt"
	"io"
	"strings"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/verdict"
)

// check is a verdict from a check's error: ✓ with detail when err is nil.
func check(name string, err error, detail string) verdict.Item {
	if err != nil {
		return verdict.Fail(name, err)
	}
	return verdict.Pass(name, detail)
}

// Checklist is the outcome of a preflight: its items in the order run.
type Checklist struct {
	Items []verdict.Item
	// Connect is the first connection failure, when a server could not
	// be reached: the command exits as any other that cannot connect.
	Connect error
	// Usage, when set, is a refusal the run would give as a usage error
	// (ErrUsage): the command exits as the run would.
	Usage error
}

func (c *Checklist) add(items ...verdict.Item) { c.Items = append(c.Items, items...) }

// OK reports whether the run would start: no item failed.
func (c *Checklist) OK() bool {
	return verdict.Failed(c.Items) == nil
}

// Print writes the checklist, one line per item: ✓ passed, ! may fail,
// ✗ failed (with the fix).
func (c *Checklist) Print(w io.Writer) error {
	var b strings.Builder
	for _, it := range c.Items {
		switch {
		case it.Err != nil:
			fmt.Fprintf(&b, "✗ %s: %s\n", it.Name, pg.OneLine(it.Err.Error()))
		case it.Warning:
			fmt.Fprintf(&b, "! %s: %s\n", it.Name, pg.OneLine(it.Detail))
		default:
			fmt.Fprintf(&b, "✓ %s: %s\n", it.Name, pg.OneLine(it.Detail))
		}
	}
	failed := 0
	for _, it := range c.Items {
		if it.Err != nil {
			failed++
		}
	}
	if failed == 0 {
		b.WriteString("ready: the run would start\n")
	} else {
		fmt.Fprintf(&b, "not ready: %d of %d checks failed\n", failed, len(c.Items))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
