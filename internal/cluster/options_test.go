package cluster

import (
	"reflect"
	"testing"

	"github.com/pgsprint/pgsprint/internal/progress"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// TestDatabaseOptionsCarryEveryField sets each field of restore.Options
// in turn, alone, and checks that the restore of a database of a
// whole-server archive gets it: a field dropped on the way (as
// SplitMinBytes and PreDataSplitMin once were, by a hand copy) would be a
// flag restore --all accepts and ignores. The fields a whole-server
// restore sets for each database are listed with the reason.
func TestDatabaseOptionsCarryEveryField(t *testing.T) {
	perDatabase := map[string]string{
		"Jobs":     "each database's share of the connections (schedule)",
		"Progress": "each database's part of the one stream (progress.Parts)",
		"Where":    "a database's view is no archive of its own; finishSource names the archive",
	}
	typ := reflect.TypeFor[restore.Options]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		if _, ok := perDatabase[f.Name]; ok {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			var opts RestoreOptions
			field := reflect.ValueOf(&opts.Options).Elem().Field(i)
			fillNonZero(t, field)
			got := reflect.ValueOf(opts.databaseOptions(3, progress.Nop{})).Field(i)
			if !reflect.DeepEqual(got.Interface(), field.Interface()) {
				t.Errorf("restore.Options.%s = %v is not passed to each database's restore (got %v)", f.Name, field.Interface(), got.Interface())
			}
		})
	}
}

// fillNonZero sets v, and every exported field under it, to a value other
// than its zero value.
func fillNonZero(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(7)
	case reflect.String:
		v.SetString("x")
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fillNonZero(t, s.Index(0))
		v.Set(s)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillNonZero(t, v.Field(i))
			}
		}
	case reflect.Interface:
		if v.Type() == reflect.TypeFor[progress.Reporter]() {
			v.Set(reflect.ValueOf(progress.Nop{}))
			return
		}
		t.Fatalf("no value to fill an interface %s with: add one", v.Type())
	default:
		t.Fatalf("no value to fill a %s with: add one", v.Type())
	}
}
