package dump

// giveWayTables is the table count from which one data worker gives way
// to the schema pass: below it pg_dump --schema-only ends within a second
// or so, and a worker idle that long would cost a dump of a few large
// tables more than it saves.
const giveWayTables = 1000

// longSchema reports whether the sessions' schema pass is long enough
// (giveWayTables tables or more in all) for one data worker to give way
// to it.
func longSchema(list []*Session) bool {
	n := 0
	for _, s := range list {
		n += len(s.Manifest.Tables)
	}
	return n >= giveWayTables
}

// startsBesideSchema says whether data worker i of jobs starts as soon as
// the dump does, beside the schema pass, or waits for it to end. With two
// jobs or more and a long schema pass (giveWay), one worker waits: pg_dump
// --schema-only, whose end the dump cannot finish before, keeps about one
// core busy (itself and its backend, taking turns), and with every worker
// beside it a dump of thousands of small tables, whose data takes less
// time than the schema, ran pg_dump on a share of a core instead of a
// whole one (10,000 tables on 2 cores: 1.24x pg_dump --schema-only
// alone). The other workers read the data meanwhile; the waiting one
// joins them once the schema is written.
func startsBesideSchema(i, jobs int, giveWay bool) bool {
	return !giveWay || jobs < 2 || i > 0
}
