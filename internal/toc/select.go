package toc

// isAttached reports whether entries of type t belong to another object
// and come with it when it is selected, as pg_dump -t brings a table's
// indexes, constraints, triggers, rules, policies, defaults, owned
// sequences, statistics, comments and privileges. Other objects that merely
// depend on a selected one (a view on a table, a function using a type)
// stay out, as in pg_dump.
func isAttached(t string) bool {
	switch t {
	case "INDEX", "CONSTRAINT", "FK CONSTRAINT", "CHECK CONSTRAINT", "DEFAULT", "TRIGGER", "RULE",
		"POLICY", "ROW SECURITY", "COMMENT", "ACL", "SECURITY LABEL", "SEQUENCE", "SEQUENCE OWNED BY",
		"INDEX ATTACH", "TABLE ATTACH", "STATISTICS", "STATISTICS DATA":
		return true
	}
	return false
}

// isBridging reports whether entries of type t tie two relations together:
// they are restored only if every relation they join is, since a foreign
// key to a table that is not there (or an ATTACH to a missing parent)
// cannot be created.
func isBridging(t string) bool {
	return t == "FK CONSTRAINT" || t == "TABLE ATTACH" || t == "INDEX ATTACH"
}

// isRelational reports whether a bridging entry's dependency of type t is
// one side it joins: a relation, or an index or constraint of one.
func isRelational(t string) bool {
	switch t {
	case "TABLE", "INDEX", "CONSTRAINT", "FK CONSTRAINT", "SEQUENCE", "VIEW", "MATERIALIZED VIEW",
		"FOREIGN TABLE", "INDEX ATTACH", "TABLE ATTACH":
		return true
	}
	return false
}

// Select chooses the entries a partial restore runs: include (the selected
// objects) and exclude (objects the user left out, which win over include)
// are dump IDs; each brings the entries attached to it. present names
// objects that are not restored but already exist in the target, with
// what is attached to them: a foreign key to one of them is restored. It
// returns the
// chosen IDs and, for the caller to report, the bridging entries of chosen
// objects left out because their other side is (pg_dump lists a
// constraint's own table as its first dependency; the choice itself does
// not rely on that).
func Select(entries []Entry, include, exclude, present map[int]bool) (chosen map[int]bool, dropped []Entry) {
	byID := make(map[int]*Entry, len(entries))
	for i := range entries {
		byID[entries[i].ID] = &entries[i]
	}
	// Bridging entries are not excluded with one side: they go through
	// the check below, which reports them.
	out := withAttached(entries, exclude, false)
	there := withAttached(entries, present, false)
	for {
		seed := map[int]bool{}
		for id := range include {
			if !out[id] {
				seed[id] = true
			}
		}
		chosen = withAttached(entries, seed, true)
		for id := range chosen {
			if out[id] {
				delete(chosen, id)
			}
		}
		// A bridging entry goes if a side it joins is not restored, and
		// what is attached to it goes with it on the next round.
		var gone []int
		for id := range chosen {
			e := byID[id]
			if e == nil || !isBridging(e.Type) {
				continue
			}
			for _, d := range e.Deps {
				if de := byID[d]; de != nil && isRelational(de.Type) && !chosen[d] && !there[d] {
					gone = append(gone, id)
					dropped = append(dropped, *e)
					break
				}
			}
		}
		if len(gone) == 0 {
			return chosen, dropped
		}
		for _, id := range gone {
			out[id] = true
		}
		out = withAttached(entries, out, false)
	}
}

// withAttached returns seed plus, transitively, every entry of an attached
// type (bridging ones only if bridges) that depends on an entry in it.
func withAttached(entries []Entry, seed map[int]bool, bridges bool) map[int]bool {
	set := make(map[int]bool, len(seed))
	for id := range seed {
		set[id] = true
	}
	for grew := true; grew; {
		grew = false
		for _, e := range entries {
			if set[e.ID] || !isAttached(e.Type) || (!bridges && isBridging(e.Type)) {
				continue
			}
			for _, d := range e.Deps {
				if set[d] {
					set[e.ID] = true
					grew = true
					break
				}
			}
		}
	}
	return set
}
