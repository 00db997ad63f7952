package pg

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Server describes the PostgreSQL server one connection reaches (its
// version, whether it is a standby) and that connection's database: what
// a run must know of the server it talks to to choose its SQL. It is not
// the database cluster, which "cluster" names (internal/cluster,
// journal.Cluster, Manifest.IsCluster).
type Server struct {
	Version    string // server_version, e.g. "15.18 (Debian ...)"
	VersionNum int    // server_version_num, e.g. 150018
	Database   string
	Encoding   string
	// InRecovery is true on a hot standby: unlogged tables cannot be read
	// there and ANALYZE cannot run, so planning must rely on the
	// statistics replicated from the primary.
	InRecovery bool
}

// Major is the major version (15 for 150018).
func (s Server) Major() int { return s.VersionNum / 10000 }

// HasTIDRangeScan reports whether `ctid >= '(a,0)' AND ctid < '(b,0)'` is
// executed as a TID Range Scan (PostgreSQL 14 and later). On older servers
// such a predicate reads the whole table, so chunking must fall back to key
// ranges or whole tables, and say so.
func (s Server) HasTIDRangeScan() bool { return s.VersionNum >= 140000 }

// HasJIT says whether the server has the jit setting (PostgreSQL 11+),
// which a SET of it needs.
func (s Server) HasJIT() bool { return s.VersionNum >= 110000 }

// ReadServer reads version, database name and encoding.
func ReadServer(ctx context.Context, conn *pgx.Conn) (Server, error) {
	var s Server
	err := conn.QueryRow(ctx, `SELECT current_setting('server_version'),
		current_setting('server_version_num')::int, current_database(),
		current_setting('server_encoding'), pg_catalog.pg_is_in_recovery()`).Scan(&s.Version, &s.VersionNum, &s.Database, &s.Encoding, &s.InRecovery)
	if err != nil {
		return s, fmt.Errorf("read server version: %w", err)
	}
	return s, nil
}

// TableInfo is a relation whose rows pg_dump would dump as table data.
type TableInfo struct {
	OID       uint32
	Schema    string
	Name      string
	Columns   []string
	Pages     int64
	Rows      int64
	SizeBytes int64
	// Where is set for extension configuration tables: pg_dump dumps only
	// the rows matching the extension's filter condition.
	Where string
	// BuiltinTypes says every column has a type of PostgreSQL's own
	// catalog (OID below 10000, fixed by the release, not by initdb or
	// CREATE TYPE), whose binary COPY form, and the type OIDs that arrays
	// of it carry, are the same in every database of one major version:
	// such a table may be cloned in binary.
	BuiltinTypes bool
}

// Qualified returns the quoted schema.name.
func (t TableInfo) Qualified() string { return Qualified(t.Schema, t.Name) }

// notExtensionMember excludes objects that belong to an extension; the
// extension's own script recreates them.
const notExtensionMember = `NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
	WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')`

const userSchema = `n.nspname NOT IN ('pg_catalog', 'information_schema')
	AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp\_%'`

// ListTables returns every table with data to dump: plain tables, leaf
// partitions, inheritance children and unlogged tables (COPY of a parent
// never includes its children's rows), plus extension configuration tables.
// Views, foreign tables and partitioned parents hold no rows of their own.
// On a standby, unlogged tables are left out: their data cannot be read
// there (pg_dump skips it too).
func ListTables(ctx context.Context, conn *pgx.Conn, srv Server) ([]TableInfo, error) {
	generated := ""
	if srv.VersionNum >= 120000 {
		generated = "AND a.attgenerated = ''"
	}
	persistence := "c.relpersistence <> 't'"
	if srv.InRecovery {
		persistence = "c.relpersistence = 'p'"
	}
	// pg_relation_size is NULL for a table the snapshot still lists but
	// another session dropped since (it waits for the DROP's lock first).
	// It opens the table (a lock, a relation cache entry): at 10,000
	// tables, ordering by a second call doubled the query's cost.
	q := `SELECT c.oid, n.nspname, c.relname, c.relpages::int8, greatest(c.reltuples, 0)::int8,
		coalesce(pg_catalog.pg_relation_size(c.oid), -1),
		ARRAY(SELECT a.attname::text FROM pg_catalog.pg_attribute a
			WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped ` + generated + `
			ORDER BY a.attnum),
		coalesce((SELECT x.extcondition[array_position(x.extconfig, c.oid)]
			FROM pg_catalog.pg_extension x WHERE c.oid = ANY (x.extconfig)), ''),
		NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
			WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.atttypid >= 10000)
	FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relkind = 'r' AND ` + persistence + ` AND ` + userSchema + `
	AND (` + notExtensionMember + `
		OR EXISTS (SELECT 1 FROM pg_catalog.pg_extension x WHERE c.oid = ANY (x.extconfig)))
	ORDER BY 6 DESC, n.nspname, c.relname`
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TableInfo, error) {
		var t TableInfo
		err := r.Scan(&t.OID, &t.Schema, &t.Name, &t.Pages, &t.Rows, &t.SizeBytes, &t.Columns, &t.Where, &t.BuiltinTypes)
		t.Where = extensionFilter(t.Where)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	for _, t := range tables {
		if t.SizeBytes < 0 {
			// Its rows are gone, yet the snapshot holds the table: no
			// consistent copy can leave it out (pg_dump fails too).
			return nil, fmt.Errorf("table %s was dropped by another session while the tables were being listed: run again", t.Qualified())
		}
	}
	return tables, nil
}

// extensionFilter turns pg_extension_config_dump's "WHERE ..." condition
// into a bare predicate.
func extensionFilter(cond string) string {
	cond = strings.TrimSpace(cond)
	if len(cond) >= 5 && strings.EqualFold(cond[:5], "WHERE") {
		cond = strings.TrimSpace(cond[5:])
	}
	return cond
}

// LockTables takes ACCESS SHARE locks, as pg_dump does, so that no table can
// be dropped, truncated or altered while the transaction lasts. Allowed on
// a standby.
func LockTables(ctx context.Context, conn *pgx.Conn, tables []TableInfo) error {
	const batch = 500
	for i := 0; i < len(tables); i += batch {
		names := make([]string, 0, batch)
		for _, t := range tables[i:min(i+batch, len(tables))] {
			names = append(names, t.Qualified())
		}
		if _, err := conn.Exec(ctx, "LOCK TABLE "+strings.Join(names, ", ")+" IN ACCESS SHARE MODE"); err != nil {
			return fmt.Errorf("lock tables: %w", ExplainLost(err))
		}
	}
	return nil
}

// LimitLockWait makes conn give up on a lock after wait (any value SET
// lock_timeout takes, e.g. "30s"), as pg_dump --lock-wait-timeout does
// while it lists and locks tables: rather than queue behind a pending
// ALTER or DROP, which itself queues behind whoever holds the table.
// Listing takes locks too (pg_relation_size does). The returned function
// restores the setting and turns a timeout in err into a message that
// says what happened. An empty wait changes nothing.
func LimitLockWait(ctx context.Context, conn *pgx.Conn, wait string) (done func(err error) error, err error) {
	if wait == "" {
		return func(err error) error { return err }, nil
	}
	if _, err := conn.Exec(ctx, "SET lock_timeout = "+Literal(wait)); err != nil {
		return nil, fmt.Errorf("--lock-wait-timeout %s: %w", wait, err)
	}
	return func(err error) error {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
			return fmt.Errorf("could not lock the tables to read within --lock-wait-timeout (%s): another session holds or is waiting for a conflicting lock (an ALTER, DROP, TRUNCATE or VACUUM FULL)", wait)
		}
		if err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "RESET lock_timeout"); err != nil {
			return fmt.Errorf("reset lock_timeout: %w", err)
		}
		return nil
	}, nil
}

// SequenceInfo is a sequence's state as the snapshot's transaction reads it.
// Sequences are not transactional: like pg_dump, this reads the latest value.
type SequenceInfo struct {
	Schema    string
	Name      string
	LastValue int64
	IsCalled  bool
}

// ListSequences reads every user sequence, including identity and serial ones.
func ListSequences(ctx context.Context, conn *pgx.Conn) ([]SequenceInfo, error) {
	rows, err := conn.Query(ctx, `SELECT n.nspname, c.relname
	FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relkind = 'S' AND `+userSchema+` AND `+notExtensionMember+`
	ORDER BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("list sequences: %w", err)
	}
	seqs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SequenceInfo, error) {
		var s SequenceInfo
		return s, r.Scan(&s.Schema, &s.Name)
	})
	if err != nil {
		return nil, fmt.Errorf("list sequences: %w", err)
	}
	for i := range seqs {
		s := &seqs[i]
		q := "SELECT last_value, is_called FROM " + Qualified(s.Schema, s.Name)
		if err := conn.QueryRow(ctx, q).Scan(&s.LastValue, &s.IsCalled); err != nil {
			return nil, fmt.Errorf("read sequence %s: %w", Qualified(s.Schema, s.Name), err)
		}
	}
	return seqs, nil
}

// Object is a schema or relation and its OID. Schema is empty for a
// schema; Kind is pg_class.relkind for a relation.
type Object struct {
	OID    uint32
	Schema string
	Name   string
	Kind   string
}

// ListObjects returns the user schemas and the relations in them that
// pg_dump defines (tables, partitioned tables, sequences, views,
// materialized views, foreign tables), extension members excluded.
func ListObjects(ctx context.Context, conn *pgx.Conn) (schemas, relations []Object, err error) {
	rows, err := conn.Query(ctx, `SELECT n.oid, '', n.nspname::text, '' FROM pg_catalog.pg_namespace n WHERE `+userSchema+`
	UNION ALL
	SELECT c.oid, n.nspname::text, c.relname::text, c.relkind::text
	FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relkind IN ('r', 'p', 'S', 'v', 'm', 'f') AND `+userSchema+` AND `+notExtensionMember+`
	ORDER BY 2, 3`)
	if err != nil {
		return nil, nil, fmt.Errorf("list schemas and relations: %w", err)
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Object, error) {
		var o Object
		return o, r.Scan(&o.OID, &o.Schema, &o.Name, &o.Kind)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list schemas and relations: %w", err)
	}
	for _, o := range all {
		if o.Kind == "" {
			schemas = append(schemas, o)
		} else {
			relations = append(relations, o)
		}
	}
	return schemas, relations, nil
}

// ListMatviews returns populated materialized views; pg_dump's schema-only
// output creates them empty, so the restore refreshes these.
func ListMatviews(ctx context.Context, conn *pgx.Conn) ([][2]string, error) {
	rows, err := conn.Query(ctx, `SELECT n.nspname, c.relname
	FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relkind = 'm' AND c.relispopulated AND `+userSchema+` AND `+notExtensionMember+`
	ORDER BY c.oid`)
	if err != nil {
		return nil, fmt.Errorf("list materialized views: %w", err)
	}
	mvs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var m [2]string
		return m, r.Scan(&m[0], &m[1])
	})
	if err != nil {
		return nil, fmt.Errorf("list materialized views: %w", err)
	}
	return mvs, nil
}

// firstNormalObjectID is FirstNormalObjectId: every object initdb creates
// (the catalogs, information_schema, plpgsql) has a lower OID, every object
// created later a higher one.
const firstNormalObjectID = 16384

// userObjectsSQL lists the objects of the current database that someone
// created after initdb, as (classid, objid): schemas but public, relations
// of every kind but indexes and TOAST tables (they come with their table),
// types but tables' row types, arrays and multiranges, functions,
// procedures, aggregates, operators, collations, text search objects,
// extensions, languages, casts, foreign data wrappers and servers,
// publications, subscriptions, event triggers, access methods, transforms
// and large objects (whatever their OID: lo_create chooses it). Objects of extensions and parts of other objects
// (pg_depend 'e' and 'i') are left out, as are other sessions' temporary
// schemas.
const userObjectsSQL = `WITH o (classid, objid, nsp) AS (
	SELECT 'pg_catalog.pg_namespace'::pg_catalog.regclass, oid, oid FROM pg_catalog.pg_namespace WHERE nspname <> 'public'
	UNION ALL SELECT 'pg_catalog.pg_class'::pg_catalog.regclass, oid, relnamespace FROM pg_catalog.pg_class
		WHERE relkind NOT IN ('i', 'I', 't') AND relpersistence <> 't'
	UNION ALL SELECT 'pg_catalog.pg_type'::pg_catalog.regclass, oid, typnamespace FROM pg_catalog.pg_type t
		WHERE (typrelid = 0 OR typtype = 'c' AND (SELECT relkind FROM pg_catalog.pg_class WHERE oid = typrelid) = 'c')
		AND typtype <> 'm' AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_type e WHERE e.typarray = t.oid)
	UNION ALL SELECT 'pg_catalog.pg_proc'::pg_catalog.regclass, oid, pronamespace FROM pg_catalog.pg_proc
	UNION ALL SELECT 'pg_catalog.pg_operator'::pg_catalog.regclass, oid, oprnamespace FROM pg_catalog.pg_operator
	UNION ALL SELECT 'pg_catalog.pg_opclass'::pg_catalog.regclass, oid, opcnamespace FROM pg_catalog.pg_opclass
	UNION ALL SELECT 'pg_catalog.pg_opfamily'::pg_catalog.regclass, oid, opfnamespace FROM pg_catalog.pg_opfamily
	UNION ALL SELECT 'pg_catalog.pg_collation'::pg_catalog.regclass, oid, collnamespace FROM pg_catalog.pg_collation
	UNION ALL SELECT 'pg_catalog.pg_conversion'::pg_catalog.regclass, oid, connamespace FROM pg_catalog.pg_conversion
	UNION ALL SELECT 'pg_catalog.pg_ts_config'::pg_catalog.regclass, oid, cfgnamespace FROM pg_catalog.pg_ts_config
	UNION ALL SELECT 'pg_catalog.pg_ts_dict'::pg_catalog.regclass, oid, dictnamespace FROM pg_catalog.pg_ts_dict
	UNION ALL SELECT 'pg_catalog.pg_ts_parser'::pg_catalog.regclass, oid, prsnamespace FROM pg_catalog.pg_ts_parser
	UNION ALL SELECT 'pg_catalog.pg_ts_template'::pg_catalog.regclass, oid, tmplnamespace FROM pg_catalog.pg_ts_template
	UNION ALL SELECT 'pg_catalog.pg_extension'::pg_catalog.regclass, oid, NULL FROM pg_catalog.pg_extension
	UNION ALL SELECT 'pg_catalog.pg_language'::pg_catalog.regclass, oid, NULL FROM pg_catalog.pg_language
	UNION ALL SELECT 'pg_catalog.pg_cast'::pg_catalog.regclass, oid, NULL FROM pg_catalog.pg_cast
	UNION ALL SELECT 'pg_catalog.pg_foreign_data_wrapper'::pg_catalog.regclass, oid, NULL FROM pg_catalog.pg_foreign_data_wrapper
	UNION ALL SELECT 'pg_catalog.pg_foreign_server'::pg_catalog.regclass, oid, NULL FROM pg_catalog.pg_foreign_server
	UNION ALL SELECT 'pg_catalog.pg_publication'::pg_catalog.regclass, oid, NULL FROM pg_catalog.pg_publication
	UNION ALL SELECT 'pg_catalog.pg_subscription'::pg_catalog.regclass, oid, NULL FROM pg_catalog.pg_subscription
		WHERE subdbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
	UNION ALL SELECT 'pg_catalog.pg_event_trigger'::pg_catalog.regclass, oid, NULL FROM pg_catalog.pg_event_trigger
	UNION ALL SELECT 'pg_catalog.pg_am'::pg_catalog.regclass, oid, NULL FROM pg_catalog.pg_am
	UNION ALL SELECT 'pg_catalog.pg_transform'::pg_catalog.regclass, oid, NULL FROM pg_catalog.pg_transform
	UNION ALL SELECT 'pg_catalog.pg_largeobject'::pg_catalog.regclass, oid, NULL FROM pg_catalog.pg_largeobject_metadata
), f AS (
	SELECT o.classid, o.objid FROM o LEFT JOIN pg_catalog.pg_namespace n ON n.oid = o.nsp
	WHERE (o.objid >= $1 OR o.classid = 'pg_catalog.pg_largeobject'::pg_catalog.regclass) AND (o.nsp IS NULL OR (` + userSchema + `))
	AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
		WHERE d.classid = o.classid AND d.objid = o.objid AND d.deptype IN ('e', 'i'))
)
SELECT (SELECT pg_catalog.count(*) FROM f), i.type || ' ' || i.identity
FROM (SELECT * FROM f ORDER BY objid LIMIT $2) l, pg_catalog.pg_identify_object(l.classid, l.objid, 0) i
ORDER BY l.objid`

// UserObjects counts the objects of conn's database that were created
// after initdb (see userObjectsSQL; the public schema and plpgsql, which
// every database has, are not among them) and describes the first limit
// of them ("sequence public.t1_id_seq"), so that a restore can refuse a
// target that holds anything at all, naming what is in the way.
func UserObjects(ctx context.Context, conn *pgx.Conn, limit int) (int, []string, error) {
	rows, err := conn.Query(ctx, userObjectsSQL, firstNormalObjectID, limit)
	if err != nil {
		return 0, nil, fmt.Errorf("inspect target: %w", err)
	}
	var n int
	var names []string
	var name string
	if _, err := pgx.ForEachRow(rows, []any{&n, &name}, func() error { names = append(names, name); return nil }); err != nil {
		return 0, nil, fmt.Errorf("inspect target: %w", err)
	}
	return n, names, nil
}

// QueryStrings runs a query of one text column and returns its values in
// order: many catalog reads want a list of names and nothing else, and
// this spares each the Query, CollectRows and two error checks.
func QueryStrings(ctx context.Context, conn interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, sql string, args ...any) ([]string, error) {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
