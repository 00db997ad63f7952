package restore

import "github.com/pgsprint/pgsprint/internal/archive"

// LargeObjectSQL returns the statements that give a large object its
// owner, privileges and comment, as pg_dump would emit them: the plain-SQL
// script needs the same ones the restore runs.
func LargeObjectSQL(lo *archive.LargeObject, noOwner, noACL bool) []string {
	return largeObjectMetadata(lo, noOwner, noACL)
}
