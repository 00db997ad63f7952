package restore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// checkEncoding refuses, before anything is created, a target whose
// encoding cannot hold the archive's names, naming the first table that
// does not fit. A target of the archive's own encoding, a UTF8 target (any
// encoding but SQL_ASCII converts into it) and a SQL_ASCII target (which
// stores any bytes) always can. Values are converted by the server as
// they load; one that does not fit fails its table with the hint of
// explain, as it would with pg_restore.
func (p *preData) checkEncoding(ctx context.Context, conn *pgx.Conn) error {
	p.encoding = conn.PgConn().ParameterStatus("server_encoding")
	from, to := p.m.Encoding, p.encoding
	if from == "" || from == to || to == "SQL_ASCII" || (to == "UTF8" && from != "SQL_ASCII") {
		return nil
	}
	// The connection sends the manifest's names in UTF8, or a SQL_ASCII
	// archive's bytes as SQL_ASCII, as pg_restore would: the server
	// converts (or checks) each into its own encoding, or says it cannot.
	if from == "SQL_ASCII" {
		if _, err := conn.Exec(ctx, "SET client_encoding TO 'SQL_ASCII'"); err != nil {
			return err
		}
		defer conn.Exec(context.WithoutCancel(ctx), "SET client_encoding TO 'UTF8'")
	}
	fits := func(names []string) error {
		_, err := conn.Exec(ctx, "SELECT $1::text[]", names)
		return err
	}
	var all []string
	for _, t := range p.m.Tables {
		all = append(append(all, t.Schema, t.Name), t.Columns...)
	}
	for _, o := range p.m.Relations {
		all = append(all, o.Schema, o.Name)
	}
	for _, o := range p.m.Schemas {
		all = append(all, o.Name)
	}
	err := fits(all)
	if err == nil || !isEncodingError(err) {
		return err
	}
	what := "names"
	for _, t := range p.m.Tables {
		if terr := fits(append([]string{t.Schema, t.Name}, t.Columns...)); terr != nil {
			what, err = "table "+pg.Qualified(t.Schema, t.Name), terr
			break
		}
	}
	return encodingRefusal{fmt.Errorf("%s of this %s archive cannot be restored into a %s database (restore into a %s database): %w", what, from, to, wideEnough(from), err)}
}

// encodingRefusal is checkEncoding's error, which explains itself.
type encodingRefusal struct{ error }

func (e encodingRefusal) Unwrap() error { return e.error }

// wideEnough names the encodings that hold all of an archive's text.
func wideEnough(enc string) string {
	if enc == "UTF8" || enc == "SQL_ASCII" {
		return enc
	}
	return enc + " or UTF8"
}

// isEncodingError reports whether err is the server's refusal of text its
// encoding cannot hold (untranslatable_character, or
// character_not_in_repertoire for bytes invalid in it), from pgx or in
// a client program's words.
func isEncodingError(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "22P05" || pgErr.Code == "22021"
	}
	msg := err.Error()
	return strings.Contains(msg, "has no equivalent in encoding") || strings.Contains(msg, "invalid byte sequence for encoding")
}

// isPrivilegeError reports whether err is about ownership or privileges:
// what a restore as a role that does not own the archive's objects meets.
func isPrivilegeError(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
		return true
	}
	msg := err.Error()
	for _, s := range []string{"must be member of role", "must be owner of", "permission denied", "must be superuser"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return strings.Contains(msg, "role \"") && strings.Contains(msg, "\" does not exist")
}

// explain adds what to do to a failure the user can act on: a target
// whose encoding (targetEncoding, once pre-data has looked; "" before)
// cannot hold the text of an archive in archiveEncoding, or a role that
// may not take the archive's ownership and privileges.
func explain(err error, archiveEncoding, targetEncoding string, opts Options) error {
	var refusal encodingRefusal
	switch {
	case errors.As(err, &refusal):
		return err
	case isEncodingError(err) && targetEncoding != "" && targetEncoding != archiveEncoding:
		return fmt.Errorf("%w (this archive's text is %s, which a %s database cannot hold: restore into a %s database)", err, archiveEncoding, targetEncoding, wideEnough(archiveEncoding))
	case missingRole(err) != "" && !(opts.NoOwner && opts.NoACL):
		return fmt.Errorf("%w (the archive's objects name role %q, which the target server lacks: create it first (dump --all carries the roles), or leave out ownership and privileges with -O (--no-owner) and -x (--no-privileges))", err, missingRole(err))
	case isPrivilegeError(err) && !(opts.NoOwner && opts.NoACL):
		return fmt.Errorf("%w (restoring as a role that does not own the archive's objects? -O (--no-owner) and -x (--no-privileges) leave out ownership and privileges)", err)
	case opts.UseList != "" && strings.Contains(err.Error(), "violates foreign key constraint"):
		return fmt.Errorf("%w (the -L list keeps this foreign key but not all the rows it refers to: keep the referenced table's TABLE DATA entry, or comment out the FK CONSTRAINT entry)", err)
	}
	return err
}

// missingRole is the role that err says does not exist, or "": the
// server quotes the name as it is, quotes inside it included.
func missingRole(err error) string {
	msg := err.Error()
	i := strings.Index(msg, `role "`)
	j := strings.Index(msg, `" does not exist`)
	if i < 0 || j < i+len(`role "`) {
		return ""
	}
	return msg[i+len(`role "`) : j]
}
