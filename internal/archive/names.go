package archive

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// rawMark starts a manifest string that holds bytes invalid in UTF8: the
// rest is their hex. JSON cannot carry such bytes (encoding/json turns
// them into U+FFFD), yet a SQL_ASCII database's names and comments can
// hold any byte. PostgreSQL strings never contain NUL, so no real name
// starts with the mark.
const rawMark = "\x00"

// formatRawNames is the format version of an archive whose manifest holds
// marked strings: older readers, which would take the marks for names,
// refuse it. Archives without such strings keep version 1.
const formatRawNames = 2

// formatCluster is the format version of a whole-cluster archive
// (Manifest.Databases), whatever its names: an older reader would take it
// for a database with nothing in it.
const formatCluster = 4

// MarshalManifest encodes m as JSON without losing a byte of any string,
// and returns the format version the encoding needs. m is not changed.
func MarshalManifest(m *Manifest) ([]byte, int, error) {
	return marshalManifestAt(m, 1)
}

// marshalManifestAt is MarshalManifest for an archive that needs at least
// minVersion for other reasons (encryption).
func marshalManifestAt(m *Manifest, minVersion int) ([]byte, int, error) {
	marked := 0
	// Copy only a manifest that has strings to mark: at 100,000 tables a
	// deep copy is tens of MB, and almost no manifest needs one.
	cp := *m
	if anyString(reflect.ValueOf(m).Elem(), func(s string) bool { return !utf8.ValidString(s) }) {
		cp = markRaw(reflect.ValueOf(*m), &marked).Interface().(Manifest)
	}
	version := minVersion
	if marked > 0 {
		version = max(version, formatRawNames)
	}
	if m.IsCluster() {
		version = max(version, formatCluster)
	}
	if cp.FormatVersion != 0 {
		cp.FormatVersion = version
	}
	b, err := json.Marshal(&cp)
	return b, version, err
}

// markRaw returns a copy of v whose strings invalid in UTF8 are marked,
// counting them in n.
func markRaw(v reflect.Value, n *int) reflect.Value {
	return mapStrings(v, func(s string) string {
		if utf8.ValidString(s) {
			return s
		}
		*n++
		return rawMark + hex.EncodeToString([]byte(s))
	})
}

// MarkRaw returns a copy of v (a struct, slice or pointer to one) for
// encoding/json: its strings invalid in UTF8 are marked as in the
// manifest instead of becoming U+FFFD. For `list --json`.
func MarkRaw[T any](v T) T {
	var n int
	return markRaw(reflect.ValueOf(v), &n).Interface().(T)
}

// UnmarshalManifest decodes what MarshalManifest encoded. Equal strings
// and column lists in the result share their memory (compactManifest):
// the caller must not write to them.
func UnmarshalManifest(b []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if !anyString(reflect.ValueOf(&m).Elem(), func(s string) bool { return strings.HasPrefix(s, rawMark) }) {
		compactManifest(&m) // nothing marked: no copy
		return &m, nil
	}
	var bad error
	m = mapStrings(reflect.ValueOf(m), func(s string) string {
		if !strings.HasPrefix(s, rawMark) {
			return s
		}
		raw, err := hex.DecodeString(s[len(rawMark):])
		if err != nil && bad == nil {
			bad = fmt.Errorf("bad raw string %q: %w", s, err)
		}
		return string(raw)
	}).Interface().(Manifest)
	compactManifest(&m)
	return &m, bad
}

// mapStrings returns a deep copy of v with f applied to every string in
// it (exported fields, slices, pointers). Other values are copied as they
// are.
func mapStrings(v reflect.Value, f func(string) string) reflect.Value {
	out := reflect.New(v.Type()).Elem()
	switch v.Kind() {
	case reflect.String:
		out.SetString(f(v.String()))
	case reflect.Struct:
		out.Set(v)
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out.Field(i).Set(mapStrings(v.Field(i), f))
			}
		}
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out.Set(reflect.MakeSlice(v.Type(), v.Len(), v.Len()))
		for i := range v.Len() {
			out.Index(i).Set(mapStrings(v.Index(i), f))
		}
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(mapStrings(v.Elem(), f))
		out.Set(p)
	default:
		out.Set(v)
	}
	return out
}

// anyString reports whether some string in v (exported fields, slices,
// pointers, as mapStrings walks them) satisfies f, without copying v.
func anyString(v reflect.Value, f func(string) bool) bool {
	switch v.Kind() {
	case reflect.String:
		return f(v.String())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() && anyString(v.Field(i), f) {
				return true
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			if anyString(v.Index(i), f) {
				return true
			}
		}
	case reflect.Pointer:
		return !v.IsNil() && anyString(v.Elem(), f)
	}
	return false
}

// ASCIIJSON escapes every non-ASCII character of JSON text b as \uXXXX,
// so that it can be stored in a database of any encoding.
func ASCIIJSON(b []byte) []byte {
	if isASCII(b) {
		return b // the common case, without a copy of a manifest's size
	}
	var out strings.Builder
	for _, r := range string(b) {
		switch {
		case r < utf8.RuneSelf:
			out.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			fmt.Fprintf(&out, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		default:
			fmt.Fprintf(&out, `\u%04x`, r)
		}
	}
	return []byte(out.String())
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
