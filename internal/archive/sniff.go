package archive

import (
	"bytes"
	"fmt"
)

// NotArchiveError is ErrNotArchive for input recognised as something
// else, pg_dump's output above all: a user handed pgsprint the file of
// another tool is told which tool reads it.
type NotArchiveError struct {
	// What the input is, e.g. "a pg_dump custom-format archive (-Fc)".
	What string
	// Tool reads it: "pg_restore", "psql", or "" when none does as is.
	Tool string
}

// Error names what the input is and the tool that reads it.
func (e *NotArchiveError) Error() string {
	switch e.Tool {
	case "":
		return fmt.Sprintf("not a pgsprint archive: it is %s", e.What)
	case "psql":
		return fmt.Sprintf("not a pgsprint archive: it is %s: run it with psql -f FILE", e.What)
	}
	return fmt.Sprintf("not a pgsprint archive: it is %s: restore it with %s", e.What, e.Tool)
}

// Is makes errors.Is(err, ErrNotArchive) true.
func (e *NotArchiveError) Is(target error) bool { return target == ErrNotArchive }

// pg_dump's archive header is "PGDMP", three version bytes, the sizes of
// an int and an offset, then the format: custom (1) in a -Fc file, and
// directory (5) in the toc.dat of a -Fd directory, which starts alike.
const (
	pgdmpFormat    = 10
	pgdmpDirectory = 5
)

// notArchive is the error for input that does not start with the archive
// magic; head is its first bytes (at least the fixed header's 16 when the
// input has them). pg_dump's formats are told apart by their own starts:
// "PGDMP" (custom), a tar header naming toc.dat (tar), the comment every
// plain script opens with; gzip and zstd by their magic numbers.
func notArchive(head []byte) error {
	switch {
	case bytes.HasPrefix(head, []byte("PGDMP")) && len(head) > pgdmpFormat && head[pgdmpFormat] == pgdmpDirectory:
		return &NotArchiveError{What: "the toc.dat of a pg_dump directory-format archive (pg_dump -Fd)", Tool: "pg_restore on its directory"}
	case bytes.HasPrefix(head, []byte("PGDMP")):
		return &NotArchiveError{What: "a pg_dump custom-format archive (pg_dump -Fc)", Tool: "pg_restore"}
	case bytes.HasPrefix(head, []byte("toc.dat\x00")):
		return &NotArchiveError{What: "a pg_dump tar-format archive (pg_dump -Ft)", Tool: "pg_restore"}
	case bytes.HasPrefix(head, []byte("--\n-- PostgreSQL")):
		return &NotArchiveError{What: "a plain SQL script from pg_dump or pg_dumpall", Tool: "psql"}
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return &NotArchiveError{What: "gzip-compressed data (pgsprint archives are compressed inside): decompress it and look again"}
	case bytes.HasPrefix(head, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return &NotArchiveError{What: "zstd-compressed data (pgsprint archives are compressed inside): decompress it and look again"}
	case len(head) == 0:
		return &NotArchiveError{What: "empty (0 bytes): the dump meant to write it wrote nothing (did it fail, or write elsewhere?)"}
	}
	return &NotArchiveError{What: fmt.Sprintf("a file of another kind: it begins with %q, a pgsprint archive with %q (check the name given to -f)", head[:min(len(head), len(headerMagic))], headerMagic)}
}
