package clone

import "github.com/pgsprint/pgsprint/internal/preflight"

// ErrSameDatabase is returned, before anything is read or written, when
// the source and the target are one database (preflight.DistinctDatabases).
var ErrSameDatabase = preflight.ErrSameDatabase
