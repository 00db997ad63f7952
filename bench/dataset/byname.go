package dataset

import (
	"context"
	"fmt"
)

// Scales sizes each dataset a benchmark may build by name.
type Scales struct {
	Pgbench int     // pgbench scale factor
	Mixed   float64 // 1 is about 1 GB
	FK      float64 // 1 is about 2.5 million rows, 600 MB
	Tables  int     // tables of the small-tables dataset
}

// ByName returns a dataset's title and builder, so that every benchmark
// takes the same names (pgbench, mixed, fk, small) on its -datasets flag.
func ByName(ctx context.Context, name, binDir string, s Scales) (string, func(conn string) error, error) {
	switch name {
	case "pgbench":
		return fmt.Sprintf("pgbench -i -s %d", s.Pgbench),
			func(conn string) error { return Pgbench(ctx, binDir, conn, s.Pgbench, 0) }, nil
	case "mixed":
		return fmt.Sprintf("mixed, scale %g", s.Mixed),
			func(conn string) error { return Mixed(ctx, conn, s.Mixed) }, nil
	case "fk":
		return fmt.Sprintf("FK-heavy, scale %g", s.FK),
			func(conn string) error { return FKHeavy(ctx, conn, s.FK) }, nil
	case "small":
		return fmt.Sprintf("%d small tables", s.Tables),
			func(conn string) error { return Small(ctx, conn, s.Tables) }, nil
	}
	return "", nil, fmt.Errorf("unknown dataset %q (want pgbench, mixed, fk or small)", name)
}
