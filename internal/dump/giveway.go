package dump

// startsBesideSchema says whether data worker i of jobs starts as soon as
// the dump does, beside the schema pass, or waits for it to end. With two
// jobs or more, one worker waits: pg_dump --schema-only, whose end the
// dump cannot finish before, keeps about one core busy (itself and its
// backend, taking turns), and with every worker beside it a dump of
// thousands of small tables, whose data takes less time than the schema,
// ran pg_dump on a share of a core instead of a whole one (10,000 tables
// on 2 cores: 1.24x pg_dump --schema-only alone). The other workers read
// the data meanwhile; the waiting one joins them once the schema is
// written, which for a dump of few tables is within a second.
func startsBesideSchema(i, jobs int) bool {
	return jobs < 2 || i > 0
}
