package pg

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Conninfo renders the server and database of cfg as a libpq keyword/value
// string that holds no password: host, port, user, dbname and sslmode as
// pgx resolved them (PG* variables and defaults included). It is what
// another process, such as a subscription on another server, is given to
// reach the same database: that process has none of our environment, so
// nothing may be left for it to default.
func Conninfo(cfg *pgx.ConnConfig) string {
	kv := []string{
		"host=" + quoteValue(cfg.Host),
		fmt.Sprintf("port=%d", cfg.Port),
		"user=" + quoteValue(cfg.User),
		"dbname=" + quoteValue(cfg.Database),
		"sslmode=" + sslMode(&cfg.Config),
	}
	return strings.Join(kv, " ")
}
