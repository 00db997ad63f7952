package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/spf13/pflag"
)

// TestRestoreFlagsReachOptions gives restore --all each flag in turn and
// checks that it is refused, or changes the options every database's
// restore gets (restoreOptions.options, which cluster.RestoreOptions
// embeds whole: TestDatabaseOptionsCarryEveryField), or is one of the
// command's own, listed with what honours it. A flag accepted with --all
// and not honoured (as --split-min-bytes, --pre-data-split-min and
// --cpu-profile once were) fails it. No server needed.
func TestRestoreFlagsReachOptions(t *testing.T) {
	own := map[string]string{
		"dbname": "the target's connection", "host": "the target's connection", "port": "the target's connection",
		"username": "the target's connection", "password": "the target's connection", "no-password": "the target's connection",
		"role": "the target's connection", "file": "the archive opened", "spill-dir": "the archive opened",
		"identity": "the archive opened", "passphrase-file": "the archive opened", "s3-endpoint": "the archive opened",
		"s3-path-style": "the archive opened", "to-sql": "writeSQL", "list": "printList", "all": "runRestoreAll",
		"database": "cluster.RestoreOptions.Database", "progress": "the progress display", "progress-interval": "the progress display",
		"summary-json": "the progress display", "verbose": "the logger", "quiet": "the logger", "help": "cobra",
		"cpu-profile":   "started by runRestore before --all branches off",
		"exit-on-error": "always so (a no-op for pg_restore's sake)", "if-exists": "always so with --clean (a no-op for pg_restore's sake)",
		"statistics": "the default (a no-op for pg_dump's sake)",
	}
	filterFile := filepath.Join(t.TempDir(), "filter.txt")
	if err := os.WriteFile(filterFile, []byte("include table t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	values := map[string]string{"maintenance-work-mem": "1GB", "section": "data", "filter": filterFile}
	parse := func(t *testing.T, args ...string) (restoreOptions, error) {
		cmd, o := restoreCommand()
		if err := cmd.ParseFlags(append([]string{"--all", "-f", "server.pgs"}, args...)); err != nil {
			return *o, err
		}
		if err := o.check(cmd); err != nil {
			return *o, err
		}
		return *o, o.checkAll()
	}
	options := func(o restoreOptions) any {
		ro := o.options(nil, "server.pgs", nil)
		ro.Logger, ro.Programs = nil, nil
		return ro
	}
	base, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	cmd, _ := restoreCommand()
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if _, ok := own[f.Name]; ok {
			return
		}
		t.Run(f.Name, func(t *testing.T) {
			arg := "--" + f.Name
			if f.Value.Type() != "bool" {
				v, ok := values[f.Name]
				switch {
				case ok:
				case f.Value.Type() == "int" || f.Value.Type() == "int64":
					v = "17"
				default:
					v = "x"
				}
				arg += "=" + v
			}
			o, err := parse(t, arg)
			if err != nil {
				t.Logf("%s refused with --all: %v", arg, err)
				return
			}
			if reflect.DeepEqual(options(o), options(base)) {
				t.Errorf("%s is accepted with --all and changes nothing each database's restore gets: honour it (restoreOptions.options), refuse it (checkAll), or list it as the command's own", arg)
			}
		})
	})
}
