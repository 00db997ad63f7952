package follow

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// minSourceMajor is the oldest source followed: 13 publishes partitioned
// tables and is the oldest major pgsprint is tested with.
const minSourceMajor = 13

// requirements is what the source must offer a follow.
type requirements struct {
	versionNum             int
	walLevel               string
	maxSlots, slots        int
	maxSenders, senders    int
	superuser, replication bool
	createOnDB             bool
	slotExists, pubExists  bool
}

func readRequirements(ctx context.Context, conn *pgx.Conn, n Names) (requirements, error) {
	var r requirements
	err := conn.QueryRow(ctx, `SELECT pg_catalog.current_setting('server_version_num')::int,
		pg_catalog.current_setting('wal_level'),
		pg_catalog.current_setting('max_replication_slots')::int,
		(SELECT count(*) FROM pg_catalog.pg_replication_slots)::int,
		pg_catalog.current_setting('max_wal_senders')::int,
		(SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE backend_type = 'walsender')::int,
		r.rolsuper, r.rolreplication,
		pg_catalog.has_database_privilege(pg_catalog.current_database(), 'CREATE'),
		EXISTS (SELECT 1 FROM pg_catalog.pg_replication_slots WHERE slot_name = $1),
		EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = $2)
		FROM pg_catalog.pg_roles r WHERE r.rolname = current_user`, n.Slot, n.Publication).Scan(
		&r.versionNum, &r.walLevel, &r.maxSlots, &r.slots, &r.maxSenders, &r.senders,
		&r.superuser, &r.replication, &r.createOnDB, &r.slotExists, &r.pubExists)
	if err != nil {
		return r, fmt.Errorf("read the source's replication settings: %w", err)
	}
	return r, nil
}

// check returns one line per unmet requirement.
func (r requirements) check(n Names) error {
	var errs []error
	if r.versionNum < minSourceMajor*10000 {
		return fmt.Errorf("source is PostgreSQL %d.%d: --follow needs %d or later", r.versionNum/10000, r.versionNum%10000/100, minSourceMajor)
	}
	if r.walLevel != "logical" {
		errs = append(errs, fmt.Errorf("source has wal_level = %s, --follow needs logical: run ALTER SYSTEM SET wal_level = logical on the source and restart it", r.walLevel))
	}
	if r.slots >= r.maxSlots {
		errs = append(errs, fmt.Errorf("source has no free replication slot (%d of max_replication_slots = %d in use): raise max_replication_slots (restart) or drop an unused slot", r.slots, r.maxSlots))
	}
	if r.senders >= r.maxSenders {
		errs = append(errs, fmt.Errorf("source has no free WAL sender (%d of max_wal_senders = %d in use): raise max_wal_senders (restart)", r.senders, r.maxSenders))
	}
	if !r.superuser && !r.replication {
		errs = append(errs, errors.New("the source role has neither REPLICATION nor superuser: ALTER ROLE ... REPLICATION, or connect as a superuser"))
	}
	if !r.superuser && !r.createOnDB {
		errs = append(errs, errors.New("the source role may not create a publication: it needs CREATE on the source database (and to own the tables), or superuser"))
	}
	if r.slotExists {
		errs = append(errs, fmt.Errorf("source already has a replication slot %s: an earlier clone --follow? (pgsprint follow abort removes it) or choose --slot", n.Slot))
	}
	if r.pubExists {
		errs = append(errs, fmt.Errorf("source already has a publication %s: an earlier clone --follow? (pgsprint follow abort removes it) or choose --publication", n.Publication))
	}
	return errors.Join(errs...)
}

// checkTarget checks that the target may create the subscription.
func checkTarget(ctx context.Context, cfg *pgx.ConnConfig, n Names) error {
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var versionNum int
	var super, may, exists bool
	err = conn.QueryRow(ctx, `SELECT pg_catalog.current_setting('server_version_num')::int, r.rolsuper,
		pg_catalog.current_setting('server_version_num')::int >= 160000
			AND pg_catalog.has_database_privilege(pg_catalog.current_database(), 'CREATE')
			AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles g WHERE g.rolname = 'pg_create_subscription'
				AND pg_catalog.pg_has_role(current_user, g.oid, 'MEMBER')),
		EXISTS (SELECT 1 FROM pg_catalog.pg_subscription WHERE subname = $1)
		FROM pg_catalog.pg_roles r WHERE r.rolname = current_user`, n.Slot).Scan(&versionNum, &super, &may, &exists)
	if err != nil {
		return fmt.Errorf("read the target's privileges: %w", err)
	}
	var errs []error
	if !super && !may {
		if versionNum >= 160000 {
			errs = append(errs, errors.New("the target role may not create a subscription: it needs superuser, or pg_create_subscription and CREATE on the target database"))
		} else {
			errs = append(errs, errors.New("the target role may not create a subscription: before PostgreSQL 16 that needs a superuser"))
		}
	}
	if exists {
		errs = append(errs, fmt.Errorf("target already has a subscription %s: an earlier clone --follow? (pgsprint follow abort removes it) or choose --slot", n.Slot))
	}
	return errors.Join(errs...)
}

// table is a source table the clone copies rows of.
type table struct {
	name    string // quoted schema.name
	logged  bool
	keyless bool // a table with rows of its own, no primary key and no replica identity
	full    bool // REPLICA IDENTITY FULL already
}

// listTables lists the tables (plain, partitioned, partitions) whose rows
// the clone copies: those the filter selects, not extension members, not
// --exclude-table-data.
func listTables(ctx context.Context, conn *pgx.Conn, f filter.Options) ([]table, error) {
	selected, err := f.Selected("c", "n")
	if err != nil {
		return nil, err
	}
	noData, err := f.DataExcluded("c", "n")
	if err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, `SELECT pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname),
		c.relpersistence = 'p',
		c.relkind = 'r' AND (c.relreplident = 'n' OR c.relreplident = 'd' AND NOT EXISTS (
			SELECT 1 FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)),
		c.relreplident = 'f'
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND c.relpersistence <> 't'
		AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%'
		AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
			WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = c.oid AND d.deptype = 'e')
		AND (`+selected+`) AND NOT (`+noData+`)
		ORDER BY n.nspname, c.relname`)
	if err != nil {
		return nil, fmt.Errorf("list the source's tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (table, error) {
		var t table
		return t, r.Scan(&t.name, &t.logged, &t.keyless, &t.full)
	})
	if err != nil {
		return nil, fmt.Errorf("list the source's tables: %w", err)
	}
	return tables, nil
}

// noEquality lists, as "schema.table.column (type)", the columns of
// tables whose type has no equality operator (a default btree or hash
// operator class, through domains and arrays): under REPLICA IDENTITY
// FULL the target finds the row an UPDATE or DELETE changes by comparing
// every column, and its apply worker fails on such a column ("could not
// identify an equality operator for type json") and retries forever.
func noEquality(ctx context.Context, conn *pgx.Conn, tables []string) ([]string, error) {
	if len(tables) == 0 {
		return nil, nil
	}
	rows, err := conn.Query(ctx, `WITH RECURSIVE base(attrelid, attnum, typ) AS (
			SELECT a.attrelid, a.attnum, a.atttypid FROM pg_catalog.pg_attribute a
			WHERE a.attrelid IN (SELECT pg_catalog.unnest($1::text[])::pg_catalog.regclass) AND a.attnum > 0 AND NOT a.attisdropped
			UNION ALL
			SELECT b.attrelid, b.attnum, CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.typelem END
			FROM base b JOIN pg_catalog.pg_type t ON t.oid = b.typ
			WHERE t.typtype = 'd' OR (t.typcategory = 'A' AND t.typelem <> 0 AND t.typlen = -1)
		)
		SELECT DISTINCT format('%I.%I.%I (%s)', n.nspname, c.relname, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod))
		FROM base b JOIN pg_catalog.pg_type t ON t.oid = b.typ
		JOIN pg_catalog.pg_attribute a ON a.attrelid = b.attrelid AND a.attnum = b.attnum
		JOIN pg_catalog.pg_class c ON c.oid = b.attrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE NOT (t.typtype = 'd' OR (t.typcategory = 'A' AND t.typelem <> 0 AND t.typlen = -1))
		AND t.typtype NOT IN ('e', 'r', 'm', 'c')
		AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_opclass oc JOIN pg_catalog.pg_am am ON am.oid = oc.opcmethod
			WHERE am.amname IN ('btree', 'hash') AND oc.opcdefault AND (oc.opcintype = t.oid
				OR EXISTS (SELECT 1 FROM pg_catalog.pg_cast k WHERE k.castsource = t.oid AND k.casttarget = oc.opcintype AND k.castmethod = 'b')))
		ORDER BY 1`, tables)
	if err != nil {
		return nil, fmt.Errorf("read the column types of the tables without key: %w", err)
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read the column types of the tables without key: %w", err)
	}
	return cols, nil
}
