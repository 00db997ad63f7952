// Package follow keeps a clone up to date after it is copied, through
// PostgreSQL's own logical replication, so that an upgrade's downtime is
// the catch-up of the last seconds instead of the whole copy.
//
// On the source, a publication and a logical replication slot (pgoutput)
// are created; the slot is created with an exported snapshot, which marks
// exactly the WAL position its changes start at. The clone reads the
// source in that snapshot, so every change it did not see is in the slot.
// When the copy is complete, a subscription on the target is created on
// the slot with copy_data = false and create_slot = false: the target's
// own apply worker then replays the changes, and pgsprint need not run.
// Finish waits until the target has applied the source's last change,
// copies the sequences, removes the subscription, slot and publication
// and compares both databases. Abort removes everything.
//
// What was created is found again by name: the slot and the subscription
// share one name and the publication has its own, both by default
// "pgsprint_" followed by the target database's name, and the
// subscription's comment names the source.
package follow

import (
	"fmt"
	"regexp"
	"strings"
)

// Names are the objects one follow creates: a publication and a slot on
// the source, and a subscription of the slot's name on the target.
type Names struct {
	Slot        string // replication slot on the source, and subscription on the target
	Publication string // publication on the source
}

// DefaultName is the name of the slot, subscription and publication when
// none is given: "pgsprint_" and the target database's name, reduced to
// what a slot name may hold (lower-case letters, digits, underscores; at
// most 63 bytes).
func DefaultName(targetDB string) string {
	var b strings.Builder
	b.WriteString("pgsprint_")
	for _, r := range strings.ToLower(targetDB) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > 63 {
		s = s[:63]
	}
	return s
}

// Resolve fills the empty names with DefaultName(targetDB) and checks
// that the slot name is one a slot may have.
func (n Names) Resolve(targetDB string) (Names, error) {
	if n.Slot == "" {
		n.Slot = DefaultName(targetDB)
	}
	if n.Publication == "" {
		n.Publication = DefaultName(targetDB)
	}
	if !slotName.MatchString(n.Slot) {
		return n, fmt.Errorf("slot name %q: a replication slot's name holds only lower-case letters, digits and underscores, at most 63", n.Slot)
	}
	if len(n.Publication) > 63 {
		return n, fmt.Errorf("publication name %q is longer than 63 bytes", n.Publication)
	}
	return n, nil
}

var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// commentPrefix starts the comment pgsprint puts on a subscription it
// created, so that status and abort can tell it from others.
const commentPrefix = "pgsprint clone --follow"

// partialMark ends the comment of a subscription whose follow covers a
// selection of the source's tables, so that finish compares those only.
const partialMark = "; partial (-t, -n, --filter)"
