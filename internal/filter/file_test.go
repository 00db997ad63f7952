package filter

import (
	"reflect"
	"strings"
	"testing"
)

// TestReadFile reads filter files as PostgreSQL 17's pg_dump does: each
// line one flag, patterns kept as pg_dump would pass them on, errors
// naming the file and the line.
func TestReadFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		tool Tool
		text string
		want Options
		err  string
	}{
		{"tables and schemas", ForDump, "include table app.orders\nexclude table app.log_*\ninclude schema app\nexclude schema audit\n",
			Options{Selection: Selection{Tables: []string{"app.orders"}, ExcludeTables: []string{"app.log_*"}, Schemas: []string{"app"}, ExcludeSchemas: []string{"audit"}}}, ""},
		{"comments, blank lines, case, spaces", ForDump, "# a comment\n\n   INCLUDE   Table   app . orders   # trailing\n\texclude table_data  big\n",
			Options{Selection: Selection{Tables: []string{"app.orders"}, ExcludeTableData: []string{"big"}}}, ""},
		{"quoted names keep everything", ForDump, "include table \"we\"\"ird\".\"t; drop # not a comment\"\n",
			Options{Selection: Selection{Tables: []string{`"we""ird"."t; drop # not a comment"`}}}, ""},
		{"a quoted name spans lines", ForDump, "include table \"a\nb\".t\ninclude table x\n",
			Options{Selection: Selection{Tables: []string{"\"a\nb\".t", "x"}}}, ""},
		{"escapes in quotes", ForDump, `include table "x\ny\\z"` + "\n",
			Options{Selection: Selection{Tables: []string{"\"x\ny\\z\""}}}, ""},
		{"unquoted words join with one space", ForDump, "include table my   table\n", Options{Selection: Selection{Tables: []string{"my table"}}}, ""},
		{"children and extensions", ForDump, "include table_and_children p\nexclude table_and_children q\nexclude table_data_and_children r\ninclude extension e\nexclude extension f\n",
			Options{Selection: Selection{TableAndChildren: []string{"p"}, ExcludeTableAndChildren: []string{"q"}, ExcludeTableDataAndChildren: []string{"r"}, Extensions: []string{"e"}, ExcludeExtensions: []string{"f"}}}, ""},
		{"no command", ForDump, "\n\ntable x\n", Options{}, `filter file f.txt line 3: invalid filter command (expected "include" or "exclude")`},
		{"no type", ForDump, "include\n", Options{}, "filter file f.txt line 1: missing filter object type"},
		{"no pattern", ForDump, "include table # nothing\n", Options{}, "filter file f.txt line 1: missing object name pattern"},
		{"unknown type", ForDump, "include sequence s\n", Options{}, `filter file f.txt line 1: unsupported filter object type: "sequence"`},
		{"unclosed quote", ForDump, "include table \"abc\n", Options{}, "filter file f.txt line 1: unexpected end of file"},
		{"include table_data", ForDump, "# x\ninclude table_data t\n", Options{}, `filter file f.txt line 2: table_data filter for "t" is not allowed`},
		{"foreign data", ForDump, "include foreign_data s\n", Options{}, "filter file f.txt line 1: include foreign_data is not supported by pgsprint dump"},
		{"database", ForDump, "exclude database d\n", Options{}, "filter file f.txt line 1: exclude database is not supported by pgsprint dump: database filters are for pg_dumpall"},
		{"restore: children", ForRestore, "include table t\ninclude table_and_children p\n", Options{}, "filter file f.txt line 2: include table_and_children is not supported by pgsprint restore"},
		{"restore: function", ForRestore, "include function f(int)\n", Options{}, "filter file f.txt line 1: include function is not supported by pgsprint restore"},
		{"restore: tables", ForRestore, "include table t\nexclude table_data u\n", Options{Selection: Selection{Tables: []string{"t"}, ExcludeTableData: []string{"u"}}}, ""},
		{"clone: extension", ForClone, "exclude extension e\n", Options{Selection: Selection{ExcludeExtensions: []string{"e"}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o Options
			err := o.ReadFile(strings.NewReader(tc.text), "f.txt", tc.tool)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("error %v, want one starting %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(o, tc.want) {
				t.Errorf("got %+v, want %+v", o, tc.want)
			}
		})
	}
}
