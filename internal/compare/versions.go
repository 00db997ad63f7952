package compare

import (
	"regexp"
	"strings"
)

var (
	qualifierRE = regexp.MustCompile(`(?:"(?:[^"]|"")*"|[A-Za-z_][A-Za-z0-9_$]*)\.(?:"|[A-Za-z_])`)
	pre17AllRE  = regexp.MustCompile(`^GRANT SELECT,INSERT,REFERENCES,DELETE,TRIGGER,TRUNCATE,UPDATE ON TABLE `)
)

// NormalizeAcrossVersions removes from a SchemaDump what differs between
// two servers of different major versions holding the same schema (the
// public schema's owner and ACL, qualifiers in view bodies, pre-17 GRANT
// ALL spelled out, multirange names, procedures' IN mode), so that the
// schemas of a source and of its upgrade can be compared.
func NormalizeAcrossVersions(dump string) string {
	lines := strings.Split(dump, "\n")
	out := lines[:0]
	inView, inPublic := false, false
	for _, line := range lines {
		if strings.HasPrefix(line, "CREATE VIEW ") || strings.HasPrefix(line, "CREATE MATERIALIZED VIEW ") {
			inView = true
		}
		if inView {
			line = stripQualifiers(line)
			if strings.HasSuffix(line, ";") {
				inView = false
			}
		}
		line = pre17AllRE.ReplaceAllString(line, "GRANT ALL ON TABLE ")
		if strings.HasPrefix(line, "    multirange_type_name = ") {
			continue
		}
		if strings.Contains(line, "PROCEDURE ") {
			line = strings.ReplaceAll(strings.ReplaceAll(line, "(IN ", "("), ", IN ", ", ")
		}
		// The public schema's own entries (owner, comment, ACL) differ by
		// server version; drop every line that is about it (up to the next
		// entry, or the dump's end when its ACL comes last).
		if strings.HasPrefix(line, "SET ") {
			// Session settings between entries belong to none of them.
			inPublic = false
		}
		if strings.HasPrefix(line, "-- Name: ") || line == "-- PostgreSQL database dump complete" {
			inPublic = strings.HasPrefix(line, "-- Name: public; Type: SCHEMA;") ||
				strings.HasPrefix(line, "-- Name: SCHEMA public; Type: ")
		}
		// Separator and blank lines carry nothing and would misalign
		// the diff around a dropped section.
		if line == "--" || line == "" {
			continue
		}
		if inPublic || strings.HasSuffix(line, " ON SCHEMA public FROM PUBLIC;") || strings.HasSuffix(line, " ON SCHEMA public TO PUBLIC;") {
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// stripQualifiers removes every "name." prefix of an identifier in line.
func stripQualifiers(line string) string {
	for {
		loc := qualifierRE.FindStringIndex(line)
		if loc == nil {
			return line
		}
		// Keep the first character of the following identifier.
		q := line[loc[0] : loc[1]-1]
		line = line[:loc[0]] + line[loc[0]+len(q):]
	}
}
