package follow

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/verdict"
)

// MinMajor is the oldest source followed: 13 publishes partitioned
// tables and is the oldest major pgsprint is tested with.
const MinMajor = 13

// SourceSettings is what a source server offers clone --follow, read by
// ReadSourceSettings; Requirements says what is missing.
type SourceSettings struct {
	VersionNum             int
	InRecovery             bool // a standby: pg_is_in_recovery()
	WalLevel               string
	MaxSlots, Slots        int
	MaxSenders, Senders    int
	Superuser, Replication bool
	CreateOnDB             bool
	SlotExists, PubExists  bool
	slot, publication      string
}

// ReadSourceSettings reads the source's replication settings and the
// role's rights, and whether slot and publication are taken.
func ReadSourceSettings(ctx context.Context, conn *pgx.Conn, slot, publication string) (SourceSettings, error) {
	r := SourceSettings{slot: slot, publication: publication}
	err := conn.QueryRow(ctx, `SELECT pg_catalog.current_setting('server_version_num')::int,
		pg_catalog.pg_is_in_recovery(),
		pg_catalog.current_setting('wal_level'),
		pg_catalog.current_setting('max_replication_slots')::int,
		(SELECT count(*) FROM pg_catalog.pg_replication_slots)::int,
		pg_catalog.current_setting('max_wal_senders')::int,
		(SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE backend_type = 'walsender')::int,
		r.rolsuper, r.rolreplication,
		pg_catalog.has_database_privilege(pg_catalog.current_database(), 'CREATE'),
		EXISTS (SELECT 1 FROM pg_catalog.pg_replication_slots WHERE slot_name = $1),
		EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = $2)
		FROM pg_catalog.pg_roles r WHERE r.rolname = current_user`, slot, publication).Scan(
		&r.VersionNum, &r.InRecovery, &r.WalLevel, &r.MaxSlots, &r.Slots, &r.MaxSenders, &r.Senders,
		&r.Superuser, &r.Replication, &r.CreateOnDB, &r.SlotExists, &r.PubExists)
	if err != nil {
		return r, fmt.Errorf("read the source's replication settings: %w", err)
	}
	return r, nil
}

// Requirements is a follow's requirements on the source, one verdict
// each: clone --follow refuses with the failed ones, and preflight prints
// each as a checklist line, so both read the same verdicts. A standby is
// refused alone: PostgreSQL 16 decodes there, but the publication, the
// fence and finish's WAL flush are writes, which a standby refuses.
func (r SourceSettings) Requirements() []verdict.Item {
	if r.InRecovery {
		return []verdict.Item{verdict.Fail("follow: source is a standby", errors.New(
			"source is a standby (pg_is_in_recovery() is true): --follow needs the primary, where the publication is created and finish fences the writes; point --source at the primary"))}
	}
	if r.VersionNum < MinMajor*10000 {
		return []verdict.Item{verdict.Fail("follow: source version", fmt.Errorf("source is PostgreSQL %d.%d: --follow needs %d or later", r.VersionNum/10000, r.VersionNum%10000/100, MinMajor))}
	}
	var items []verdict.Item
	add := func(name string, bad bool, err error, detail string) {
		if bad {
			items = append(items, verdict.Fail(name, err))
		} else {
			items = append(items, verdict.Pass(name, detail))
		}
	}
	add("follow: wal_level", r.WalLevel != "logical",
		fmt.Errorf("source has wal_level = %s, --follow needs logical: run ALTER SYSTEM SET wal_level = logical on the source and restart it", r.WalLevel),
		"logical")
	add("follow: replication slot", r.Slots >= r.MaxSlots,
		fmt.Errorf("source has no free replication slot (%d of max_replication_slots = %d in use): raise max_replication_slots (restart) or drop an unused slot", r.Slots, r.MaxSlots),
		fmt.Sprintf("%d of %d free", r.MaxSlots-r.Slots, r.MaxSlots))
	add("follow: WAL sender", r.Senders >= r.MaxSenders,
		fmt.Errorf("source has no free WAL sender (%d of max_wal_senders = %d in use): raise max_wal_senders (restart)", r.Senders, r.MaxSenders),
		fmt.Sprintf("%d of %d free", r.MaxSenders-r.Senders, r.MaxSenders))
	add("follow: replication right", !r.Superuser && !r.Replication,
		errors.New("the source role has neither REPLICATION nor superuser: ALTER ROLE ... REPLICATION, or connect as a superuser"),
		map[bool]string{true: "superuser", false: "REPLICATION"}[r.Superuser])
	add("follow: publication right", !r.Superuser && !r.CreateOnDB,
		errors.New("the source role may not create a publication: it needs CREATE on the source database (and to own the tables), or superuser"),
		map[bool]string{true: "superuser", false: "CREATE on the database"}[r.Superuser])
	if r.Superuser {
		items = append(items, verdict.Pass("follow: DDL capture (source)", "superuser: event triggers record DDL for the target to replay"))
	} else {
		items = append(items, verdict.Warn("follow: DDL capture (source)",
			"not a superuser: event triggers need one, so DDL during the follow is not replayed; status and finish compare columns and tables and stop naming each change"))
	}
	add("follow: slot name", r.SlotExists,
		fmt.Errorf("source already has a replication slot %s: an earlier clone --follow? (pgsprint follow abort removes it) or choose --slot", r.slot),
		r.slot+" is free")
	add("follow: publication name", r.PubExists,
		fmt.Errorf("source already has a publication %s: an earlier clone --follow? (pgsprint follow abort removes it) or choose --publication", r.publication),
		r.publication+" is free")
	return items
}

// TargetSettings is what a target server offers clone --follow, read by
// ReadTargetSettings; Requirements says what is missing.
type TargetSettings struct {
	VersionNum int
	Superuser  bool
	// MaySubscribe: pg_create_subscription and CREATE on the database
	// (PostgreSQL 16 and later).
	MaySubscribe bool
	SubExists    bool
	subscription string
}

// ReadTargetSettings reads whether the target's role may create the
// subscription (named subscription) and whether one of that name exists.
// The follow reads it once: its verdicts, and whether the captured DDL
// can be replayed there (a superuser).
func ReadTargetSettings(ctx context.Context, conn *pgx.Conn, subscription string) (TargetSettings, error) {
	t := TargetSettings{subscription: subscription}
	err := conn.QueryRow(ctx, `SELECT pg_catalog.current_setting('server_version_num')::int, r.rolsuper,
		pg_catalog.current_setting('server_version_num')::int >= 160000
			AND pg_catalog.has_database_privilege(pg_catalog.current_database(), 'CREATE')
			AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles g WHERE g.rolname = 'pg_create_subscription'
				AND pg_catalog.pg_has_role(current_user, g.oid, 'MEMBER')),
		EXISTS (SELECT 1 FROM pg_catalog.pg_subscription WHERE subname = $1)
		FROM pg_catalog.pg_roles r WHERE r.rolname = current_user`, subscription).Scan(&t.VersionNum, &t.Superuser, &t.MaySubscribe, &t.SubExists)
	if err != nil {
		return t, fmt.Errorf("read the target's privileges: %w", err)
	}
	return t, nil
}

// Requirements is a follow's requirements on the target, one verdict
// each: the right to create the subscription, whether the captured DDL
// can be replayed, and the subscription's name free.
func (t TargetSettings) Requirements() []verdict.Item {
	var items []verdict.Item
	switch {
	case t.Superuser:
		items = append(items, verdict.Pass("follow: subscription right", "superuser on the target"))
	case t.MaySubscribe:
		items = append(items, verdict.Pass("follow: subscription right", "pg_create_subscription and CREATE on the target database"))
	case t.VersionNum >= 160000:
		items = append(items, verdict.Fail("follow: subscription right", errors.New("the target role may not create a subscription: it needs superuser, or pg_create_subscription and CREATE on the target database")))
	default:
		items = append(items, verdict.Fail("follow: subscription right", errors.New("the target role may not create a subscription: before PostgreSQL 16 that needs a superuser")))
	}
	if t.Superuser {
		items = append(items, verdict.Pass("follow: DDL replay (target)", "superuser: the captured DDL runs in the apply worker"))
	} else {
		items = append(items, verdict.Warn("follow: DDL replay (target)",
			"not a superuser: the captured DDL cannot run here, so DDL during the follow is not replayed; status and finish compare columns and tables and stop naming each change"))
	}
	if t.SubExists {
		items = append(items, verdict.Fail("follow: subscription name", fmt.Errorf("target already has a subscription %s: an earlier clone --follow? (pgsprint follow abort removes it) or choose --slot", t.subscription)))
	} else {
		items = append(items, verdict.Pass("follow: subscription name", t.subscription+" is free"))
	}
	return items
}

// SourceTable is a source table whose rows a clone copies, as a follow
// publishes it.
type SourceTable struct {
	Name    string // quoted schema.name
	Logged  bool
	Keyless bool // a table with rows of its own, no primary key and no replica identity
	Full    bool // REPLICA IDENTITY FULL already
}

// SourceTables lists the tables (plain, partitioned, partitions) whose
// rows the clone copies: those the filter selects, not extension members,
// not --exclude-table-data.
func SourceTables(ctx context.Context, conn *pgx.Conn, f filter.Options) ([]SourceTable, error) {
	selected, noData, err := f.Conditions("c", "n")
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
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SourceTable, error) {
		var t SourceTable
		return t, r.Scan(&t.Name, &t.Logged, &t.Keyless, &t.Full)
	})
	if err != nil {
		return nil, fmt.Errorf("list the source's tables: %w", err)
	}
	return tables, nil
}

// Keyless refuses logged tables without primary key or replica identity
// unless riFull (--replica-identity-full) or skipNoKey
// (--follow-skip-no-key) says what to do: published, their UPDATE and
// DELETE would fail on the source.
func Keyless(tables []SourceTable, riFull, skipNoKey bool) error {
	var keyless []string
	for _, t := range tables {
		if t.Logged && t.Keyless {
			keyless = append(keyless, t.Name)
		}
	}
	if len(keyless) > 0 && !riFull && !skipNoKey {
		return fmt.Errorf("source tables without primary key or replica identity (%s): published, their UPDATE and DELETE would fail on the source; choose --replica-identity-full (sets REPLICA IDENTITY FULL on them) or --follow-skip-no-key (their changes are not followed)",
			pg.Shorten(strings.Join(keyless, ", "), 300))
	}
	return nil
}
