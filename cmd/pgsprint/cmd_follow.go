package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/follow"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// followFlags are clone's --follow options.
type followFlags struct {
	on        bool
	conninfo  string
	names     follow.Names
	riFull    bool
	skipNoKey bool
	wait      bool
}

func (f *followFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.on, "follow", false, "keep the target following the source after the copy, through PostgreSQL's logical replication (see pgsprint follow --help)")
	fs.StringVar(&f.conninfo, "follow-conninfo", "", "how the target server connects to the source, stored in the target's subscription (default: --source's host, port, user and database, without password)")
	fs.StringVar(&f.names.Slot, "slot", "", "name of the replication slot on the source and of the subscription on the target (default pgsprint_<target database>)")
	fs.StringVar(&f.names.Publication, "publication", "", "name of the publication on the source (default pgsprint_<target database>)")
	fs.BoolVar(&f.riFull, "replica-identity-full", false, "with --follow: set REPLICA IDENTITY FULL on source tables without primary key or replica identity (else refused)")
	fs.BoolVar(&f.wait, "wait", false, "with --follow: stay after the copy and show the lag every few seconds until interrupted (exit 0); the target follows without pgsprint either way")
	fs.BoolVar(&f.skipNoKey, "follow-skip-no-key", false, "with --follow: leave source tables without primary key or replica identity out of the publication: their changes are NOT followed")
}

// options checks the --follow flags against the clone's and builds the
// follow's options; nil without --follow.
func (f *followFlags) options(o cloneOptions, src, dst *pgx.ConnConfig) (*follow.Options, error) {
	if !f.on {
		if f.conninfo != "" || f.names != (follow.Names{}) || f.riFull || f.skipNoKey || f.wait {
			return nil, usageError{fmt.Errorf("--follow-conninfo, --slot, --publication, --replica-identity-full, --follow-skip-no-key and --wait go with --follow")}
		}
		return nil, nil
	}
	switch {
	case o.snapshot != "" || o.resume:
		return nil, usageError{fmt.Errorf("--follow reads in the snapshot of the slot it creates: it does not take --snapshot or --resume")}
	case o.filter.SchemaOnly:
		return nil, usageError{fmt.Errorf("--follow copies rows: it does not take --schema-only")}
	case f.riFull && f.skipNoKey:
		return nil, usageError{fmt.Errorf("choose one of --replica-identity-full and --follow-skip-no-key")}
	}
	names, err := f.names.Resolve(dst.Database)
	if err != nil {
		return nil, usageError{err}
	}
	return &follow.Options{Source: src, Target: dst, Names: names, Conninfo: f.conninfo, Filter: o.filter,
		ReplicaIdentityFull: f.riFull, SkipNoKey: f.skipNoKey, Logger: o.log.oneLineLogger()}, nil
}

// runCloneFollow is clone --follow: the clone, copy, runs inside the
// follow's lifecycle (follow.Clone), and the target follows the source
// once it returns.
func runCloneFollow(ctx context.Context, o cloneOptions, fo *follow.Options, copy func(ctx context.Context, snapshot string, f filter.Options) error) error {
	fol, err := follow.Clone(ctx, *fo, copy)
	if errors.Is(err, follow.ErrConninfoPassword) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(o.log.summaryOut(), "  following: subscription %s on the target replays the source's changes from %s (slot %s, publication %s); see pgsprint follow status, then follow finish\n",
		fol.Slot, fol.ConsistentPoint, fol.Slot, fol.Publication)
	if o.follow.wait {
		watchLag(ctx, fo.Source, fo.Target, fol.Names)
	}
	return nil
}

type followOptions struct {
	log     logFlags
	source  string
	target  string
	names   follow.Names
	jobs    int
	timeout time.Duration
	stall   time.Duration
	noFence bool
	grace   time.Duration
	// graceSet: --fence-grace was given.
	graceSet bool
}

func (o *followOptions) register(fs *pflag.FlagSet, sourceHelp string) {
	fs.SortFlags = false
	fs.StringVar(&o.source, "source", "", sourceHelp)
	fs.StringVar(&o.target, "target", "", "target database: name, connection string or URI")
	fs.StringVar(&o.names.Slot, "slot", "", "the slot and subscription name given to clone --follow (default pgsprint_<target database>)")
	fs.StringVar(&o.names.Publication, "publication", "", "the publication name given to clone --follow (default pgsprint_<target database>)")
}

// configs parses --source (optional unless needSource) and --target and
// resolves the names.
func (o *followOptions) configs(needSource bool) (src, dst *pgx.ConnConfig, names follow.Names, err error) {
	if o.target == "" || (needSource && o.source == "") {
		if needSource {
			return nil, nil, names, usageError{fmt.Errorf("both --source and --target are required")}
		}
		return nil, nil, names, usageError{fmt.Errorf("--target is required")}
	}
	if o.source != "" {
		if src, err = (pg.ConnOptions{DSN: o.source}).Config(); err != nil {
			return nil, nil, names, usageError{fmt.Errorf("--source: %w", err)}
		}
	}
	if dst, err = (pg.ConnOptions{DSN: o.target}).Config(); err != nil {
		return nil, nil, names, usageError{fmt.Errorf("--target: %w", err)}
	}
	if names, err = o.names.Resolve(dst.Database); err != nil {
		return nil, nil, names, usageError{err}
	}
	return src, dst, names, nil
}

func newFollowCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "follow status|finish|abort",
		Short: "Watch, finish or abort a clone --follow",
		Long: `A clone made with --follow stays up to date through PostgreSQL's own
logical replication: a publication and a slot on the source, a subscription
on the target that replays every change since the instant the clone read.

  follow status   how far behind the target is, apply errors, the fence
  follow finish   fence the source (read-only), catch up, copy sequences,
                  compare, hand over; a failure lifts the fence
  follow abort    remove the subscription, slot and publication, and
                  lift a fence finish left

DDL run on the source is captured by event triggers and replayed on the
target in order with the rows, new tables (and partitions) are copied by
finish; a statement that cannot be replayed exactly stops the follow, named
by status and finish. That needs superuser on both sides; without it, DDL
is not followed and status --source and finish detect it.
Not followed (as PostgreSQL's logical replication): large objects,
sequences until finish copies them, unlogged tables. TRUNCATE is followed.`,
		Args: noArgs,
	}
	cmd.AddCommand(newFollowStatusCmd(), newFollowFinishCmd(), newFollowAbortCmd())
	return cmd
}

func newFollowStatusCmd() *cobra.Command {
	cmd, _ := followSubcommand(&cobra.Command{
		Use:   "status --target DST [--source SRC]",
		Short: "Show how far the target of a clone --follow is behind the source",
		Long: `Show the subscription of a clone --follow on the target: whether its apply
worker runs, the apply errors counted (PostgreSQL 15 and later), and, with
--source, the lag in bytes and seconds from the source's slot and current WAL
position, and any slot left behind by a clone --follow that was killed.

With --source it also names what a finish would meet: the source fenced
(by which run, with the statements that lift it), a finish killed in its
handover (run finish again), prepared transactions in the source database
(finish refuses while any exist), and capture objects or a publication
left behind (with the SQL that removes them). Exit 1 when the follow cannot
go on by itself: no subscription, DDL stopped by name, a new table failing
to copy, or the apply worker failing (its error quoted, with what to do).`,
	}, "source database (optional: needed for the lag in bytes and for leftovers)", false, runFollowStatus)
	return cmd
}

// followRun is a follow subcommand's run, given the connections and names
// its flags resolve to (src nil when --source is optional and not given).
type followRun func(ctx context.Context, o followOptions, src, dst *pgx.ConnConfig, names follow.Names, out io.Writer) error

// followSubcommand gives cmd, a follow subcommand's text, what every
// follow subcommand takes: no arguments, the follow's connection flags
// (sourceHelp describing --source, required with needSource) and run,
// writing to standard output.
func followSubcommand(cmd *cobra.Command, sourceHelp string, needSource bool, run followRun) (*cobra.Command, *followOptions) {
	o := &followOptions{}
	cmd.Args = noArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		src, dst, names, err := o.configs(needSource)
		if err != nil {
			return err
		}
		return run(cmd.Context(), *o, src, dst, names, os.Stdout)
	}
	o.register(cmd.Flags(), sourceHelp)
	return cmd, o
}

func runFollowStatus(ctx context.Context, o followOptions, src, dst *pgx.ConnConfig, names follow.Names, out io.Writer) error {
	st, err := follow.ReadState(ctx, src, dst, names)
	if err != nil {
		return err
	}
	printStatus(out, st, o)
	switch {
	case st.Sub == nil:
		return fmt.Errorf("no subscription %s on the target: it is not following (finished or aborted, or never started: clone --follow starts it; --slot names another)", names.Slot)
	case st.DDL.Err() != nil:
		return st.DDL.Err()
	case st.Sub.SyncErrors > 0 && len(st.Copying) > 0:
		return fmt.Errorf("the target fails to copy %s (%d sync errors; see the target's server log): finish refuses until the copy succeeds", strings.Join(st.Copying, ", "), st.Sub.SyncErrors)
	case st.Sub.ApplyErrors > 0 && !st.StaleErrors():
		return fmt.Errorf("the target's apply worker fails: %s; next: %s; once it applies again, reset the count on the target: SELECT pg_stat_reset_subscription_stats(oid) FROM pg_subscription WHERE subname = %s",
			follow.ApplyErrorText(st.Sub), follow.ApplyErrorAdvice(st.Sub.LastError), pg.Literal(names.Slot))
	}
	return nil
}

// printStatus writes the state, and the next step, for a human.
func printStatus(out io.Writer, st *follow.State, o followOptions) {
	s, src := st.Sub, st.Source
	switch {
	case s == nil:
		fmt.Fprintf(out, "subscription %s: none on the target\n", st.Slot)
	case !s.Enabled && st.DDL != nil && len(st.DDL.Stops) > 0:
		fmt.Fprintf(out, "subscription %s: DISABLED by a DDL statement the target cannot replay (see below)\n", st.Slot)
	case !s.Enabled:
		fmt.Fprintf(out, "subscription %s: DISABLED (nothing is applied: ALTER SUBSCRIPTION %s ENABLE)\n", st.Slot, pg.Ident(st.Slot))
	case !s.Running:
		fmt.Fprintf(out, "subscription %s: enabled, but no apply worker runs (see the target's server log)\n", st.Slot)
	default:
		ago := ""
		if !s.LatestEndTime.IsZero() {
			ago = fmt.Sprintf(", reported %s ago", time.Since(s.LatestEndTime).Round(100*time.Millisecond))
		}
		if s.ReceivedLSN == "" {
			fmt.Fprintf(out, "subscription %s: running, nothing received yet\n", st.Slot)
		} else {
			fmt.Fprintf(out, "subscription %s: running, received up to %s, applied up to %s%s\n", st.Slot, s.ReceivedLSN, s.LatestEndLSN, ago)
		}
	}
	if s != nil && s.ApplyErrors >= 0 {
		fmt.Fprintf(out, "apply errors: %d, sync errors: %d\n", s.ApplyErrors, s.SyncErrors)
	}
	switch {
	case s != nil && st.StaleErrors():
		fmt.Fprintf(out, "apply errors: all before the apply worker started at %s; it has run without error since\n", s.WorkerStart.Format(time.RFC3339))
	case s != nil && s.ApplyErrors > 0 && s.LastError != "":
		fmt.Fprintf(out, "last apply error (target's log): %s\n", s.LastError)
	}
	if s != nil && s.SyncErrors > 0 && len(st.Copying) > 0 {
		fmt.Fprintf(out, "tables the target FAILS TO COPY: %s (see the target's server log)\n", strings.Join(st.Copying, ", "))
	}
	printDDL(out, st.DDL)
	if s != nil && s.Partial {
		fmt.Fprintln(out, "selection: the follow covers the tables clone selected (-t, -n, --filter); finish compares those")
	}
	if src != nil {
		if src.Slot {
			lag := "idle"
			if src.ReplayLag >= 0 {
				lag = src.ReplayLag.Round(time.Millisecond).String()
			}
			fmt.Fprintf(out, "lag: %d bytes (source at %s, target confirmed %s), replay lag %s\n", src.LagBytes, src.CurrentLSN, src.ConfirmedLSN, lag)
		} else {
			fmt.Fprintf(out, "slot %s: none on the source\n", st.Slot)
		}
		if s == nil && src.Publication {
			fmt.Fprintf(out, "publication %s: still on the source, with no subscription to use it\n", st.Publication)
		}
		printFence(out, src.Fence, st.Slot)
		for _, p := range src.Prepared {
			fmt.Fprintf(out, "prepared transaction in the source database: %s (finish refuses while any exist: COMMIT PREPARED or ROLLBACK PREPARED it)\n", p)
		}
		for _, l := range src.Leftovers {
			fmt.Fprintf(out, "leftover slot %s on the source (it keeps WAL): pgsprint follow abort --slot %s ..., or on the source: %s\n", l, l, follow.DropSlotSQL(l))
		}
	}
	switch {
	case st.DDL.Err() != nil:
		fmt.Fprintln(out, "next: the target cannot follow the source's DDL (see above): pgsprint follow abort, then clone again")
	case s != nil && s.SyncErrors > 0 && len(st.Copying) > 0:
		fmt.Fprintln(out, "next: fix what the copy fails on in the target's table (see the target's server log), or drop the table on the source; then finish")
	case s != nil && s.ApplyErrors > 0 && !st.StaleErrors():
		fmt.Fprintf(out, "next: %s; then finish\n", follow.ApplyErrorAdvice(s.LastError))
	case s != nil:
		fmt.Fprintln(out, "next: pgsprint follow finish --source SRC --target DST (it fences the source: new sessions are read-only, the others are ended after --fence-grace)")
	case src != nil && src.Fence.Ours(st.Slot):
		fmt.Fprintln(out, "next: a follow finish was interrupted during its handover (the subscription is gone, the source stays fenced): run pgsprint follow finish again to complete it, or follow abort to lift the fence")
	case src != nil && (src.Slot || src.Publication || src.Capture) || st.TargetCapture:
		onTarget := ""
		if st.TargetCapture {
			onTarget = "; and on the target: " + follow.CaptureCleanupSQL(st.Slot)
		}
		fmt.Fprintf(out, "not following, and pgsprint's objects are left (a clone --follow or finish was interrupted): pgsprint follow abort --source SRC --target DST removes them all; or by hand, on the source: %s; DROP PUBLICATION IF EXISTS %s; %s%s\n",
			follow.DropSlotSQL(st.Slot), pg.Ident(st.Publication), follow.CaptureCleanupSQL(st.Slot), onTarget)
	}
}

// printDDL says how DDL on the source is followed, and what stops it.
func printDDL(out io.Writer, d *follow.DDL) {
	switch {
	case d == nil:
	case d.Captured:
		fmt.Fprintf(out, "DDL: captured on the source and replayed on the target in order (%d statements)\n", d.Replayed)
		for _, s := range d.Stops {
			fmt.Fprintf(out, "DDL NOT FOLLOWED: %s\n", s)
		}
		if len(d.Pending) > 0 {
			fmt.Fprintf(out, "new tables: %s (finish copies them)\n", strings.Join(d.Pending, ", "))
		}
	case len(d.Drift) > 0:
		for _, x := range d.Drift {
			fmt.Fprintf(out, "DDL NOT FOLLOWED: %s\n", x)
		}
	}
}

// printFence says whether the source is fenced, and how to lift it.
func printFence(out io.Writer, f follow.Fence, slot string) {
	switch {
	case f.Ours(slot):
		fmt.Fprintf(out, "fence: the source database %s is READ-ONLY for new sessions (set by follow finish); lift it with: %s\n", f.Database, f.LiftSQL())
	case f.ReadOnly:
		fmt.Fprintf(out, "fence: the source database %s is read-only for new sessions by a setting that is not pgsprint's (%s lifts it)\n", f.Database, f.LiftSQL())
	}
}

func newFollowFinishCmd() *cobra.Command {
	cmd, o := followSubcommand(&cobra.Command{
		Use:   "finish --source SRC --target DST",
		Short: "Finish a clone --follow: fence the source, catch up, copy sequences, compare, hand over",
		Long: `Finish a clone --follow with a fenced switchover:

 0. check, while the source is still writable: no other finish or abort
    of this follow runs (an advisory lock on the source, held for the
    whole run: a second run is refused at once, naming the holder), the
    target is not the source, no prepared transaction waits in the
    source database, no table fails to copy, and the target's apply
    worker is connected and confirms the source's position (a refusal
    names the cause; --stall-timeout bounds the wait);
 1. fence: the source database becomes read-only for new sessions
    (ALTER DATABASE ... SET default_transaction_read_only = on); the
    sessions already there get --fence-grace to end their transactions,
    then every one of them is ended (each is named), and so is a session
    still starting at the fence (one that read the settings before it);
 2. wait (at most --timeout, and at most --stall-timeout without
    progress) until the target has applied everything up to the fence;
    an apply error on the target stops it at once, quoted;
 3. copy every sequence's value and the large objects that differ
    (created, changed or deleted since the clone; not for a clone of a
    selection): the target is ready (write downtime);
 4. verify: compare both databases as pgsprint compare --schema does (for
    a clone of a selection, -t, -n, --filter: the tables it followed);
 5. hand over: drop the subscription, the slot and the publication.

Any failure before the handover lifts the fence (the source is writable
again) and keeps the follow running. After the handover the source stays
read-only, so that nothing writes to the old server by mistake: the output
gives the ALTER DATABASE ... RESET that lifts it. A finish killed at any
step can be run again; follow status says whether the source is fenced, and
follow abort lifts the fence.

--no-fence leaves the source writable: stop every write yourself first.
It exits 0 only when both databases are equal; the verdict names the kind of
difference (DDL, unlogged table, materialized view contents, rows, writes
that went on).`,
		Example: `  pgsprint follow status --source prod --target "host=new dbname=prod"
  pgsprint follow finish --source prod --target "host=new dbname=prod"
  # point the application at the new server; the old one stays read-only`,
	}, "source database: name, connection string or URI", true, runFollowFinish)
	run := cmd.RunE // finish also needs to know whether --fence-grace was given
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		o.graceSet = cmd.Flags().Changed("fence-grace")
		return run(cmd, args)
	}
	cmd.Flags().IntVarP(&o.jobs, "jobs", "j", runtime.NumCPU(), "tables compared in parallel on each side")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 10*time.Minute, "fail if the target has not caught up within this time")
	cmd.Flags().DurationVar(&o.stall, "stall-timeout", follow.DefaultStallTimeout, "refuse to fence, or lift the fence and fail, when the target's catch-up makes no progress for this long")
	cmd.Flags().BoolVar(&o.noFence, "no-fence", false, "leave the source writable (stop the writes to it yourself first)")
	cmd.Flags().DurationVar(&o.grace, "fence-grace", 5*time.Second, "how long the source's transactions under way may run after the fence before their sessions are ended")
	o.log.register(cmd.Flags())
	return cmd
}

func runFollowFinish(ctx context.Context, o followOptions, src, dst *pgx.ConnConfig, names follow.Names, out io.Writer) error {
	if err := checkJobs(o.jobs); err != nil {
		return err
	}
	if o.noFence && o.graceSet {
		return usageError{fmt.Errorf("--fence-grace goes without --no-fence")}
	}
	report := io.Discard
	if !o.log.quiet {
		report = out
	}
	start := time.Now()
	if o.stall <= 0 || o.timeout <= 0 {
		return usageError{fmt.Errorf("--timeout and --stall-timeout must be positive")}
	}
	res, err := follow.Finish(ctx, follow.FinishOptions{Source: src, Target: dst, Names: names, Timeout: o.timeout, StallTimeout: o.stall,
		NoFence: o.noFence, Grace: o.grace, Out: report, Logger: o.log.oneLineLogger(),
		Verify: func(ctx context.Context, v follow.Verification) error {
			return verifyFollow(ctx, o, src, dst, v, report)
		}})
	if err != nil {
		return fmt.Errorf("follow finish: %w", err)
	}
	switch {
	case !res.Followed && !res.Verified:
		fmt.Fprintf(report, "follow finish: an earlier finish verified and handed over; replication removed\n")
	case !res.Followed:
		fmt.Fprintf(report, "follow finish: target equals source; replication already removed (%d sequences copied)\n", res.Sequences)
	default:
		fence := "no fence (--no-fence)"
		if res.Fence.ReadOnly {
			fence = fmt.Sprintf("fence to target ready, %d sessions ended", len(res.Ended))
		}
		fmt.Fprintf(report, "follow finish: target equals source; write downtime %s (%s: caught up to %s, %d sequences copied), verification %s, handover %s, total %s\n",
			res.WriteDowntime.Round(10*time.Millisecond), fence, res.CaughtUp, res.Sequences,
			res.Verification.Round(10*time.Millisecond), res.Handover.Round(10*time.Millisecond), time.Since(start).Round(10*time.Millisecond))
	}
	if res.Fence.Ours(names.Slot) {
		fmt.Fprintf(report, "the source database %s stays read-only for new sessions; to lift that, on the source: %s\n", res.Fence.Database, res.Fence.LiftSQL())
	}
	return nil
}

// verifyFollow compares both databases for follow finish (the followed
// tables only for a selection); its error names each kind of difference.
func verifyFollow(ctx context.Context, o followOptions, src, dst *pgx.ConnConfig, v follow.Verification, report io.Writer) error {
	found, err := compareConfigs(ctx, compareOptions{source: o.source, target: o.target, jobs: o.jobs, schema: true,
		acrossVersions: v.SourceMajor != v.TargetMajor, noReplication: true}, src, dst, v.Tables, report)
	if err != nil {
		return fmt.Errorf("compare failed: %w", err)
	}
	if !found.different() {
		return nil
	}
	kinds, err := follow.Kinds(ctx, src, found.schema != "", found.entries, v)
	if err != nil {
		return fmt.Errorf("the target differs from the source (see above), and %w", err)
	}
	return fmt.Errorf("the target differs from the source (see above): %s", strings.Join(kinds, "; "))
}

func newFollowAbortCmd() *cobra.Command {
	cmd, _ := followSubcommand(&cobra.Command{
		Use:   "abort --source SRC --target DST",
		Short: "Remove a clone --follow's subscription, slot and publication, and lift its fence",
		Long: `Remove what clone --follow created: the subscription on the target, the
replication slot and the publication on the source, whichever exist (it can
be run again), and the fence a follow finish left on the source (killed, or
after its handover): the source is writable again. It says what it did. The
target keeps the rows it has; it no longer follows.
Other slots named pgsprint_* left on the source by killed clones are listed.

Like finish, abort holds the follow's lock on the source for its whole run:
a finish or abort already running is named, and abort exits 1 at once. The
DDL capture (event triggers, schema pgsprint) goes on both sides. Dropping
the subscription never hangs: each DROP SUBSCRIPTION runs under a 5 s
statement timeout, up to 6 tries, after ending the source's walsenders of
this follow's table-copy slots (which wait for prepared transactions); if
it still cannot, abort exits 1 naming the prepared transactions to resolve.`,
	}, "source database: name, connection string or URI", true, runFollowAbort)
	return cmd
}

func runFollowAbort(ctx context.Context, o followOptions, src, dst *pgx.ConnConfig, names follow.Names, out io.Writer) error {
	d, err := follow.Abort(ctx, src, dst, names)
	if err != nil {
		return err
	}
	st, err := follow.ReadState(ctx, src, dst, names)
	if err != nil {
		return err
	}
	var did []string
	if d.Subscription {
		did = append(did, "dropped subscription "+names.Slot+" on the target")
	}
	if d.Slot {
		did = append(did, "dropped slot "+names.Slot+" on the source")
	}
	if d.Publication {
		did = append(did, "dropped publication "+names.Publication+" on the source")
	}
	if d.Unfenced {
		did = append(did, "lifted the fence: the source database "+d.Fence.Database+" is writable again")
	}
	if len(did) == 0 {
		fmt.Fprintf(out, "follow abort: nothing to do: no subscription %s on the target, no slot %s nor publication %s on the source\n", names.Slot, names.Slot, names.Publication)
	} else {
		fmt.Fprintf(out, "follow abort: %s\n", strings.Join(did, "; "))
	}
	printFence(out, d.Fence, names.Slot)
	for _, l := range st.Source.Leftovers {
		fmt.Fprintf(out, "leftover slot %s on the source (it keeps WAL): pgsprint follow abort --slot %s ..., or on the source: %s\n", l, l, follow.DropSlotSQL(l))
	}
	return nil
}

// watchLag prints the lag every few seconds until ctx ends (an interrupt
// ends the watching, not the following: the run succeeded).
func watchLag(ctx context.Context, src, dst *pgx.ConnConfig, names follow.Names) {
	follow.Watch(ctx, src, dst, names, 3*time.Second, func(st *follow.State, err error) {
		now := time.Now().Format(time.TimeOnly)
		switch {
		case err != nil:
			fmt.Fprintf(os.Stderr, "  %s lag: %v\n", now, err)
		case st.Sub == nil || st.Source == nil || !st.Source.Slot:
			fmt.Fprintf(os.Stderr, "  %s the subscription or its slot is gone\n", now)
		default:
			errs := ""
			if st.Sub.ApplyErrors > 0 {
				errs = fmt.Sprintf(", %d apply errors (see follow status)", st.Sub.ApplyErrors)
			}
			if st.DDL.Err() != nil {
				errs += ", DDL the target cannot follow (see follow status)"
			}
			fmt.Fprintf(os.Stderr, "  %s lag: %d bytes%s\n", now, st.Source.LagBytes, errs)
		}
	})
	fmt.Fprintln(os.Stderr, "  stopped watching; the target goes on following (pgsprint follow status, follow finish)")
}
